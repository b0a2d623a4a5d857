"""The history judge (analysis/history.py): series built by hand for its rules, result folders
written with ResultWriter for the command line (compare with many sweeps, history), and the
figures docs/guides/comparing-and-history.md gives, asserted on the recorded sweeps of this machine."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_compare import Run, _samples, other_machine, write_folder

from fixed_web_platform.analysis.compare import Verdict
from fixed_web_platform.analysis.history import (
    HISTORY_MIN,
    Night,
    SweepFigures,
    View,
    change_points,
    expand_sweeps,
    history_compare,
    judge_history,
    judge_series,
    steps,
    sweep_figures,
)
from fixed_web_platform.cli.compare import compare_command, history_command
from fixed_web_platform.report.history import format_history
from fixed_web_platform.results.reader import CONFIG_KEY, load
from fixed_web_platform.vocabulary import Outcome
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload


def _nights(values: list[float]) -> list[Night]:
    return [Night(f"n{i:02d}", "", v, math.nan, math.nan, 5) for i, v in enumerate(values)]


def _noise(n: int, sd: float, seed: int = 0) -> list[float]:
    return [float(x) for x in sd * np.random.default_rng(seed).standard_normal(n)]


# ---------------------------------------------------------------------------------------------
# One series


def test_a_step_on_the_newest_night_is_called_with_its_size() -> None:
    values = _noise(15, 0.03) + [math.log(1.5)]
    j = judge_series(View.SESSION, _nights(values))
    assert j.verdict is Verdict.REGRESSION
    assert j.nights_after == 1 and j.since == "n15"
    assert 0.4 < j.effect < 0.6
    assert j.history_nights == 15 and j.limit < 0.2


def test_a_step_below_the_limit_the_first_night_is_called_when_it_persists() -> None:
    # alternating +-0.06: a 1.25x step is within the one-night limit, beyond the two-night one
    history = [0.06 * (-1) ** i for i in range(16)]
    step = math.log(1.25)
    first = judge_series(View.SESSION, _nights([*history, step]))
    assert first.verdict is Verdict.UNCHANGED, first
    second = judge_series(View.SESSION, _nights([*history, step, step]))
    assert second.verdict is Verdict.REGRESSION
    assert second.nights_after == 2 and second.since == "n16"


def test_a_lone_outlier_the_night_before_is_not_a_step() -> None:
    history = _noise(15, 0.03, seed=1)
    j = judge_series(View.SESSION, _nights([*history, math.log(3.0), 0.0]))
    assert j.verdict is Verdict.UNCHANGED and j.nights_after == 1


def test_a_faster_night_is_an_improvement_not_a_regression() -> None:
    j = judge_series(View.ABSOLUTE, _nights([*_noise(12, 0.03), math.log(0.5)]))
    assert j.verdict is Verdict.IMPROVEMENT and j.effect < -0.4


def test_too_short_a_history_is_insufficient() -> None:
    j = judge_series(View.SESSION, _nights([0.0] * (HISTORY_MIN - 1) + [math.log(3.0)]))
    assert j.verdict is Verdict.INSUFFICIENT and j.history_nights == HISTORY_MIN - 1


def test_a_history_cut_short_by_a_change_point_is_insufficient_with_its_length() -> None:
    quiet = _noise(10, 0.02, seed=4)
    stepped = [math.log(1.5) + x for x in _noise(3, 0.02, seed=5)]
    j = judge_series(View.SESSION, _nights([*quiet, *stepped, math.log(3.0)]))
    assert j.verdict is Verdict.INSUFFICIENT
    assert j.history_nights == 3 and "3 since its last change point" in j.note


def test_a_step_is_found_in_a_short_series() -> None:
    for n in (6, 8, 10):
        half = n // 2
        values = [*_noise(half, 0.02, seed=n), *(math.log(2.0) + x for x in _noise(n - half, 0.02, seed=n + 1))]
        assert change_points(values) == [half], n


def test_below_the_minimum_effect_is_unchanged_however_significant() -> None:
    j = judge_series(View.SESSION, _nights([0.0] * 20 + [math.log(1.05)]))
    assert j.verdict is Verdict.UNCHANGED


def test_pooling_peers_spread_widens_a_too_quiet_series() -> None:
    quiet = [0.001 * (-1) ** i for i in range(10)]
    alone = judge_series(View.SESSION, _nights([*quiet, math.log(1.3)]))
    noisy_peers = [_nights([*_noise(10, 0.25, seed=s), 0.0]) for s in range(4)]
    pooled = judge_series(View.SESSION, _nights([*quiet, math.log(1.3)]), noisy_peers)
    assert alone.verdict is Verdict.REGRESSION
    assert pooled.verdict is Verdict.UNCHANGED and pooled.pooled_series == 5
    assert pooled.limit > alone.limit


def test_the_history_restarts_after_an_earlier_step() -> None:
    before, after = _noise(10, 0.03, seed=2), [math.log(2.0) + x for x in _noise(10, 0.03, seed=3)]
    series = _nights([*before, *after, math.log(2.0)])
    j = judge_series(View.SESSION, series)
    assert j.verdict is Verdict.UNCHANGED  # judged against the nights since the step, not all 20
    assert j.history_nights == 10
    found = steps(series)
    assert [s.index for s in found] == [10] and 0.8 < found[0].effect < 1.2


def test_noise_draws_no_change_point() -> None:
    for seed in range(20):
        assert change_points(_noise(30, 0.08, seed=seed)) == []


# ---------------------------------------------------------------------------------------------
# Sweeps: the session (drift-free) view and which view decides


def _config(workload: str, bits: int, browser: str = "chrome") -> tuple:
    values = {k: "" for k in CONFIG_KEY}
    values.update(browser=browser, engine="harness", platform="webgpu", precision_mode="standard",
                  kind="matmul", workload=workload, bits_requested=bits, block_size=32, act_bits=32)
    return tuple(values[k] for k in CONFIG_KEY)


CONFIGS = [_config(w, b) for w in ("a", "b") for b in (8, 4)]


def _sweep(name: str, seed: int, factors: dict[tuple, float] | None = None, everything: float = 1.0,
           configs: list[tuple] = CONFIGS) -> SweepFigures:
    rng = np.random.default_rng(seed)
    rounds = {}
    for i, c in enumerate(configs):
        base = math.log(1.0 + i) + math.log(everything) + math.log((factors or {}).get(c, 1.0))
        rounds[c] = {(c[CONFIG_KEY.index("browser")], r): base + 0.02 * float(rng.standard_normal())
                     for r in range(5)}
    return SweepFigures(name, f"2026-11-{seed + 1:02d}", rounds)


def test_one_configuration_slower_in_its_session_is_a_regression_in_the_session_view() -> None:
    sweeps = [_sweep(f"s{i}", i) for i in range(12)] + [_sweep("new", 99, {CONFIGS[1]: 1.5})]
    entries = {e.config: e for e in judge_history(sweeps)}
    slowed = entries[CONFIGS[1]]
    assert slowed.verdict is Verdict.REGRESSION and slowed.decided_by is View.SESSION
    assert all(entries[c].verdict is Verdict.UNCHANGED for c in CONFIGS if c != CONFIGS[1])


def test_a_whole_session_moving_is_reported_not_called() -> None:
    sweeps = [_sweep(f"s{i}", i) for i in range(12)] + [_sweep("new", 99, everything=1.8)]
    entries = judge_history(sweeps)
    for e in entries:
        assert e.decided_by is View.SESSION and e.verdict is Verdict.UNCHANGED
        assert e.judgement(View.ABSOLUTE).verdict is Verdict.REGRESSION
        assert "whole browser session" in e.note and "as a whole ran +80" in e.note


def test_a_configuration_alone_in_its_session_is_judged_on_its_own_latency() -> None:
    alone = [_config("a", 8, browser="firefox")]
    sweeps = [_sweep(f"s{i}", i, configs=alone) for i in range(8)] + [_sweep("new", 99, everything=2.0,
                                                                            configs=alone)]
    (entry,) = judge_history(sweeps)
    assert entry.decided_by is View.ABSOLUTE and entry.verdict is Verdict.REGRESSION
    assert View.SESSION not in entry.series


def test_planting_in_figures_is_planting_in_the_raw_samples(tmp_path: Path) -> None:
    """SweepFigures.shifted (what the benchmark plants) equals multiplying the raw samples."""
    runs = [Run(bits=b, workload=w, repetition=r, samples=_samples(5.0 + b, seed=r * 10 + b))
            for r in range(3) for b in (8, 4) for w in (Workload("a", 1, 64, 64), Workload("b", 1, 64, 128))]
    slow = [Run(bits=x.bits, workload=x.workload, repetition=x.repetition,
                samples=[s * 1.5 for s in x.samples] if (x.bits, x.workload.name) == (4, "a") else x.samples)
            for x in runs]
    plain = sweep_figures(load(write_folder(tmp_path / "plain", runs)))
    scaled = sweep_figures(load(write_folder(tmp_path / "slow", slow)))
    config = next(c for c in plain.rounds if c[CONFIG_KEY.index("workload")] == "a"
                  and c[CONFIG_KEY.index("bits_requested")] == 4)
    shifted = plain.shifted(config, 1.5)
    for c in plain.rounds:
        for session, value in scaled.rounds[c].items():
            assert shifted.rounds[c][session] == pytest.approx(value, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# Command line: compare with many sweeps, history


def _night_runs(seed: int, slow: float = 1.0, steady_class: str = "flat") -> list[Run]:
    out = []
    for r in range(5):
        for w in (Workload("a", 1, 64, 64), Workload("b", 1, 64, 128), Workload("c", 1, 128, 128)):
            factor = slow if w.name == "a" else 1.0
            out.append(Run(bits=4, workload=w, repetition=r, pages=2, steady_class=steady_class if w.name == "a" else "flat",
                           samples=[s * factor for s in _samples(3.0 + len(w.name) * w.n / 64,
                                                                 noise=0.02, seed=seed * 100 + r)]))
    return out


def _history_folders(root: Path, nights: int, slow_last: float = 1.0, last_class: str = "flat") -> list[Path]:
    folders = []
    for i in range(nights):
        slow, steady = (slow_last, last_class) if i == nights - 1 else (1.0, "flat")
        folders.append(write_folder(root / f"night{i:02d}", _night_runs(i, slow, steady)))
        env = json.loads((folders[-1] / "environment.json").read_text())
        env["created_utc"] = f"2026-11-{i + 1:02d}T03:17:00Z"
        (folders[-1] / "environment.json").write_text(json.dumps(env))
    return folders


def test_compare_with_a_history_calls_a_planted_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folders = _history_folders(tmp_path / "h", 9, slow_last=1.6)
    out = tmp_path / "out" / "history.md"
    assert compare_command([*map(str, folders), "--output", str(out)]) == 1
    text = out.read_text()
    assert "**regression**: chrome/webgpu standard 4-bit block32 a 1x64x64" in text
    assert "session view +6" in text  # +60%, decided in the drift-free view
    plots = list((tmp_path / "out" / "history-plots").glob("*.png"))
    assert len(plots) == 3 and all(p.stat().st_size > 5000 for p in plots)
    assert text.count("![") == 3
    capsys.readouterr()


def test_a_night_without_a_steady_state_is_judged_on_its_whole_distribution(tmp_path: Path) -> None:
    folders = _history_folders(tmp_path / "h", 9, slow_last=1.6, last_class="no steady state")
    result = history_compare([load(f) for f in folders])
    entry = next(e for e in result.history if e.config[CONFIG_KEY.index("workload")] == "a")
    assert entry.verdict is Verdict.REGRESSION
    assert "no steady state in the newest sweep: judged on its whole distribution" in entry.note
    calm = history_compare([load(f) for f in _history_folders(tmp_path / "calm", 9, last_class="no steady state")])
    assert not any(e.verdict.is_regression for e in calm.comparison.entries)


def test_a_folder_of_sweeps_is_its_sweeps_oldest_first(tmp_path: Path) -> None:
    folders = _history_folders(tmp_path / "h", 7)
    assert expand_sweeps([tmp_path / "h"]) == folders
    assert compare_command([str(tmp_path / "h")]) == 0


def test_a_short_history_falls_back_to_the_previous_sweep(tmp_path: Path) -> None:
    folders = _history_folders(tmp_path / "h", 3, slow_last=2.0)
    judged = history_compare([load(f) for f in folders])
    called = [e for e in judged.comparison.entries if e.verdict is Verdict.REGRESSION]
    assert len(called) == 1 and "judged against night01 alone" in called[0].note
    text = format_history(judged)
    assert "nan" not in text
    assert "| regression | previous sweep | +" in text


def test_a_fixed_configuration_that_regressed_against_its_history_is_a_regression(tmp_path: Path) -> None:
    folders = _history_folders(tmp_path / "h", 8)
    crashed = [r if r.workload.name != "a" else Run(bits=4, workload=r.workload, repetition=r.repetition,
                                                     outcome=Outcome.CRASH) for r in _night_runs(8)]
    folders.append(write_folder(tmp_path / "h" / "night08", crashed))
    folders.append(write_folder(tmp_path / "h" / "night09", _night_runs(9, slow=1.6)))
    judged = history_compare([load(f) for f in folders])
    (entry,) = [e for e in judged.comparison.entries if e.config[CONFIG_KEY.index("workload")] == "a"]
    assert entry.verdict is Verdict.REGRESSION
    assert "against night08 alone: fixed" in entry.note


def test_sweeps_of_another_set_up_are_left_out_of_the_history(tmp_path: Path) -> None:
    folders = _history_folders(tmp_path / "h", 6)
    other = other_machine(write_folder(tmp_path / "other", _night_runs(50)))
    judged = history_compare([load(f) for f in [other, *folders]])
    assert len(judged.sweeps) == 6 and len(judged.left_out) == 1
    assert "cpu_count" in judged.left_out[0]


def test_no_matching_history_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = other_machine(write_folder(tmp_path / "a", _night_runs(1)))
    b = other_machine(write_folder(tmp_path / "b", _night_runs(2)))
    c = write_folder(tmp_path / "c", _night_runs(3))
    assert compare_command([str(a), str(b), str(c)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no earlier sweep" in err[0] and "--force" in err[0]


def test_history_adds_keeps_and_judges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folders = _history_folders(tmp_path / "nights", 8, slow_last=1.6)
    history = tmp_path / "history"
    codes = []
    for f in folders:
        codes.append(history_command([str(history), str(f), "--keep", "7"]))
        if len(codes) == 1:
            assert "nothing to judge it against yet" in capsys.readouterr().out
    assert codes == [0] * 7 + [1]
    kept = expand_sweeps([history])
    assert len(kept) == 7 and kept[-1].name.startswith("20261108")
    assert sorted(p.name for p in kept[-1].iterdir()) == ["environment.json", "results.csv", "samples.jsonl"]


def test_history_takes_a_sweep_without_a_date_as_the_newest(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    folders = _history_folders(tmp_path / "nights", 7, slow_last=1.6)
    env = json.loads((folders[-1] / "environment.json").read_text())
    del env["created_utc"]
    (folders[-1] / "environment.json").write_text(json.dumps(env))
    history = tmp_path / "history"
    codes = [history_command([str(history), str(f)]) for f in folders]
    assert codes == [0] * 6 + [1]
    out = capsys.readouterr().out
    newest = expand_sweeps([history])[-1]
    assert f"Newest sweep `{newest.name}`" in out and newest.name.startswith("20")


def test_history_refuses_a_sweep_it_holds_judges_a_new_browser_and_starts_anew_on_a_new_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folders = _history_folders(tmp_path / "nights", 6)
    history = tmp_path / "history"
    for f in folders:
        history_command([str(history), str(f)])
    capsys.readouterr()
    assert history_command([str(history), str(folders[-1])]) == 2
    assert "already in the history" in capsys.readouterr().err
    upgraded = write_folder(tmp_path / "upgraded", _night_runs(50, slow=3.0), versions={"chrome": "154.0.0.0"})
    assert history_command([str(history), str(upgraded)]) == 1  # a known change point, judged
    assert "chrome 153.0.0.0 -> 154.0.0.0: 4-bit 1x64x64 +200.0% slower at the version change" in capsys.readouterr().out
    moved = other_machine(write_folder(tmp_path / "moved", _night_runs(51)))
    assert history_command([str(history), str(moved)]) == 0
    assert "it starts a new history" in capsys.readouterr().out


def test_history_bad_input_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert history_command([str(tmp_path / "h"), str(tmp_path / "missing")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    folder = _history_folders(tmp_path / "n", 1)[0]
    assert history_command([str(tmp_path / "h"), str(folder), "--keep", "1"]) == 2
    assert "--keep" in capsys.readouterr().err


def test_the_report_shows_the_history_with_a_plot_per_configuration(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from fixed_web_platform.cli.report import report_command

    folders = _history_folders(tmp_path / "h", 8, slow_last=1.6)
    out = tmp_path / "report"
    assert report_command([str(folders[-1]), "--history", str(tmp_path / "h"), "--output-dir", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "History: night07 against 7 earlier sweep(s)" in page
    assert "regression: chrome/webgpu standard 4-bit block32 a 1x64x64: +6" in page
    images = [m for m in page.split('src="')[1:] if m.startswith("history-plots-1/")]
    assert len(images) == 3 and all((out / m.split('"')[0]).stat().st_size > 5000 for m in images)
    single = tmp_path / "one"
    _history_folders(single, 1)
    assert report_command([str(folders[-1]), "--history", str(single), "--output-dir", str(out)]) == 0
    assert "nothing to judge yet" in capsys.readouterr().out
    assert report_command([str(folders[-1]), "--history", str(tmp_path / "none"), "--output-dir", str(out)]) == 2


# ---------------------------------------------------------------------------------------------
# A browser update in a recorded history: a known change point


NIGHTLY = Path(__file__).parent / "fixtures" / "false_alarms" / "nightly_history.tar.gz"
UPDATE_NIGHT, LATER_NIGHT = 8, 16
"""The recorded nightly history (23 sweeps of the same code) with Chromium updated on night 8."""


@pytest.fixture(scope="module")
def nightly(tmp_path_factory: pytest.TempPathFactory) -> list:
    import tarfile

    root = tmp_path_factory.mktemp("nightly")
    with tarfile.open(NIGHTLY) as tar:
        tar.extractall(root, filter="data")
    return [load(f) for f in sorted(root.glob("n??"))][:LATER_NIGHT + 1]


def _updated(rs, version: str):  # noqa: ANN001, ANN202
    """The sweep as if Chromium ``version`` had run it (its rows and environment.json say so)."""
    import dataclasses

    env = json.loads(json.dumps(rs.environment))
    env["browsers"]["chrome"]["version"] = version
    return dataclasses.replace(rs, rows=rs.rows.assign(browser_version=version), environment=env)


def _with_update(nightly: list, plants: dict[int, float]) -> list:  # noqa: ANN001
    """Nights from UPDATE_NIGHT on run a newer Chromium; from each night in ``plants`` on, the
    4-bit runs' raw samples are multiplied by its factor (on top of earlier plants)."""
    from fixed_web_platform.analysis.false_alarms import slowed

    out = []
    for i, rs in enumerate(nightly):
        if i >= UPDATE_NIGHT:
            rs = _updated(rs, "156.0.7000.1")
        for start, factor in plants.items():
            if i >= start:
                rs = slowed(rs, factor, bits={4})
        out.append(rs)
    return out


def _four_bit_entries(judged) -> list:  # noqa: ANN001
    return [e for e in judged.comparison.entries if e.config[CONFIG_KEY.index("bits_requested")] == 4]


def test_a_step_at_a_browser_update_is_called_and_attributed_to_it(nightly) -> None:  # noqa: ANN001
    sets = _with_update(nightly, {UPDATE_NIGHT: 1.5, LATER_NIGHT: 1.5})
    at_update = _four_bit_entries(history_compare(sets[:UPDATE_NIGHT + 1]))
    assert len(at_update) == 2  # both shapes
    for e in at_update:
        assert e.verdict is Verdict.REGRESSION
        assert e.note.startswith("chrome 153.0.8010.0 -> 156.0.7000.1: 4-bit "), e.note
        assert "slower at the version change" in e.note
    later = _four_bit_entries(history_compare(sets))
    assert len(later) == 2
    for e in later:
        assert e.verdict is Verdict.REGRESSION and "->" not in e.note, e.note
        assert f"against {LATER_NIGHT - UPDATE_NIGHT} nights of history" in e.note  # restarted at the update


def test_a_browser_update_without_a_step_calls_nothing(nightly) -> None:  # noqa: ANN001
    sets = _with_update(nightly, {})
    figures = [sweep_figures(rs) for rs in sets]
    for t in range(UPDATE_NIGHT, len(figures)):
        called = [e for e in judge_history(figures[:t + 1], with_steps=False) if e.verdict.is_regression]
        assert not called, (t, called)
    unplanted = history_compare(sets[:UPDATE_NIGHT + 1]).comparison.entries
    assert not any(e.verdict.is_regression for e in unplanted)
    assert all("chrome 153.0.8010.0 -> 156.0.7000.1" in e.note for e in unplanted)

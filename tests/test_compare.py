"""Unit tests for fixed_web_platform.compare: result folders are built on disk with ResultWriter
(no browser), then compared through the API and the command line."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixed_web_platform.analysis.compare import (
    Comparison,
    MetadataMismatch,
    Verdict,
    compare,
    compare_builds,
)
from fixed_web_platform.cli.compare import compare_command, format_comparison
from fixed_web_platform.plan import RunSpec
from fixed_web_platform.results.reader import CONFIG_KEY, ResultSchemaError, load
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import (
    SCHEMA_VERSION,
    BrowserName,
    EngineName,
    Outcome,
    Platform,
    PrecisionMode,
)
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

WORKLOAD = Workload("bert-base-ffn-gemv", 1, 768, 3072)
OTHER = Workload("bert-base-attn-gemm", 128, 768, 768)


def _samples(median: float, n: int = 30, noise: float = 0.03, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in median * (1 + noise * rng.standard_normal(n))]


@dataclasses.dataclass
class Run:
    """One run to write: its configuration, outcome and (for ok runs) samples and error figures."""

    bits: int = 4
    outcome: Outcome = Outcome.OK
    samples: list[float] | None = None
    repetition: int = 0
    workload: Workload = WORKLOAD
    browser: BrowserName = BrowserName.CHROME
    rel_error_vs_float: float = 8.0e-2
    rel_error_vs_dequantized: float = 5.0e-7
    kernel_tolerance: float = 1e-5
    reason: str = ""
    timing_source: str = "gpu-timestamp"
    pages: int = 5
    """Page loads the samples are split into (samples_per_page), as --repeat does."""
    steady_class: str = "flat"
    browser_version: str = ""
    """The row's browser_version ('': environment.json's version of its browser stands)."""
    engine_version: str = ""
    engine: EngineName = EngineName.HARNESS
    browser_build: str = ""
    engine_build: str = ""


def write_folder(path: Path, runs: list[Run], *, versions: dict[str, str] | None = None) -> Path:
    writer = ResultWriter(path)
    for name, version in (versions or {"chrome": "153.0.0.0"}).items():
        writer.record_browser(name, {"version": version})
    for run_id, r in enumerate(runs):
        spec = RunSpec(run_id=run_id, browser=r.browser, platform=Platform.WEBGPU,
                       workload=r.workload, bits=r.bits, block_size=32, repetition=r.repetition,
                       precision_mode=PrecisionMode.STANDARD, seed=0, engine=r.engine,
                       browser_build=r.browser_build, engine_build=r.engine_build)
        row = ResultRow.without_measurement(spec, r.outcome, r.reason or
                                            ("" if r.outcome is Outcome.OK else "it broke"),
                                            browser_version=r.browser_version)
        row = dataclasses.replace(row, engine_version=r.engine_version)
        if r.outcome is not Outcome.OK:
            writer.add(row)
            continue
        samples = r.samples if r.samples is not None else _samples(10.0, seed=run_id)
        a = np.asarray(samples)
        row = dataclasses.replace(
            row, bits_executed=r.bits, latency_ms_median=float(np.median(a)),
            latency_ms_p10=float(np.percentile(a, 10)), latency_ms_p90=float(np.percentile(a, 90)),
            latency_cv=float(a.std(ddof=1) / a.mean()), n_samples=len(samples),
            timing_source=r.timing_source, gpu_ms_median=float(np.median(a)),
            rel_error_vs_float=r.rel_error_vs_float,
            rel_error_vs_dequantized=r.rel_error_vs_dequantized,
            kernel_tolerance=r.kernel_tolerance, steady_class=r.steady_class,
        )
        gpu = samples if r.timing_source == "gpu-timestamp" else []
        per_page = [len(chunk) for chunk in np.array_split(np.arange(len(samples)), r.pages)]
        writer.add(dataclasses.replace(row, pages=r.pages),
                   {"timing_source": r.timing_source, "gpu_ms": gpu, "samples_per_page": per_page,
                    "wall_ms": [s * 1.5 for s in samples], "cold_ms": 50.0})
    return path


def _pair(tmp_path: Path, base: list[Run], cur: list[Run], **kw: Any) -> tuple[Path, Path]:
    return (write_folder(tmp_path / "base", base, **kw.get("base_kw", {})),
            write_folder(tmp_path / "cur", cur, **kw.get("cur_kw", {})))


def _compare(b: Path, c: Path, **kw: Any) -> Comparison:
    return compare(load(b), load(c), **kw)


def _only(comparison: Comparison) -> Any:
    assert len(comparison.entries) == 1, comparison.entries
    return comparison.entries[0]


def test_planted_2x_slowdown_is_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=1))], [Run(samples=_samples(20.0, seed=2))])
    e = _only(_compare(b, c))
    assert e.verdict is Verdict.REGRESSION
    assert e.interval.low > 1.8 and e.interval.level == 0.999
    assert e.effect == pytest.approx(1.0, abs=0.05)
    assert (e.n_baseline, e.n_current) == (30, 30)
    assert (e.pages_baseline, e.pages_current) == (5, 5)
    assert e.baseline_median == pytest.approx(10.0, rel=0.03)
    assert e.current_median == pytest.approx(20.0, rel=0.03)
    # matmul rows leave the whole-model part of the key (model ... inputs, the encoder's batch and
    # sequence, the decoder's prompt, new and evaluated tokens, the speech kind's clips and token limit) blank
    assert e.config == ("chrome", "", "harness", "", "webgpu", "standard", "", "", "", "matmul", "bert-base-ffn-gemv", "1", "768",
                        "3072", "", "", "", "", "", "", "", "", "", "", "", "", 4, "", "block", "minmax", 32, 32, "", "", "", "", "")
    assert e.shape == "1x768x3072" and e.label.endswith("bert-base-ffn-gemv 1x768x3072")
    assert dict(zip(CONFIG_KEY, e.config)) == e.config_dict

    out_md = tmp_path / "reports" / "cmp.md"
    assert compare_command([str(b), str(c), "--output", str(out_md)]) == 1
    printed = capsys.readouterr().out
    assert "| regression |" in printed
    assert "1 regression" in printed and "REGRESSION" in printed
    assert out_md.read_text() == printed


def _paged(levels: list[float], per_page: int = 40, noise: float = 0.005, seed: int = 0) -> list[float]:
    """Samples of page loads whose medians sit at ``levels`` (page-to-page spread), each page
    with little spread of its own."""
    rng = np.random.default_rng(seed)
    return [float(x) for level in levels for x in level * (1 + noise * rng.standard_normal(per_page))]


def test_page_to_page_spread_is_the_noise_not_the_iterations(tmp_path: Path) -> None:
    # five page loads a side; pages differ by up to 30% (what a busy machine does), iterations
    # within a page by 0.5%. Pooling iterations as independent samples calls +16% significant...
    base_levels, cur_levels = [10.0, 11.0, 9.0, 10.5, 9.5], [9.8, 13.0, 11.6, 12.5, 10.2]
    base, cur = _paged(base_levels, seed=1), _paged(cur_levels, seed=2)
    from scipy import stats
    assert stats.mannwhitneyu(cur, base).pvalue < 1e-6
    b, c = _pair(tmp_path, [Run(samples=base)], [Run(samples=cur)])
    e = _only(_compare(b, c))
    # ...but resampling page loads, the change is within their spread
    assert e.effect > 0.10
    assert e.interval.low < 1 < e.interval.high
    assert e.verdict is Verdict.UNCHANGED and "within the spread between page loads" in e.note
    assert compare_command([str(b), str(c)]) == 0


def test_one_page_load_per_side_is_never_a_regression(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=1), pages=1)],
                 [Run(samples=_samples(30.0, seed=2), pages=1)])
    e = _only(_compare(b, c))
    assert e.effect > 1.5 and (e.pages_baseline, e.pages_current) == (1, 1)
    assert e.verdict is Verdict.INSUFFICIENT and not e.verdict.is_regression
    assert "1/1 page load" in e.note and "--repetitions 5" in e.note
    assert compare_command([str(b), str(c)]) == 0


def test_repetitions_are_the_units_when_there_are_several(tmp_path: Path) -> None:
    # three repetitions a side, each five page loads that agree closely within the repetition, but
    # the repetitions (browser sessions, moments of the sweep) differ by up to 30%: the interval
    # is the repetitions' spread, so +12% is not called, though every page load would call it
    base = [Run(repetition=r, samples=_paged([level] * 5, per_page=8, seed=60 + r))
            for r, level in enumerate((10.0, 13.0, 9.0))]
    cur = [Run(repetition=r, samples=_paged([level] * 5, per_page=8, seed=70 + r))
           for r, level in enumerate((11.2, 14.6, 10.1))]
    b, c = _pair(tmp_path, base, cur)
    e = _only(_compare(b, c))
    assert (e.pages_baseline, e.pages_current) == (3, 3)
    assert e.effect > 0.10 and e.interval.low < 1
    assert e.verdict is Verdict.UNCHANGED and "between repetitions" in e.note


def test_few_page_loads_call_only_a_change_far_beyond_every_page(tmp_path: Path) -> None:
    for factor, verdict in ((2.5, Verdict.REGRESSION), (1.6, Verdict.INSUFFICIENT)):
        d = tmp_path / f"x{factor}"
        b, c = _pair(d, [Run(samples=_paged([10.0, 10.4], seed=3), pages=2)],
                     [Run(samples=_paged([10.0 * factor, 10.4 * factor], seed=4), pages=2)])
        e = _only(_compare(b, c))
        assert (e.pages_baseline, e.pages_current) == (2, 2)
        assert e.verdict is verdict, (factor, e)
    assert "only 2/2 page loads" in _only(_compare(tmp_path / "x2.5" / "base", tmp_path / "x2.5" / "cur")).note


def test_same_distribution_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=11))], [Run(samples=_samples(10.0, seed=12))])
    c_ = _compare(b, c)
    e = _only(c_)
    assert e.verdict is Verdict.UNCHANGED
    assert abs(e.effect) < 0.10
    assert not c_.has_regression
    assert compare_command([str(b), str(c)]) == 0
    assert "1 unchanged" in capsys.readouterr().out


def test_2x_speedup_is_an_improvement(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(20.0, seed=3))], [Run(samples=_samples(10.0, seed=4))])
    e = _only(_compare(b, c))
    assert e.verdict is Verdict.IMPROVEMENT
    assert e.effect == pytest.approx(-0.5, abs=0.03)
    assert compare_command([str(b), str(c)]) == 0


def test_tiny_significant_shift_is_below_min_effect(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, n=200, noise=0.005, seed=5))],
                 [Run(samples=_samples(10.1, n=200, noise=0.005, seed=6))])
    e = _only(_compare(b, c))
    assert e.interval.low > 1  # really significant...
    assert 0 < e.effect < 0.05  # ...but small
    assert e.verdict is Verdict.UNCHANGED
    assert "minimum effect" in e.note
    # with no minimum effect the same data is a regression
    assert _only(_compare(b, c, min_effect=0.0)).verdict is Verdict.REGRESSION
    assert compare_command([str(b), str(c), "--min-effect", "0"]) == 1


def test_ok_to_crash_is_a_new_failure(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run()], [Run(outcome=Outcome.CRASH, reason="renderer died")])
    comparison = _compare(b, c)
    e = _only(comparison)
    assert e.verdict is Verdict.NEW_FAILURE
    assert "crash" in e.note and "renderer died" in e.note
    assert comparison.has_regression
    assert compare_command([str(b), str(c)]) == 1


def test_crash_to_ok_is_fixed(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(outcome=Outcome.CRASH)], [Run()])
    comparison = _compare(b, c)
    assert _only(comparison).verdict is Verdict.FIXED
    assert not comparison.has_regression
    assert compare_command([str(b), str(c)]) == 0


def test_failing_on_both_sides_is_not_new(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(outcome=Outcome.TIMEOUT)], [Run(outcome=Outcome.FAILED)])
    comparison = _compare(b, c)
    assert _only(comparison).verdict is Verdict.STILL_FAILING
    assert not comparison.has_regression


def test_unsupported_or_unavailable_is_skipped(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(), Run(bits=2, outcome=Outcome.UNSUPPORTED, reason="no int2")],
                 [Run(outcome=Outcome.UNAVAILABLE, reason="chrome not installed"), Run(bits=2)])
    comparison = _compare(b, c)
    verdicts = {e.config_dict["bits_requested"]: e for e in comparison.entries}
    assert verdicts[4].verdict is Verdict.SKIPPED and "chrome not installed" in verdicts[4].note
    assert verdicts[2].verdict is Verdict.SKIPPED and "no int2" in verdicts[2].note
    assert not comparison.has_regression


def test_kernel_error_beyond_tolerance_is_an_accuracy_regression(tmp_path: Path) -> None:
    same = _samples(10.0, seed=7)
    b, c = _pair(tmp_path, [Run(samples=same)],
                 [Run(samples=same, rel_error_vs_dequantized=3e-3, kernel_tolerance=1e-5)])
    comparison = _compare(b, c)
    e = _only(comparison)
    assert e.verdict is Verdict.ACCURACY_REGRESSION
    assert "tolerance" in e.note
    assert comparison.has_regression
    assert compare_command([str(b), str(c)]) == 1


def test_error_vs_float_growth(tmp_path: Path) -> None:
    same = _samples(10.0, seed=8)
    b, c = _pair(tmp_path, [Run(samples=same, rel_error_vs_float=0.08),
                            Run(bits=8, samples=same, rel_error_vs_float=1e-8)],
                 [Run(samples=same, rel_error_vs_float=0.10),  # +25%: a regression
                  Run(bits=8, samples=same, rel_error_vs_float=5e-8)])  # x5 but below 1e-6 absolute
    verdicts = {e.config_dict["bits_requested"]: e for e in _compare(b, c).entries}
    assert verdicts[4].verdict is Verdict.ACCURACY_REGRESSION and "error vs float" in verdicts[4].note
    assert verdicts[8].verdict is Verdict.UNCHANGED


def test_a_browser_version_change_is_attributed_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=1))], [Run(samples=_samples(14.0, seed=2))],
                 base_kw={"versions": {"chrome": "152.0"}}, cur_kw={"versions": {"chrome": "153.0"}})
    e = _only(_compare(b, c))
    assert e.verdict is Verdict.REGRESSION and e.version_change == "chrome 152.0 -> 153.0"
    assert e.note.startswith("chrome 152.0 -> 153.0: 4-bit 1x768x3072 +3") and "% slower" in e.note
    assert compare_command([str(b), str(c)]) == 1
    out = capsys.readouterr().out
    assert "Versions changed between the sides" in out and "chrome 152.0 -> 153.0: 4-bit" in out

    same = _pair(tmp_path / "same", [Run(samples=_samples(10.0, seed=1))], [Run(samples=_samples(10.0, seed=2))],
                 base_kw={"versions": {"chrome": "152.0"}}, cur_kw={"versions": {"chrome": "153.0"}})
    e = _only(_compare(*same))
    assert e.verdict is Verdict.UNCHANGED and "chrome 152.0 -> 153.0: 4-bit 1x768x3072 unchanged" in e.note


def test_an_engine_version_change_is_read_from_the_rows(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=1), engine_version="1.30.0", browser_version="153.0.1")],
                 [Run(samples=_samples(5.0, seed=2), engine_version="1.31.0-dev", browser_version="153.0.1")])
    e = _only(_compare(b, c))
    assert e.verdict is Verdict.IMPROVEMENT
    assert e.version_change == "harness 1.30.0 -> 1.31.0-dev"  # the rows' own version wins over environment.json
    assert e.note.startswith("harness 1.30.0 -> 1.31.0-dev: 4-bit 1x768x3072 -5")


def test_machine_mismatch_refused_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b, c = _pair(tmp_path, [Run()], [Run()])
    other_machine(c)
    with pytest.raises(MetadataMismatch, match="cpu_count"):
        _compare(b, c)
    assert compare_command([str(b), str(c)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--force" in err[0] and "cpu_count" in err[0]
    forced = _compare(b, c, force=True)
    assert _only(forced).verdict is Verdict.UNCHANGED
    assert forced.metadata_differences and "Warning" in format_comparison(forced)
    assert compare_command([str(b), str(c), "--force"]) == 0


def other_machine(folder: Path) -> Path:
    """The folder as if measured on another machine (environment.json's cpu_count)."""
    env_path = folder / "environment.json"
    env = json.loads(env_path.read_text())
    env["machine"]["cpu_count"] = (env["machine"]["cpu_count"] or 1) + 64
    env_path.write_text(json.dumps(env))
    return folder


def test_newer_schema_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b, c = _pair(tmp_path, [Run()], [Run()])
    env_path = c / "environment.json"
    env = json.loads(env_path.read_text())
    env["schema_version"] = SCHEMA_VERSION + 1
    env_path.write_text(json.dumps(env))
    with pytest.raises(ResultSchemaError):
        load(c)
    assert compare_command([str(b), str(c)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "newer" in err[0]


def test_bad_input_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = write_folder(tmp_path / "base", [Run()])
    for argv in ([str(b), str(tmp_path / "missing")], [str(b)], [str(b), str(b), "--alpha", "2"],
                 [str(b), str(b), "--min-effect", "x"], [str(b), str(tmp_path)]):
        assert compare_command(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), (argv, err)


def test_added_and_removed_configs(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(bits=4), Run(bits=8)], [Run(bits=4), Run(bits=2)])
    comparison = _compare(b, c)
    by_bits = {e.config_dict["bits_requested"]: e for e in comparison.entries}
    assert by_bits[8].verdict is Verdict.REMOVED and by_bits[8].n_baseline == 30
    assert by_bits[2].verdict is Verdict.ADDED and by_bits[2].n_current == 30
    assert not comparison.has_regression
    text = format_comparison(comparison)
    assert "| added |" in text and "| removed |" in text
    assert "1 added" in text and "1 removed" in text


def test_repetitions_are_pooled(tmp_path: Path) -> None:
    # five repetitions of one page load each: alone, each is one page per side (insufficient);
    # pooled, five units a side, and the 15% slowdown is found
    base = [Run(repetition=r, samples=_samples(10.0, n=6, noise=0.03, seed=20 + r), pages=1) for r in range(5)]
    cur = [Run(repetition=r, samples=_samples(11.5, n=6, noise=0.03, seed=30 + r), pages=1) for r in range(5)]
    b, c = _pair(tmp_path, base, cur)
    e = _only(_compare(b, c))
    assert (e.n_baseline, e.n_current) == (30, 30)
    assert (e.pages_baseline, e.pages_current) == (5, 5)
    pooled_b = [s for r in base for s in r.samples]
    assert e.baseline_median == pytest.approx(float(np.median(pooled_b)))
    assert e.verdict is Verdict.REGRESSION


def test_one_crashing_repetition_is_a_new_failure(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(repetition=r) for r in range(2)],
                 [Run(repetition=0), Run(repetition=1, outcome=Outcome.CRASH)])
    e = _only(_compare(b, c))
    assert e.verdict is Verdict.NEW_FAILURE
    assert e.current_outcome == "ok x1, crash x1"


def test_other_browsers_and_workloads_are_matched_separately(tmp_path: Path) -> None:
    base = [Run(samples=_samples(10.0, seed=40)), Run(workload=OTHER, samples=_samples(10.0, seed=41)),
            Run(browser=BrowserName.FIREFOX, samples=_samples(10.0, seed=42))]
    cur = [Run(samples=_samples(10.0, seed=43)), Run(workload=OTHER, samples=_samples(20.0, seed=44)),
           Run(browser=BrowserName.FIREFOX, samples=_samples(5.0, seed=45))]
    versions = {"chrome": "153", "firefox": "128.3esr"}
    b, c = _pair(tmp_path, base, cur, base_kw={"versions": versions}, cur_kw={"versions": versions})
    comparison = _compare(b, c)
    got = {(e.config_dict["browser"], e.config_dict["workload"]): e.verdict for e in comparison.entries}
    assert got == {("chrome", WORKLOAD.name): Verdict.UNCHANGED,
                   ("chrome", OTHER.name): Verdict.REGRESSION,
                   ("firefox", WORKLOAD.name): Verdict.IMPROVEMENT}
    assert comparison.entries[0].verdict is Verdict.REGRESSION  # most severe first


def test_markdown_cells_are_safe(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run()], [Run(outcome=Outcome.FAILED, reason="a | b\nc")])
    text = format_comparison(_compare(b, c))
    row = [line for line in text.splitlines() if "new-failure" in line][0]
    assert "a \\| b c" in row  # the one escaping rule of report/markdown.py
    header = text.splitlines()[2]
    bars = re.compile(r"(?<!\\)\|")
    assert len(bars.findall(row)) == len(bars.findall(header))


def test_different_timing_sources_are_not_compared(tmp_path: Path) -> None:
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=50))],
                 [Run(samples=_samples(10.0, seed=51), timing_source="wall-clock")])
    e = _only(_compare(b, c))
    assert e.verdict is Verdict.SKIPPED and "timing source" in e.note
    assert e.interval is None


def test_a_side_without_a_steady_state_is_judged_on_its_whole_distribution(tmp_path: Path) -> None:
    """A side whose series never settled is judged on every timed iteration, and says so; its
    units' spread is the interval's, so a drifting side gets the wider interval it deserves."""
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=60))],
                 [Run(samples=_samples(20.0, seed=61), steady_class="no steady state")])
    e = _only(_compare(b, c))
    assert e.verdict is Verdict.REGRESSION and "no steady state in current: judged on its whole" in e.note
    b, c = _pair(tmp_path / "same", [Run(samples=_samples(10.0, seed=60))],
                 [Run(samples=_samples(10.0, seed=61), steady_class="no steady state")])
    assert _only(_compare(b, c)).verdict is Verdict.UNCHANGED
    drifting = [s * (1 + 0.5 * i / 30) for i, s in enumerate(_samples(10.0, seed=61))]  # no level to speak of
    b, c = _pair(tmp_path / "drift", [Run(samples=_samples(10.0, seed=60))],
                 [Run(samples=drifting, steady_class="no steady state")])
    wide = _only(_compare(b, c)).interval
    assert wide.high / wide.low > 1.2


def test_non_finite_samples_are_dropped(tmp_path: Path) -> None:
    noisy = [*_samples(20.0, seed=52), float("nan"), float("inf")]  # NaN is written as null
    b, c = _pair(tmp_path, [Run(samples=_samples(10.0, seed=53))], [Run(samples=noisy)])
    e = _only(_compare(b, c))
    assert e.n_current == 30
    assert e.verdict is Verdict.REGRESSION


def test_builds_side_by_side_in_one_sweep_are_judged_against_the_first(tmp_path: Path) -> None:
    """Two Chromium binaries and two ORT builds in one sweep, rounds interleaved: the 4-bit runs
    planted 1.5x slower on the second binary are called and attributed to its version; nothing
    else is (the 8-bit runs, the engine builds), and the report's section says exactly that."""
    from fixed_web_platform.report.builds import builds_section

    runs = []
    for rep in range(3):
        for build, version in (("webnn", "153.0.8010.0"), ("chromium", "156.0.8078.114")):
            for bits in (8, 4):
                slow = 1.5 if (build, bits) == ("chromium", 4) else 1.0
                for engine, engine_build in ((EngineName.HARNESS, ""), (EngineName.ORT, ""),
                                             (EngineName.ORT, "1.31.0-dev")):
                    seed = len(runs)
                    runs.append(Run(bits=bits, repetition=rep, browser_build=build, browser_version=version,
                                    engine=engine, engine_build=engine_build,
                                    engine_version=engine_build or ("1.30.0" if engine is EngineName.ORT else ""),
                                    samples=_samples(10.0 * slow, seed=seed)))
    folder = write_folder(tmp_path / "sweep", runs)
    pairs = compare_builds(load(folder))
    assert len(pairs) == 6 + 4  # 2 bits x 3 engine builds across the binaries; 2 bits x 2 binaries across ORT's builds
    called = [p for p in pairs if p.entry.verdict is not Verdict.UNCHANGED]
    assert [(p.axis, p.baseline, p.current, p.entry.config_dict["bits_requested"]) for p in called] == [
        ("browser", "chrome@webnn", "chrome@chromium", 4)] * 3
    assert {p.entry.verdict for p in called} == {Verdict.REGRESSION}
    assert all(re.fullmatch(r"chrome 153.0.8010.0 -> 156.0.8078.114: 4-bit 1x768x3072 \+(4[5-9]|5[0-5])\.\d% slower",
                            p.entry.note) for p in called), [p.entry.note for p in called]
    assert {p.baseline for p in pairs if p.axis == "engine"} == {"ort"}
    md, _ = builds_section([folder], ["sweep"])
    listed = [line for line in md if line.startswith("- chrome@webnn -> chrome@chromium")]
    assert len(listed) == 3 and all("slower" in line for line in listed)

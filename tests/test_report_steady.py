"""Report on steady state (result schema 11): the class beside every latency figure (the worst of a
configuration's runs), the header's tally, one run-sequence plot per ok run that did not settle
flat, and folders from before schema 11 saying they were not judged. Hand-made result folders, no
browser."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixed_web_platform.plan import build_plan
from fixed_web_platform.report.render import build_report, load_sweeps
from fixed_web_platform.report.run_sequence import _pages, steady_section
from fixed_web_platform.report.steady import MARK, WORST_FIRST, worst_class
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads.matmul import MatmulWorkload

UNIT = MatmulWorkload("unit", 2, 64, 32)
FLOOR = 3


def _series(levels: list[tuple[int, float]], verdict: dict, *, gpu_last: int = 0) -> dict:
    """One page load's series: ``levels`` as (iterations, ms) runs of a level; the verdict as
    series/steady.py writes it (hand-made here: the report only draws what it is given)."""
    rng = np.random.default_rng(len(levels))
    wall = [ms * (1 + 0.01 * rng.standard_normal()) for n, ms in levels for _ in range(n)]
    start = list(np.cumsum([0.0, *wall[:-1]]))
    return {"wall_ms": wall, "start_ms": start, "gpu_ms": [w * 0.8 for w in wall[-gpu_last:]] if gpu_last else None,
            "floor_iterations": FLOOR, "stop_reason": "steady", "figures_from": verdict["steady_start"],
            "steady": {"change_points": [], "outliers": 0, "warmup_s": None, "level_ms": None, **verdict}}


FLAT = _series([(40, 10.0)], {"class": "flat", "steady_start": FLOOR, "level_ms": 10.0})
WARMUP = _series([(20, 14.0), (40, 10.0)], {"class": "warm-up", "steady_start": 20, "change_points": [20],
                                            "level_ms": 10.0})
NO_STEADY = _series([(10, 8.0), (10, 10.0), (10, 12.0), (10, 14.0)],
                    {"class": "no steady state", "steady_start": FLOOR, "change_points": [10, 20, 30]})
SLOWDOWN = _series([(20, 5.0), (40, 7.0)], {"class": "slowdown", "steady_start": 20, "change_points": [20],
                                            "level_ms": 5.6}, gpu_last=50)
SHORT = _series([(6, 9.0)], {"class": "too short", "steady_start": FLOOR})


def _ok(run, page: dict, timing: str = "wall-clock") -> tuple[ResultRow, dict]:
    figures = page["gpu_ms"] if timing == "gpu-timestamp" else page["wall_ms"]
    taken = figures[page["figures_from"] - (len(page["wall_ms"]) - len(figures)):]
    steady = page["steady"]
    start = page["start_ms"][page["figures_from"]] / 1000
    row = dataclasses.replace(
        ResultRow.without_measurement(run, Outcome.OK, "", browser_version="1.0"),
        bits_executed=run.bits, latency_ms_median=float(np.median(taken)),
        latency_ms_p10=float(np.percentile(taken, 10)), latency_ms_p90=float(np.percentile(taken, 90)),
        n_samples=len(taken), timing_source=timing, weight_bytes=1000, weight_bytes_f32=UNIT.n * UNIT.k * 4,
        rel_error_vs_float=0.01, rel_error_vs_dequantized=1e-7, kernel_tolerance=1e-5,
        steady_class=steady["class"], steady_tally=f"{steady['class']} x1", warmup_iterations=page["figures_from"],
        warmup_s=start, steady_samples=len(taken), stop_reason="steady", pages=1)
    return row, {"timing_source": timing, "wall_ms": page["wall_ms"][page["figures_from"]:],
                 "gpu_ms": taken if timing == "gpu-timestamp" else None, "samples_per_page": [len(taken)],
                 "series": [page]}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """chrome 32-bit: flat + warm-up; 8-bit: too short; 4-bit: warm-up + no steady state (two
    repetitions each); firefox 4-bit: slowdown on GPU timestamps; firefox 8-bit failed."""
    chrome = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [UNIT], (32, 8, 4), repetitions=2)
    firefox = [dataclasses.replace(r, run_id=100 + i) for i, r in
               enumerate(build_plan([BrowserName.FIREFOX], [Platform.WEBGPU], [UNIT], (8, 4)))]
    run = {(r.bits, r.repetition): r for r in chrome}
    writer = ResultWriter(tmp_path_factory.mktemp("steady") / "sweep")
    for spec, page, timing in ((run[32, 0], FLAT, "wall-clock"), (run[32, 1], WARMUP, "wall-clock"),
                               (run[8, 0], SHORT, "wall-clock"), (run[4, 0], WARMUP, "wall-clock"),
                               (run[4, 1], NO_STEADY, "wall-clock"), (firefox[1], SLOWDOWN, "gpu-timestamp")):
        writer.add(*_ok(spec, page, timing))
    writer.add(ResultRow.without_measurement(firefox[0], Outcome.FAILED, "GPUValidationError"))
    return writer.directory


@pytest.fixture(scope="module")
def built(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("steady-report")
    return build_report([folder], out), out


def _summary_table(md: str) -> pd.DataFrame:
    lines = [line for line in md.split("## Summary (ok runs)")[1].split("## Runs without")[0].splitlines()
             if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    return pd.DataFrame(cells[2:], columns=cells[0])


def test_worst_class_goes_no_steady_state_too_short_slowdown_warm_up_flat():
    order = [c.value for c in WORST_FIRST]
    assert order == ["no steady state", "too short", "slowdown", "warm-up", "flat"]
    for i, worst in enumerate(order):
        assert worst_class(order[i:][::-1]) == worst  # whatever else is there, the worst shows
    assert worst_class(["flat", ""]) == "flat"  # a run without a class does not hide a judged one
    assert worst_class([None, float("nan")]) == "not judged"


def test_the_summary_shows_the_worst_class_beside_the_median_and_marks_no_steady_state(built):
    files, _ = built
    table = _summary_table(files.markdown.read_text())
    cols = list(table.columns)
    assert cols.index("steady") == cols.index("median ms") - 1  # beside the figure it qualifies
    by = {(r["browser"], r["bits"]): r for _, r in table.iterrows()}
    assert by["chrome", "32"]["steady"] == "warm-up 0.28 s (1 of 2 runs)"  # flat + warm-up: warm-up
    assert by["chrome", "8"]["steady"] == "too short"
    assert by["chrome", "4"]["steady"] == "no steady state (1 of 2 runs)"  # warm-up + no steady state
    assert by["firefox", "4"]["steady"].startswith("slowdown at ")
    assert by["chrome", "4"]["median ms"].endswith(f" {MARK}")
    assert [k for k, r in by.items() if r["median ms"].endswith(MARK)] == [("chrome", "4")]
    csv = pd.read_csv(files.summary_csv)
    assert list(csv["steady_class"]) == ["warm-up", "too short", "no steady state", "slowdown"]
    md = files.markdown.read_text()
    head, glance = md.split("## At a glance")[0], md.split("## At a glance")[1].split("## Sweeps")[0]
    assert f"{MARK} no steady state: the figure is every iteration after the floor" in glance
    assert "| median (p10-p90) | vs float32 | steady |" in glance
    marked_rows = [line for line in glance.splitlines() if MARK in line and line.startswith("|")]
    assert len(marked_rows) == 1 and "| no steady state (1 of 2 runs) |" in marked_rows[0]
    page = files.html.read_text()
    assert "no steady state (1 of 2 runs)" in page and f"{MARK} no steady state: the figure" in page
    assert "Steady state:" in head


def test_the_header_counts_the_ok_runs_of_each_class(built):
    files, _ = built
    line = ("Steady state: 1 flat, 2 warm-up, 1 slowdown, 1 too short, 1 no steady state (figures of runs "
            f"without a steady state are every iteration after the floor, marked {MARK}).")
    md = files.markdown.read_text()
    assert line in md.split("## At a glance")[0]  # the first screen, before the tables
    page = files.html.read_text()
    assert line in page and page.index(line) < page.index('id="at-a-glance"')


def test_one_run_sequence_plot_per_run_that_did_not_settle_flat(built, folder):
    files, out = built
    rows = pd.read_csv(folder / "results.csv")
    expected = {f"run_sequence_run{r.run_id}.png" for r in rows.itertuples()
                if r.steady_class in ("warm-up", "no steady state", "slowdown")}
    assert len(expected) == 4
    drawn = {p.name for p in files.plots if p.name.startswith("run_sequence_")}
    assert drawn == expected == {p.name for p in (out / "plots").glob("run_sequence_*.png")}
    flat_or_short = rows[rows["steady_class"].isin(["flat", "too short"])]["run_id"]
    assert not any(f"run{rid}.png" in name for rid in flat_or_short for name in drawn)
    md = files.markdown.read_text()
    section = md.split("## Warm-up and steady state")[1].split("\n## ")[0]
    assert "flat (one level" in section  # says what the classes mean
    rank = {"no steady state": 0, "slowdown": 1, "warm-up": 2}  # worst first, then in run order
    order = sorted((rank[r.steady_class], r.run_id) for r in rows.itertuples() if r.steady_class in rank)
    assert [line for line in section.splitlines() if line.startswith("![")] == \
        [f"![run_sequence_run{rid}](plots/run_sequence_run{rid}.png)" for _, rid in order]
    page = files.html.read_text()
    assert all(f'<img src="plots/{name}"' in page for name in drawn)


def test_the_plots_are_capped_and_the_rest_listed_and_gpu_timestamps_sit_on_their_own_iterations(folder, tmp_path):
    sweeps = load_sweeps([folder])
    md, parts, drawn = steady_section(sweeps.rows, sweeps.samples, tmp_path, False, max_plots=1)
    worst = int(sweeps.rows.loc[sweeps.rows["steady_class"] == "no steady state", "run_id"].iloc[0])
    assert [p.name for p in drawn] == [f"run_sequence_run{worst}.png"]  # the worst class first
    listed = md[md.index("Not drawn:") + 2:]
    assert len([line for line in listed if line.startswith("- ")]) == 3
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [f"run_sequence_run{worst}.png"]
    # the GPU series covers the last 50 iterations: each time sits at its own iteration's start
    (page,) = _pages({"series": [SLOWDOWN]}, gpu=True)
    assert np.allclose(page["x"], np.asarray(SLOWDOWN["start_ms"][-50:]) / 1000)
    assert np.allclose(page["y"], SLOWDOWN["gpu_ms"])
    assert page["steady_from"] == pytest.approx(SLOWDOWN["start_ms"][20] / 1000)
    assert page["floor"] == pytest.approx(SLOWDOWN["start_ms"][FLOOR] / 1000)
    (wall,) = _pages({"series": [SLOWDOWN]}, gpu=False)
    assert len(wall["x"]) == len(SLOWDOWN["wall_ms"])
    (none,) = _pages({"series": [NO_STEADY]}, gpu=False)
    assert none["steady_from"] is None and len(none["changes"]) == 3  # no steady segment to highlight


def test_a_folder_from_before_schema_11_renders_and_says_not_judged(folder, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    rows = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
    steady = ["steady_class", "steady_tally", "warmup_iterations", "warmup_s", "steady_samples", "stop_reason",
              "first_warm_ratio"]
    rows.drop(columns=steady).assign(schema_version="10").to_csv(old / "results.csv", index=False)
    records = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    (old / "samples.jsonl").write_text("".join(
        json.dumps({k: v for k, v in r.items() if k != "series"} | {"schema_version": 10}) + "\n" for r in records))
    files = build_report([old], tmp_path / "out")
    md = files.markdown.read_text()
    assert "\n\nNot judged for steady state (results from before schema 11).\n\n" in md.split("## At a")[0]
    assert set(_summary_table(md)["steady"]) == {"not judged"}
    assert MARK not in md and "## Warm-up and steady state" not in md
    assert not [p for p in files.plots if p.name.startswith("run_sequence_")]
    assert "<p class=\"steady\">Not judged for steady state (results from before schema 11).</p>" in files.html.read_text()


# ------------------------------------------------------- the per-kind tables and the terminal tables

KINDS = {  # kind -> (its own columns, the figure the class sits before)
    "encoder": ({"model": "enc", "weights": "pretrained", "inputs": "builtin", "batch_size": 2, "seq_len": 8,
                 "tokens_per_s": 400.0, "cosine_min": 0.99, "cosine_mean": 0.995}, "median ms (p10-p90)"),
    "decoder": ({"model": "dec", "weights": "pretrained", "inputs": "builtin", "prompt_len": 4, "new_tokens": 16,
                 "eval_len": 32, "ttft_ms": 120.0, "prefill_tokens_per_s": 33.3, "decode_tokens_per_s": 20.0,
                 "token_ms_p50": 50.0, "token_ms_last": 60.0}, "TTFT ms"),
    "speech": ({"model": "asr", "weights": "pretrained", "inputs": "builtin", "clips": 2, "max_tokens": 16,
                "encoder_ms": 300.0, "decode_tokens_per_s": 30.0, "clip_s": 1.5, "real_time_factor": 0.3,
                "wer_vs_fp32": 0.0}, "s/clip"),
    "onnx": ({"model": "net.onnx", "weights": "pretrained", "inputs": "builtin", "onnx_sha256": "ab12",
              "input_shapes": "x:1x8", "outputs_cosine_min": 0.999}, "median ms"),
}
TERMINAL_FIGURE = {"encoder": "median ms", "decoder": "TTFT ms", "speech": "RTF", "onnx": "median ms"}
DECODE_CLASSES = {0: "flat", 1: "slowdown", 2: "no steady state"}  # a decoder row's decode_steady_class by run
CLASS_COLUMN = {"decoder": "TTFT steady"}
"""The class column beside each kind's figure: a decoder's TTFT has a series of its own."""


def _kind_rows(kind: str, first_id: int) -> list[ResultRow]:
    """One kind's rows: 32-bit two repetitions (flat, warm-up 0.5 s), 4-bit one (no steady
    state), 8-bit failed."""
    fields, _ = KINDS[kind]
    rows = []
    for i, (bits, repetition, outcome, steady, warmup_s) in enumerate((
            (32, 0, "ok", "flat", 0.0), (32, 1, "ok", "warm-up", 0.5), (4, 0, "ok", "no steady state", None),
            (8, 0, "failed", "", None))):
        ok = outcome == "ok"
        row = ResultRow(
            schema_version=11, run_id=first_id + i, repetition=repetition, timestamp_utc="t", browser="chrome",
            browser_version="150", engine="harness", platform="webgpu", executed_on="webgpu" if ok else "",
            precision_mode="standard", adapter="", device_type="", weight_dtype="", scale_dtype="",
            zero_point_dtype="", compute_dtype="f32", kind=kind, workload=str(fields["model"]), bits_requested=bits,
            bits_executed=bits if ok else None, weight_format="", block_size=32 if bits < 16 else 0,
            outcome=outcome, reason="" if ok else "GPUValidationError", steady_class=steady, warmup_s=warmup_s,
            latency_ms_median=10.0 + i if ok else None, latency_ms_p10=9.0 + i if ok else None,
            latency_ms_p90=11.0 + i if ok else None, n_samples=20 if ok else 0, timing_source="wall-clock",
            weight_bytes=1000 if ok else None, weight_bytes_f32=4000 if ok else None)
        shared = {k: v for k, v in fields.items() if k in {"model", "weights", "inputs", "batch_size", "seq_len",
                                                             "prompt_len", "new_tokens", "eval_len", "clips",
                                                             "max_tokens", "onnx_sha256", "input_shapes"}}
        row = row.with_fields(**(fields if ok else shared), precision_plan=f"uniform:{bits}")
        if kind == "decoder" and ok:  # its figures' own classes: TTFT's as the row's, the decode steps' apart
            row = row.with_fields(decode_steady_class=DECODE_CLASSES[i], ttft_steady_class=steady)
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """(rows, summary, the ResultRows) of a folder with every kind that has a table of its own."""
    from fixed_web_platform.report.render import summary_table

    written = [r for j, kind in enumerate(KINDS) for r in _kind_rows(kind, 10 * j)]
    writer = ResultWriter(tmp_path_factory.mktemp("kinds") / "sweep")
    for row in written:
        samples = ({"timing_source": "wall-clock", "wall_ms": [row.latency_ms_p10, row.latency_ms_median,
                                                               row.latency_ms_p90], "samples_per_page": [3]}
                   if row.outcome == "ok" else {})
        writer.add(row, samples)
    sweeps = load_sweeps([writer.directory])
    return sweeps.rows, summary_table(sweeps.rows, sweeps.samples), written


def _kind_tables(kind: str, rows: pd.DataFrame, summary: pd.DataFrame) -> list[pd.DataFrame]:
    from fixed_web_platform.report.decoders import decoder_tables
    from fixed_web_platform.report.models import model_tables
    from fixed_web_platform.report.onnx_files import onnx_tables
    from fixed_web_platform.report.speech import speech_tables

    if kind == "onnx":
        return [table for _, table, _ in onnx_tables(rows, summary, show_sweep=False)]
    tables = {"encoder": model_tables, "decoder": decoder_tables, "speech": speech_tables}[kind]
    return [table for _, table in tables(rows, summary, show_sweep=False)]


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_table_shows_the_class_beside_its_figure_and_marks_no_steady_state(kinds, kind):
    rows, summary, _ = kinds
    (table,) = _kind_tables(kind, rows, summary)
    figure = KINDS[kind][1]
    column = CLASS_COLUMN.get(kind, "steady")
    cols = list(table.columns)
    assert column in cols, f"{kind}: no {column} column in {cols}"
    assert cols.index(column) == cols.index(figure) - 1  # beside the figure it qualifies
    by_bits = {int(str(b).split()[0]): r for b, (_, r) in zip(table.iloc[:, 1], table.iterrows())}
    warm = "warm-up (1 of 2 runs)" if kind == "decoder" else "warm-up 0.5\u00a0s (1 of 2 runs)"
    assert by_bits[32][column] == warm  # flat + warm-up: the worst shows
    assert by_bits[4][column] == "no steady state"
    assert by_bits[8][column] == "" and by_bits[8][figure] == ""  # failed: no figure, no class
    assert by_bits[4][figure].endswith(f"\u00a0{MARK}"), f"{kind}: {by_bits[4][figure]!r} not marked"
    assert by_bits[4][figure][:-2]  # the mark sits on a figure
    assert not by_bits[32][figure].endswith(MARK)


def test_decoder_tables_show_the_decode_steps_class_beside_decode_tokens_per_s(kinds):
    rows, summary, _ = kinds
    (table,) = _kind_tables("decoder", rows, summary)
    cols = list(table.columns)
    assert cols.index("decode steps") == cols.index("decode tok/s") + 1
    assert list(table["decode steps"]) == ["slowdown (1 of 2 runs)", "", "no steady state"]  # 32, 8, 4 bits


def test_each_kind_section_puts_the_mark_note_under_a_marked_table(kinds):
    from fixed_web_platform.report.sections import SECTIONS
    from fixed_web_platform.report.steady import MARK_NOTE

    rows, summary, _ = kinds
    for kind in KINDS:
        md, parts = SECTIONS[kind].section(rows[rows["kind"] == kind], summary[summary["kind"] == kind],
                                           pd.DataFrame(), False, [])
        text = "\n".join(md)
        table_end = max(i for i, line in enumerate(md) if line.startswith("|") and MARK in line)
        assert MARK_NOTE in md[table_end:table_end + 3], f"{kind}: no note under its marked table"
        assert "Steady: how the configuration's iterations settled" in text
        assert MARK_NOTE in "\n".join(parts)
    calm = summary[summary["steady_class"] != "no steady state"]
    md, _ = SECTIONS["onnx"].section(rows[rows["kind"] == "onnx"], calm[calm["kind"] == "onnx"], pd.DataFrame(),
                                     False, [])
    assert MARK not in "\n".join(md).split("<details>")[0]  # nothing marked: no note


def test_the_terminal_tables_show_each_runs_class_and_mark_no_steady_state_with_one_legend(kinds):
    from fixed_web_platform.report.sections import terminal_tables
    from fixed_web_platform.report.steady import TERMINAL_LEGEND

    *_, written = kinds
    text = terminal_tables(written)
    blocks = text.split("\n\n")
    assert blocks[-1] == TERMINAL_LEGEND and text.count(TERMINAL_LEGEND) == 1
    assert len(blocks) == len(KINDS) + 1
    for kind, (fields, _) in KINDS.items():
        (block,) = [b for b in blocks[:-1] if f"| {fields['model']} " in b]
        lines = block.splitlines()
        header = [c.strip() for c in lines[0].strip("| ").split(" | ")]
        figure, column = TERMINAL_FIGURE[kind], CLASS_COLUMN.get(kind, "steady")
        assert header.index(column) == header.index(figure) - 1, f"{kind}: {header}"
        cells = [dict(zip(header, (c.strip() for c in line.strip("| ").split(" | ")))) for line in lines[2:]]
        warm = "warm-up" if kind == "decoder" else "warm-up 0.5 s"
        assert [c[column] for c in cells] == ["flat", warm, "no steady state", "-"]
        assert [c[figure].endswith(MARK) for c in cells] == [False, False, True, False], f"{kind}: {cells}"
        if kind == "decoder":
            assert header.index("decode steps") == header.index("decode tok/s") + 1
            assert [c["decode steps"] for c in cells] == ["flat", "slowdown", "no steady state", "-"]
    calm = terminal_tables([r for r in written if r.steady_class != "no steady state"])
    assert MARK not in calm and TERMINAL_LEGEND not in calm
    unjudged = terminal_tables([dataclasses.replace(r, steady_class="") for r in written if r.kind == "onnx"])
    assert "steady" not in unjudged.splitlines()[0]  # rows without a class: no column


def test_the_header_tallies_each_figure_judged_on_its_own_series(kinds):
    """Decoder rows: their TTFT's class and the decode steps' class (speech rows' too) each get a
    tally of their own beside the rows' class; no tally for a kind the folder does not have."""
    from fixed_web_platform.report.render import figure_tallies

    rows, _, _ = kinds
    ttft, decode = figure_tallies(rows)
    assert ttft == "Steady state of the decoders' time to first token: 1 flat, 1 warm-up, 1 no steady state " \
                   f"(figures of runs without a steady state are every iteration after the floor, marked {MARK})."
    assert decode.startswith("Steady state of decode tokens/s: 1 flat, 1 slowdown, 1 no steady state")
    assert decode.endswith("; 3 runs not judged for steady state (results from before schema 14).")  # speech's
    assert figure_tallies(rows[rows["kind"] == "encoder"]) == []

"""Report: built from a real small sweep in Chromium (plus unavailable Edge rows), and from
hand-made result folders for the arithmetic (speed-ups, compression, aggregation, memory)."""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import re
import shutil
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest
from conftest import require_browser

from fixed_web_platform.cli.report import report_command
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.report import render as report
from fixed_web_platform.report.markdown import markdown_table
from fixed_web_platform.report.render import build_report
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform, PrecisionMode
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

pytestmark = pytest.mark.browser
SMALL = Workload("test-small", 8, 256, 128)
ALL_BITS = (32, 16, 8, 4, 2)
EDGE_BITS = (8, 4)
QUICK = TimingConfig(warmup=1, min_iterations=5, min_time_s=0, max_iterations=5, timeout_s=90)
CORE_PLOTS = {"latency_vs_bits", "error_vs_bits", "weight_memory_vs_bits", "accuracy_vs_latency"}


# ------------------------------------------------------------------------- real sweep (Chromium)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    require_browser(BrowserName.CHROME)
    out = tmp_path_factory.mktemp("report-sweep") / "20990101T000000Z_report-test"
    chrome = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], ALL_BITS)
    edge = build_plan([BrowserName.EDGE], [Platform.WEBGPU], [SMALL], EDGE_BITS)
    plan = chrome + [dataclasses.replace(r, run_id=len(chrome) + i) for i, r in enumerate(edge)]
    options = SweepOptions(timing=QUICK, binaries={BrowserName.EDGE: "/nonexistent"}, progress=None)
    rows = asyncio.run(run_sweep(plan, ResultWriter(out), options))
    chrome_rows = [r for r in rows if r.browser == BrowserName.CHROME]
    assert [r.outcome for r in chrome_rows] == [Outcome.OK] * len(ALL_BITS), [r.reason for r in chrome_rows]
    return out


@pytest.fixture(scope="module")
def built(sweep_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-out")
    return build_report([sweep_dir], out), out


def test_every_plot_is_a_readable_png(built):
    files, out = built
    names = {p.stem for p in files.plots}
    assert CORE_PLOTS <= names
    summary = pd.read_csv(files.summary_csv)
    if any(c in summary for c in report.MEMORY_COLUMNS):
        assert "process_memory_vs_bits" in names
    for path in files.plots:
        assert path.parent == out / "plots" and path.suffix == ".png"
        assert path.stat().st_size > 0
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_html_references_every_plot_and_only_existing_files(built):
    files, out = built
    page = files.html.read_text()
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert sorted(sources) == sorted(f"plots/{p.name}" for p in files.plots)
    for src in sources:
        assert (out / src).is_file()
    assert "<table" in page and "Summary (ok runs)" in page


def test_html_has_environment_summary(built, sweep_dir):
    files, _ = built
    env = json.loads((sweep_dir / "environment.json").read_text())
    chrome = env["browsers"]["chrome"]
    page = files.html.read_text()
    assert chrome["version"] in page
    assert chrome["probe"]["webgpu"]["adapter"]["architecture"] in page
    assert "edge" in page and "not launched" in page
    made = env["provenance"]  # what made the sweep: its command, and its commit in a checkout
    assert html.escape(made["command"]) in page
    assert (f"commit {made['commit'][:12]}" if made["commit"] else "(not a git checkout)") in page


def test_summary_has_one_row_per_ok_configuration(built):
    files, _ = built
    summary = pd.read_csv(files.summary_csv)
    assert len(summary) == len(ALL_BITS)
    assert set(summary["browser"]) == {"chrome"} and set(summary["platform"]) == {"webgpu"}
    assert set(summary["workload"]) == {SMALL.name}
    assert list(summary["bits_requested"]) == list(ALL_BITS)
    assert list(summary["bits_executed"]) == list(ALL_BITS)
    assert not summary.duplicated(["browser", "platform", "workload", "bits_requested"]).any()
    assert (summary["runs"] == 1).all() and (summary["n_samples"] == QUICK.min_iterations).all()
    by_bits = summary.set_index("bits_requested")
    assert by_bits.loc[32, "speedup_vs_f32"] == pytest.approx(1.0)
    assert by_bits.loc[16, "speedup_vs_16bit"] == pytest.approx(1.0)
    assert by_bits.loc[32, "compression"] == pytest.approx(1.0)
    assert list(by_bits["compression"]) == sorted(by_bits["compression"])  # grows as bits shrink
    assert (by_bits["latency_ms_p10"] <= by_bits["latency_ms_median"]).all()
    assert (by_bits["latency_ms_median"] <= by_bits["latency_ms_p90"]).all()
    for bits in ALL_BITS:
        expected = by_bits.loc[32, "latency_ms_median"] / by_bits.loc[bits, "latency_ms_median"]
        assert by_bits.loc[bits, "speedup_vs_f32"] == pytest.approx(expected)
    assert by_bits.loc[2, "rel_error_vs_float"] > by_bits.loc[32, "rel_error_vs_float"]
    assert summary["fallback"].isna().all()


def test_not_ok_table_lists_the_edge_rows_with_their_reason(built):
    files, _ = built
    not_ok = pd.read_csv(files.not_ok_csv)
    assert list(not_ok["browser"]) == ["edge"] * len(EDGE_BITS)
    assert list(not_ok["bits_requested"]) == list(EDGE_BITS)
    assert set(not_ok["outcome"]) == {"unavailable"}
    assert all("/nonexistent" in reason for reason in not_ok["reason"])


def test_markdown_has_both_tables(built):
    files, _ = built
    md = files.markdown.read_text()
    summary_part, rest = md.split("## Runs without a measurement (not ok)")
    assert "## Summary (ok runs)" in summary_part
    for bits in ALL_BITS:
        assert re.search(rf"^\| chrome \| harness \| webgpu \| webgpu \| {SMALL.name} \| {SMALL.shape} \| {bits} \| {bits} \|",
                         summary_part, re.M), bits
    edge_lines = [line for line in rest.splitlines() if line.startswith("|") and "| edge |" in line]
    assert len(edge_lines) == len(EDGE_BITS)
    assert all("unavailable" in line and "/nonexistent" in line for line in edge_lines)
    for path in built[0].plots:
        assert f"](plots/{path.name})" in md


def test_report_command_writes_next_to_the_results_by_default(sweep_dir, capsys):
    assert report_command([str(sweep_dir)]) == 0
    assert (sweep_dir / "report" / "report.html").is_file()
    assert (sweep_dir / "report" / "report.md").is_file()
    assert "report.html" in capsys.readouterr().out


def test_two_sweeps_in_one_report(sweep_dir, tmp_path):
    other = tmp_path / "20990102T000000Z_copy"
    shutil.copytree(sweep_dir, other, ignore=shutil.ignore_patterns("report"))
    files = build_report([sweep_dir, other], tmp_path / "out")
    summary = pd.read_csv(files.summary_csv)
    assert len(summary) == 2 * len(ALL_BITS)
    assert set(summary["sweep"]) == {sweep_dir.name, other.name}
    assert (summary["speedup_vs_f32"][summary["bits_requested"] == 32] == 1.0).all()
    assert len(pd.read_csv(files.not_ok_csv)) == 2 * len(EDGE_BITS)
    assert "| sweep |" in files.markdown.read_text()


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_missing_folder_is_one_error_line(tmp_path, capsys):
    assert report_command([str(tmp_path / "nope")]) == 2
    assert "nope" in _one_error_line(capsys)


def test_newer_schema_is_one_error_line(sweep_dir, tmp_path, capsys):
    future = tmp_path / "future"
    shutil.copytree(sweep_dir, future, ignore=shutil.ignore_patterns("report"))
    csv_path = future / "results.csv"
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    rows["schema_version"] = "999"
    rows.to_csv(csv_path, index=False)
    assert report_command([str(future), "--output-dir", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys)
    assert "999" in line and "newer" in line
    assert not (tmp_path / "out").exists()


def test_bad_arguments_are_one_error_line(capsys):
    assert report_command([]) == 2
    _one_error_line(capsys)


# --------------------------------------------------------------- hand-made folders (arithmetic)

UNIT = Workload("unit", 2, 64, 32)
F32_BYTES = UNIT.n * UNIT.k * 4


def _ok(run, latency, weight_bytes, *, bits_executed=None, reason="", error=None, p10=None, p90=None):
    base = ResultRow.without_measurement(run, Outcome.OK, reason, browser_version="1.0")
    return dataclasses.replace(
        base, bits_executed=run.bits if bits_executed is None else bits_executed,
        latency_ms_median=latency, latency_ms_p10=p10 if p10 is not None else latency * 0.9,
        latency_ms_p90=p90 if p90 is not None else latency * 1.1, n_samples=3,
        timing_source="wall-clock", gflops=UNIT.flops / (latency * 1e-3) / 1e9,
        weight_bytes=weight_bytes, weight_bytes_f32=F32_BYTES,
        rel_error_vs_float=error if error is not None else 2.0 ** -run.bits,
        snr_db=6.0 * run.bits, rel_error_vs_dequantized=1e-7, kernel_tolerance=1e-5,
    )


@pytest.fixture
def handmade(tmp_path) -> Path:
    """chrome/webgpu 32,16,8 (two reps),4 ok and 2 failed; chrome/webnn 32 ok, 4 -> 8 fallback."""
    gpu = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [UNIT], (32, 16, 8, 4, 2), repetitions=2)
    nn = build_plan([BrowserName.CHROME], [Platform.WEBNN], [UNIT], (32, 4),
                    precision_mode=PrecisionMode.STANDARD)
    nn = [dataclasses.replace(r, run_id=100 + i) for i, r in enumerate(nn) if r.repetition == 0]
    run = {(r.bits, r.repetition): r for r in gpu}
    writer = ResultWriter(tmp_path / "handmade")
    writer.add(_ok(run[32, 0], 10.0, F32_BYTES))
    writer.add(_ok(run[32, 1], 12.0, F32_BYTES))
    writer.add(_ok(run[16, 0], 5.0, F32_BYTES // 2))
    writer.add(ResultRow.without_measurement(run[16, 1], Outcome.TIMEOUT, "no result within 90 s"))
    # 8-bit: two repetitions with raw samples: medians 3 and 5 -> 4; pooled p10/p90 from samples
    writer.add(_ok(run[8, 0], 3.0, 1000), {"timing_source": "wall-clock", "wall_ms": [2.0, 3.0, 4.0]})
    writer.add(_ok(run[8, 1], 5.0, 1000), {"timing_source": "wall-clock", "wall_ms": [4.0, 5.0, 6.0]})
    writer.add(_ok(run[4, 0], 2.5, 512))
    writer.add(_ok(run[4, 1], 2.5, 512))
    writer.add(ResultRow.without_measurement(run[2, 0], Outcome.FAILED, "GPUValidationError: bad | pipe"))
    writer.add(ResultRow.without_measurement(run[2, 1], Outcome.CRASH, "the browser process died"))
    writer.add(_ok(nn[0], 20.0, F32_BYTES))
    writer.add(_ok(nn[1], 8.0, 1000, bits_executed=8,
                   reason="int4 is not spec-guaranteed; 4-bit runs as 8-bit"))
    return writer.directory


def test_speedup_compression_and_aggregation(handmade, tmp_path):
    files = build_report([handmade], tmp_path / "out")
    s = pd.read_csv(files.summary_csv, keep_default_na=True)
    gpu = s[s["platform"] == "webgpu"].set_index("bits_requested")
    assert list(gpu.index) == [32, 16, 8, 4]  # 2-bit had no ok run
    assert gpu.loc[32, "latency_ms_median"] == pytest.approx(11.0)  # median of 10 and 12
    assert gpu.loc[32, "runs"] == 2 and gpu.loc[16, "runs"] == 1
    assert gpu.loc[8, "latency_ms_median"] == pytest.approx(4.0)
    assert gpu.loc[8, "latency_ms_p10"] == pytest.approx(2.5)  # np.percentile([2,3,4,4,5,6], 10)
    assert gpu.loc[8, "latency_ms_p90"] == pytest.approx(5.5)
    assert gpu.loc[32, "latency_ms_p10"] == pytest.approx(9.9)  # no samples: median of rows' p10
    assert gpu.loc[8, "gflops"] == pytest.approx(UNIT.flops / 4e-3 / 1e9)
    assert gpu.loc[16, "speedup_vs_16bit"] == pytest.approx(1.0)
    assert gpu.loc[8, "speedup_vs_16bit"] == pytest.approx(5.0 / 4.0)
    assert gpu.loc[4, "speedup_vs_16bit"] == pytest.approx(2.0)
    assert gpu.loc[32, "speedup_vs_16bit"] == pytest.approx(5.0 / 11.0)
    assert gpu.loc[4, "speedup_vs_f32"] == pytest.approx(11.0 / 2.5)
    assert gpu.loc[16, "speedup_vs_f32"] == pytest.approx(11.0 / 5.0)
    assert gpu.loc[32, "compression"] == pytest.approx(1.0)
    assert gpu.loc[16, "compression"] == pytest.approx(2.0)
    assert gpu.loc[8, "compression"] == pytest.approx(F32_BYTES / 1000)
    assert gpu.loc[4, "compression"] == pytest.approx(F32_BYTES / 512)
    assert gpu["fallback"].isna().all()

    nn = s[s["platform"] == "webnn"].set_index("bits_requested")
    assert nn.loc[4, "bits_executed"] == 8
    assert nn.loc[4, "speedup_vs_f32"] == pytest.approx(20.0 / 8.0)
    assert pd.isna(nn.loc[4, "speedup_vs_16bit"])  # no 16-bit webnn row: blank, not webgpu's
    assert "4 -> 8-bit" in nn.loc[4, "fallback"] and "spec-guaranteed" in nn.loc[4, "fallback"]
    assert nn.loc[4, "device_type"] == "cpu"

    bad = pd.read_csv(files.not_ok_csv)
    assert sorted(zip(bad["bits_requested"], bad["outcome"])) == [(2, "crash"), (2, "failed"), (16, "timeout")]
    md = files.markdown.read_text()
    assert "bad \\| pipe" in md  # a pipe in a reason does not break the Markdown table
    assert "4 -> 8-bit" in md
    assert "2.50x" in md  # webnn 4-bit speed-up vs f32, formatted
    assert "No process memory figures" in md
    assert "process_memory_vs_bits" not in {p.stem for p in files.plots}


def test_process_memory_and_unstable_columns_are_used_when_present(handmade, tmp_path):
    csv_path = handmade / "results.csv"
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    ok = rows["outcome"] == "ok"
    rows["proc_rss_peak_bytes"] = ["300000000" if o else "" for o in ok]
    rows["proc_rss_delta_bytes"] = ["-1048576" if o else "" for o in ok]
    rows["js_heap_bytes"] = ""  # present but empty: skipped
    rows["unstable"] = ["True" if b == "8" else "False" for b in rows["bits_requested"]]
    rows.to_csv(csv_path, index=False)
    files = build_report([handmade], tmp_path / "out")
    s = pd.read_csv(files.summary_csv)
    assert "proc_rss_peak_bytes" in s and "proc_rss_delta_bytes" in s and "js_heap_bytes" not in s
    assert (s["proc_rss_peak_bytes"] == 300000000).all()
    assert list(s.loc[s["platform"] == "webgpu", "unstable"]) == [False, False, True, False]
    assert "process_memory_vs_bits" in {p.stem for p in files.plots}
    md = files.markdown.read_text()
    assert "| RSS peak |" in md and "286.10 MiB" in md and "-1.00 MiB" in md
    summary_header = md.split("## Summary (ok runs)")[1].strip().splitlines()[0]
    assert "| unstable |" in summary_header and "JS heap" not in summary_header


def test_no_ok_rows_gives_a_report_without_plots(tmp_path):
    plan = build_plan([BrowserName.SAFARI], [Platform.WEBGPU], [UNIT], (8, 4))
    writer = ResultWriter(tmp_path / "none-ok")
    for run in plan:
        writer.add(ResultRow.without_measurement(run, Outcome.UNAVAILABLE, "safari: not installed"))
    files = build_report([writer.directory], tmp_path / "out")
    assert files.plots == []
    assert list((tmp_path / "out" / "plots").glob("*.png")) == []
    md = files.markdown.read_text()
    assert "No ok runs" in md and md.count("safari: not installed") == 2
    assert "<img" not in files.html.read_text()
    assert len(pd.read_csv(files.not_ok_csv)) == 2


def test_empty_results_folder(tmp_path):
    writer = ResultWriter(tmp_path / "empty")
    files = build_report([writer.directory], tmp_path / "out")
    assert files.plots == [] and "No ok runs" in files.markdown.read_text()


def test_markdown_table_escapes_cells():
    frame = pd.DataFrame({"a": ["x|y", "line\nbreak"], "b": [1.5, None]})
    assert markdown_table(frame).splitlines() == [
        "| a | b |", "|---|---|", "| x\\|y | 1.5 |", "| line break |  |",
    ]


def _glance_row(bits, median, p10, p90, compression, error=0.01, weight_bytes=100):
    return {"sweep": "s", "kind": "matmul", "browser": "chrome", "engine": "harness", "platform": "webgpu",
            "precision_mode": "standard", "device_type": "", "workload": "w", "m": 1, "k": 64,
            "n": 64, "shape": "1x64x64", "bits_requested": bits, "bits_executed": bits,
            "executed_on": "webgpu", "latency_ms_median": median, "latency_ms_p10": p10,
            "latency_ms_p90": p90, "compression": compression, "weight_bytes": weight_bytes,
            "rel_error_vs_float": error, "rel_error_vs_dequantized": 1e-7, "kernel_tolerance": 1e-5,
            "fallback": ""}


def test_at_a_glance_calls_noise_the_same_and_says_it_in_words():
    from fixed_web_platform.report.glance import headline_columns, headline_rows
    from fixed_web_platform.report.sections import MATMUL_GLANCE

    summary = pd.DataFrame([_glance_row(32, 10.0, 9.9, 10.1, 1.0), _glance_row(16, 10.3, 10.2, 10.4, 2.0),
                            _glance_row(8, 15.0, 14.0, 16.0, 3.5), _glance_row(4, 10.5, 9.0, 12.0, 6.2),
                            _glance_row(2, 5.0, 4.9, 5.1, 10.4, error=0.4)])
    columns = headline_columns(MATMUL_GLANCE)
    rows, _ = headline_rows(summary, MATMUL_GLANCE)
    cells = {r[2].text: dict(zip(columns, r)) for r in rows}
    vs32 = {k: v["vs float32"] for k, v in cells.items()}
    assert vs32["float32"].text == "baseline"
    assert (vs32["16-bit"].text, vs32["16-bit"].tone) == ("same (under 10%)", "same")  # 3% apart, no overlap
    assert (vs32["8-bit"].text, vs32["8-bit"].tone) == ("1.50x slower", "worse")
    assert (vs32["4-bit"].text, vs32["4-bit"].tone) == ("same within spread", "same")
    assert (vs32["2-bit"].text, vs32["2-bit"].tone) == ("2.00x faster", "better")
    assert cells["8-bit"]["median (p10-p90)"].text == "15 ms (14-16)"
    assert cells["2-bit"]["error vs float"].tone == "worse" and cells["8-bit"]["error vs float"].tone == "better"
    assert cells["8-bit"]["kernel check"].text == "ok (1e-07)"


def test_the_pick_is_the_fastest_within_the_bar_then_the_fewest_bytes():
    from fixed_web_platform.report.glance import picks
    from fixed_web_platform.report.sections import MATMUL_GLANCE

    rows = [_glance_row(32, 10.0, 9.9, 10.1, 1.0, error=1e-7, weight_bytes=400),
            _glance_row(16, 8.0, 7.9, 8.1, 2.0, error=2e-4, weight_bytes=200),
            _glance_row(8, 8.2, 7.5, 8.6, 3.5, error=5e-3, weight_bytes=110),   # as fast as 16-bit, fewer bytes
            _glance_row(4, 9.5, 9.4, 9.6, 6.2, error=0.04, weight_bytes=65),    # within the bar, slower
            _glance_row(2, 4.0, 3.9, 4.1, 10.4, error=0.4, weight_bytes=38)]    # fastest, beyond the bar
    (pick,) = picks(pd.DataFrame(rows), MATMUL_GLANCE)
    assert pick.precision == "8-bit"
    assert pick.costs.startswith("1.22x faster than float32, 3.5x less weight memory, error vs float 5.0e-03")
    assert pick.costs.endswith("; fewest weight bytes within the bar: 4-bit, as fast as float32 (no difference "
                               "beyond noise), 6.2x less weight memory, error vs float 4.0e-02")
    nothing = picks(pd.DataFrame([_glance_row(4, 5.0, 4.9, 5.1, 6.2, error=0.3)]), MATMUL_GLANCE)
    assert nothing[0].precision == "none" and "error vs float ≤ 5.0e-02" in nothing[0].costs


def test_the_float32_baseline_is_the_fastest_float32_form():
    from fixed_web_platform.report.glance import headline_rows
    from fixed_web_platform.report.sections import MATMUL_GLANCE

    slow, fast = _glance_row(32, 12.0, 11.9, 12.1, 1.0), _glance_row(32, 10.0, 9.9, 10.1, 1.0)
    slow["graph_form"], fast["graph_form"] = "transpose", "gemm"
    int8 = _glance_row(8, 8.0, 7.9, 8.1, 3.5)
    int8["graph_form"] = "gemm_qdq"
    rows, _ = headline_rows(pd.DataFrame([slow, fast, int8]), MATMUL_GLANCE)
    by_precision = {r[2].text: r[4].text for r in rows}
    assert by_precision == {"float32 transpose": "1.20x slower", "float32 gemm": "baseline",
                            "8-bit gemm_qdq": "1.25x faster"}

def test_every_kind_has_a_first_screen_judged_on_one_of_its_own_columns():
    from fixed_web_platform.report.glance import DEFAULT_GLANCE
    from fixed_web_platform.report.sections import SECTIONS
    from fixed_web_platform.results.rows import ResultRow
    from fixed_web_platform.workloads import KINDS

    columns = set(ResultRow.columns())
    for kind in KINDS:
        glance = SECTIONS[kind.name].glance
        assert glance is not DEFAULT_GLANCE and glance.note, kind.name
        assert glance.accuracy.column in columns, (kind.name, glance.accuracy.column)
        assert all(f.column in columns for f in glance.figures), kind.name
        assert glance.accuracy.meets(1.0 if glance.accuracy.higher_is_better else 0.0)
        assert not glance.accuracy.meets(0.0 if glance.accuracy.higher_is_better else 1.0)


def test_a_figure_title_fits_a_one_panel_figure():
    from fixed_web_platform.report.plots import _facets, _suptitle

    fig, _ = _facets(1)
    _suptitle(fig, "Median latency (ms) vs weight bits requested, per browser/engine/platform "
                   "[adapter]; bars p10-p90 of the raw samples")
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent()
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width and "\n" in fig._suptitle.get_text()


def test_a_float32_run_that_ran_elsewhere_is_not_the_baseline_and_blank_bytes_pick_the_faster():
    from fixed_web_platform.report.glance import headline_rows, picks
    from fixed_web_platform.report.sections import MATMUL_GLANCE

    fell_back = _glance_row(32, 6.0, 5.9, 6.1, 1.0, error=2e-4)
    fell_back["bits_executed"], fell_back["fallback"] = 16, "no float32 here"
    rows = [fell_back, _glance_row(32, 10.0, 9.9, 10.1, 1.0, error=1e-7),
            _glance_row(16, 8.0, 7.5, 8.5, 2.0, error=2e-4, weight_bytes=None),
            _glance_row(8, 7.9, 7.4, 8.4, 3.5, error=5e-3, weight_bytes=None)]
    table, footnotes = headline_rows(pd.DataFrame(rows), MATMUL_GLANCE)
    assert [r[4].text for r in table][:2] == ["1.67x faster", "baseline"]
    assert table[0][2].text == "float32 (ran as 16-bit) [1]" and footnotes[0].endswith("no float32 here")
    (pick,) = picks(pd.DataFrame(rows), MATMUL_GLANCE)
    assert pick.precision == "float32 (ran as 16-bit)"  # the fastest within the bar, and it says what ran


def test_headline_cells_break_only_between_words_and_markdown_keeps_row_text_literal():
    from fixed_web_platform.report.glance import glance_html, glance_markdown
    from fixed_web_platform.report.sections import SECTIONS

    glances = {kind: part.glance for kind, part in SECTIONS.items()}
    slow = _glance_row(8, 15.0, 14.0, 16.0, 3.5)
    slow["bits_executed"], slow["fallback"], slow["workload"] = 16, "*int8* <refused>", "bert-base_ffn"
    page = glance_html(pd.DataFrame([_glance_row(32, 1234.5, 1200.0, 1300.0, 1.0), slow]), glances)
    assert '<span class="w">bert-base_ffn</span>' in page and '<span class="w">chrome</span>' in page
    assert '<span class="w">· harness</span>' in page  # a lone '·' stays with the next word
    assert '<span class="w">1,234</span> <span class="w">ms</span>' in page and "e+03" not in page  # seconds-long medians never in scientific notation
    assert "&lt;refused&gt;" in page and "<refused>" not in page
    md = glance_markdown(pd.DataFrame([_glance_row(32, 10.0, 9.9, 10.1, 1.0), slow]), glances)
    assert "\\*int8\\* \\<refused\\>" in md and "\n\n[1] " in md
    assert "bert-base\\_ffn" in md.split("| setting |")[0]  # in the picks' prose; table cells stay as they are


def test_the_first_screen_names_a_fallback_adapter_only_where_one_ran():
    rows = pd.DataFrame({"browser": ["chrome", "chrome", "firefox", "firefox"],
                         "platform": ["webgpu", "webgpu", "webgpu", "webnn"],
                         "outcome": ["ok", "ok", "ok", "ok"],
                         "adapter": ["google/swiftshader/0xc0de (fallback)", "google/swiftshader/0xc0de (fallback)",
                                     "nvidia/ampere/0x2204", ""]})
    caveat = report.adapter_caveat(rows)
    assert caveat.startswith("Software adapter: 2 of the 3 ok WebGPU runs here ran on a fallback adapter "
                             "(chrome: google/swiftshader/0xc0de)")
    assert report.adapter_caveat(rows[rows["browser"] == "firefox"]) == ""  # a GPU: no warning
    assert report.adapter_caveat(rows.iloc[:2]).startswith("Software adapter: All 2 ok WebGPU runs")


def test_the_memory_section_puts_measured_figures_beside_the_held_weights() -> None:
    """Only configurations with a measured figure; a figure a run did not have is blank, not 0;
    and a pick names the memory measured against float32's beside the computed saving."""
    from fixed_web_platform.report.glance import _measured
    from fixed_web_platform.report.memory import memory_table

    summary = pd.DataFrame([
        {"kind": "encoder", "workload": "minilm", "shape": "4x32", "browser": "chrome", "engine": "ort",
         "platform": "webgpu", "buffer_cache": "simple", "bits_requested": 8, "weight_bytes": 2 << 20,
         "gpu_peak_bytes": 5 << 20, "wasm_peak_bytes": 16 << 20, "webnn_constant_bytes": None},
        {"kind": "encoder", "workload": "minilm", "shape": "4x32", "browser": "chrome", "engine": "ort",
         "platform": "webgpu", "buffer_cache": "simple", "bits_requested": 32, "weight_bytes": 8 << 20,
         "gpu_peak_bytes": 11 << 20, "wasm_peak_bytes": 16 << 20, "webnn_constant_bytes": None},
        {"kind": "encoder", "workload": "minilm", "shape": "4x32", "browser": "firefox", "engine": "harness",
         "platform": "webnn", "buffer_cache": "", "bits_requested": 8, "weight_bytes": 2 << 20,
         "gpu_peak_bytes": None, "wasm_peak_bytes": None, "webnn_constant_bytes": None},
    ])
    table = memory_table(summary)
    assert list(table["precision"]) == ["32-bit", "8-bit"]  # the unmeasured run is left out
    assert list(table.columns[:5]) == ["kind", "workload", "setting", "precision", "weights held"]
    assert table.iloc[1]["setting"] == "chrome ort/webgpu simple"
    assert table.iloc[1]["GPU peak"] == "5.00 MiB" and table.iloc[1]["WebNN constants"] == ""
    row, base = summary.iloc[0], summary.iloc[1]
    assert _measured(row, base) == " (measured: GPU peak 5.00 MiB against float32's 11.00 MiB)"
    assert _measured(row, None) == "" and _measured(summary.iloc[2], base) == ""

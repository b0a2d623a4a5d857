"""Unit tests for the timing protocol's Python half: statistics, short runs, plan files, resume,
progress output."""

from __future__ import annotations

import asyncio
import io
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.analysis.measurement import measured_row
from fixed_web_platform.engines.registry import build_job, read_reply
from fixed_web_platform.engines.wgsl.kernels import variants_for
from fixed_web_platform.page_protocol import PageReply
from fixed_web_platform.plan import TimingConfig, build_plan, load_plan, save_plan
from fixed_web_platform.progress import BarProgress, PlainProgress
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.run_spec import LEAST_SAMPLES
from fixed_web_platform.run_spec import WARMUP_FLOORS_S
from fixed_web_platform.series.stats import summarize
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform, PrecisionMode
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

W = Workload("unit", 4, 64, 32)


def test_stable_samples_are_not_flagged():
    stats = summarize([10.0, 10.1, 9.9, 10.05, 9.95])
    assert stats.instability == ""
    assert stats.iqr == pytest.approx(0.1)


def test_high_cv_is_flagged():
    stats = summarize([5.0, 10.0, 15.0, 10.0, 5.0, 15.0])
    assert stats.cv > 0.10 and "CV" in stats.instability


def test_one_slow_outlier_is_flagged_even_with_a_low_cv_body():
    stats = summarize([10.0] * 30 + [25.0])
    assert "slowest sample 2.5x the median" in stats.instability


def test_single_sample_is_not_called_unstable():
    stats = summarize([3.0])
    assert math.isnan(stats.cv) and stats.instability == ""


@pytest.mark.parametrize(
    "kwargs, match",
    [({"min_iterations": 0}, "min iterations"), ({"min_iterations": 20, "max_iterations": 10}, "max iterations"),
     ({"max_iterations": 5000}, "2048"), ({"repeat": 0}, "repeat"), ({"timeout_s": math.inf}, "timeout"),
     ({"min_time_s": -1}, "min time"), ({"warmup": -1}, "warm-up")],
)
def test_timing_config_rejects_nonsense(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TimingConfig(**kwargs)


def test_page_budget_splits_the_timeout_over_page_loads():
    assert TimingConfig(timeout_s=100, repeat=2).page_budget_ms == pytest.approx(25_000)





def _job(run):
    return asyncio.run(build_job(run, TimingConfig(), None))


def _measure(run, job, pages, outputs, timing):
    """What the runner does with the pages' replies: the engine reads them, then the row."""
    executed = [read_reply(run, job, p) for p in pages]
    return measured_row(_base(run, job.prepared), run, job, pages, executed, outputs, timing)


def _page(prepared, wall, gpu=None):
    shader = variants_for(prepared.bits)[-1].shader
    return PageReply(status="ok", shader=shader, compute_dtype="f32",
                      weight_buffer_bytes=len(prepared.tensors["w"]),
                      compile_ms=1.0, cold_ms=5.0, wall_ms=tuple(wall), gpu_ms=None if gpu is None else tuple(gpu),
                      start_ms=tuple(float(sum(wall[:i])) for i in range(len(wall))), stop_reason="counts")


def _base(run, prepared):
    return ResultRow.without_measurement(run, Outcome.OK, "", weight_format=prepared.weight_format)


def _exact_output(prepared):
    return prepared.ref_dequantized.astype(np.float32).tobytes()


def test_a_short_page_is_marked_not_silently_short():
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8,))[0]
    job = _job(run)
    prepared = job.prepared
    timing = TimingConfig(min_iterations=5, max_iterations=10, timeout_s=10)
    row, samples = _measure(run, job, [_page(prepared, [1.0, 1.1, 1.2])], [_exact_output(prepared)], timing)
    assert row.outcome == Outcome.OK
    assert row.samples_short is True and row.n_samples == 3 and row.min_samples == 5
    assert "short: 3 sample(s) of 1.1 ms after the floor per page (counts), 5 asked" in row.reason
    assert samples["samples_per_page"] == [3]


def test_a_row_never_takes_its_figure_from_fewer_samples_than_it_can():
    """A page whose floor took all but one of its samples: the figure takes the floor's last
    ones too (LEAST_SAMPLES), never the one sample after it; a page of fewer samples than that
    has no figure at all."""
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8,))[0]
    job = _job(run)
    timing = TimingConfig(min_iterations=5, max_iterations=10, timeout_s=10)
    page = replace(_page(job.prepared, [1.0, 2.0, 3.0, 4.0, 5.0]), floor_iterations=4, stop_reason="budget")
    row, samples = _measure(run, job, [page], [_exact_output(job.prepared)], timing)
    assert row.outcome == Outcome.OK and samples["samples_per_page"] == [LEAST_SAMPLES] == [3]
    assert row.latency_ms_median == 4.0 and "stopped at the page's time budget" in row.reason
    lone = replace(_page(job.prepared, [1.0, 2.0]), floor_iterations=1, stop_reason="budget")
    row, _ = _measure(run, job, [lone], [_exact_output(job.prepared)], timing)
    assert row.outcome == Outcome.TIMEOUT and row.latency_ms_median is None
    assert "fewer than 3 iterations" in row.reason


def test_pages_are_pooled_and_gpu_timestamps_lead_when_every_page_has_them():
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (4,))[0]
    job = _job(run)
    prepared = job.prepared
    timing = TimingConfig(min_iterations=2, max_iterations=10)
    pages = [_page(prepared, [2.0, 2.0], [1.0, 1.0]), _page(prepared, [4.0, 4.0], [3.0, 3.0])]
    row, samples = _measure(run, job, pages,
                                [_exact_output(prepared)] * 2, timing)
    assert row.timing_source == "gpu-timestamp" and row.n_samples == 4 and row.pages == 2
    assert row.latency_ms_median == pytest.approx(2.0) and row.wall_ms_median == pytest.approx(3.0)
    assert samples["gpu_ms"] == [1.0, 1.0, 3.0, 3.0] and samples["cold_ms"] == [5.0, 5.0]
    # one page without timestamps: fall back to wall clock for the whole run
    pages[1] = _page(prepared, [4.0, 4.0])
    row, _ = _measure(run, job, pages, [_exact_output(prepared)] * 2, timing)
    assert row.timing_source == "wall-clock" and row.latency_ms_median == pytest.approx(3.0)


def test_a_wrong_output_on_any_page_makes_the_run_invalid():
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8,))[0]
    job = _job(run)
    prepared = job.prepared
    timing = TimingConfig(min_iterations=1, max_iterations=10)
    bad = (prepared.ref_dequantized * 1.01).astype(np.float32).tobytes()
    row, _ = _measure(run, job, [_page(prepared, [1.0]), _page(prepared, [1.0])], [_exact_output(prepared), bad], timing)
    assert row.outcome == Outcome.INVALID and "kernel error" in row.reason


def test_the_tolerance_comes_from_the_offered_kernel_not_the_pages_word():
    """A page claiming f16 arithmetic on the f32 kernel does not buy itself the looser tolerance."""
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8,))[0]
    job = _job(run)
    prepared = job.prepared
    timing = TimingConfig(min_iterations=1, max_iterations=10)
    off = (prepared.ref_dequantized * 1.001).astype(np.float32).tobytes()  # 1e-3: fine for f16, not f32
    page = replace(_page(prepared, [1.0]), compute_dtype="f16")
    row, _ = _measure(run, job, [page], [off], timing)
    assert row.compute_dtype == "f32" and row.kernel_tolerance == 1e-5 and row.outcome == Outcome.INVALID


def test_bits_executed_comes_from_the_bound_buffer_and_a_mismatch_is_invalid():
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (4,))[0]
    job = _job(run)
    prepared = job.prepared
    timing = TimingConfig(min_iterations=1, max_iterations=10)
    good, _ = _measure(run, job, [_page(prepared, [1.0])],
                           [_exact_output(prepared)], timing)
    assert good.outcome == Outcome.OK and good.bits_executed == 4
    wide = replace(_page(prepared, [1.0]), weight_buffer_bytes=W.n * W.k)  # 8-bit worth of bytes
    row, _ = _measure(run, job, [wide], [_exact_output(prepared)], timing)
    assert row.outcome == Outcome.INVALID and row.bits_executed == 8 and "bound weight buffer" in row.reason
    alien = replace(_page(prepared, [1.0]), shader="other.wgsl")
    row, _ = _measure(run, job, [alien], [_exact_output(prepared)], timing)
    assert row.outcome == Outcome.INVALID and "did not offer" in row.reason


def test_plan_file_round_trips(tmp_path: Path):
    plan = build_plan([BrowserName.CHROME, BrowserName.FIREFOX], [Platform.WEBGPU, Platform.WEBNN], [W],
                      (16, 4), repetitions=2, precision_mode=PrecisionMode.EXPERIMENTAL, webnn_device="gpu")
    timing = TimingConfig(warmup=2, min_iterations=4, min_time_s=0.25, max_iterations=9, repeat=3)
    save_plan(tmp_path, plan, timing)
    assert load_plan(tmp_path) == (plan, timing)


def test_a_plan_from_before_the_steady_state_protocol_resumes_with_its_counts(tmp_path: Path):
    """A schema-10 plan.json has no steady fields: it resumes as it was made (the counts
    protocol, no floor seconds), and the auto floor resolves per run only for new plans."""
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8,))
    old = {"warmup": 3, "min_iterations": 10, "min_time_s": 1.0, "max_iterations": 200, "repeat": 1,
           "timeout_s": 120.0, "warmup_min_s": 0.0}
    (tmp_path / "plan.json").write_text(json.dumps({"schema_version": 10, "timing": old,
                                                    "runs": [r.to_json() for r in plan]}))
    _, timing = load_plan(tmp_path)
    assert timing.steady is False and timing.warmup_min_s == 0.0
    auto = TimingConfig(warmup_min_s=None)
    wasm = replace(plan[0], engine=EngineName.ORT, platform=Platform.WASM)
    assert auto.for_run(wasm).warmup_min_s == WARMUP_FLOORS_S[("ort", "wasm", "chrome")] > 0 and auto.for_run(plan[0]).warmup_min_s == 0.0
    firefox = replace(plan[0], browser=BrowserName.FIREFOX)
    assert auto.for_run(firefox).batch_ms == 90.0 and auto.for_run(plan[0]).batch_ms == 0.0


def test_load_plan_refuses_a_folder_without_one(tmp_path: Path):
    with pytest.raises(ValueError, match="plan.json"):
        load_plan(tmp_path)


def test_writer_resume_appends_and_knows_what_is_done(tmp_path: Path):
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8, 4, 2))
    first = ResultWriter(tmp_path)
    first.add(ResultRow.without_measurement(plan[0], Outcome.CRASH, "x"), {"outcome": "crash"})
    second = ResultWriter(tmp_path, resume=True)
    assert second.done_run_ids() == {0}
    second.add(ResultRow.without_measurement(plan[1], Outcome.FAILED, "y"), {"outcome": "failed"})
    assert second.done_run_ids() == {0, 1}
    assert len((tmp_path / "samples.jsonl").read_text().splitlines()) == 2
    assert "resumed_utc" in second.environment
    # the command that resumed it, beside the one that started it
    assert second.environment["resumed_provenance"][-1]["command"] == second.environment["provenance"]["command"]


def test_progress_lines_and_bar():
    run = build_plan([BrowserName.FIREFOX], [Platform.WEBNN], [W], (4,))[0]
    row = replace(ResultRow.without_measurement(run, Outcome.OK, "int4 upgraded"), bits_executed=8,
                  latency_ms_median=1.5)
    out = io.StringIO()
    PlainProgress(out).finished(run, row, 3, 7)
    assert out.getvalue() == "[3/7] firefox harness/webnn 4-bit 4x64x32 (ran 8-bit): ok 1.500 ms (int4 upgraded)\n"
    err = io.StringIO()
    bar = BarProgress(7, err)
    bar.started(run, 3, 7)
    bar.finished(run, row, 3, 7)
    bar.close()
    text = err.getvalue()
    assert "firefox harness/webnn 4-bit 4x64x32" in text and "1/7" in text and "[3/7]" in text


def test_resume_cuts_a_torn_last_line(tmp_path: Path):
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8, 4))
    writer = ResultWriter(tmp_path)
    writer.add(ResultRow.without_measurement(plan[0], Outcome.CRASH, "x"), {"outcome": "crash"})
    with (tmp_path / "results.csv").open("a") as f:
        f.write("1,0,2026-")  # an interrupted write
    with (tmp_path / "samples.jsonl").open("a") as f:
        f.write('{"run_id": 1, "wal')
    resumed = ResultWriter(tmp_path, resume=True)
    assert resumed.done_run_ids() == {0}
    resumed.add(ResultRow.without_measurement(plan[1], Outcome.FAILED, "y"), {"outcome": "failed"})
    assert resumed.done_run_ids() == {0, 1}
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == [0, 1]


def test_cli_refuses_to_overwrite_a_sweep_and_to_resume_a_broken_plan(tmp_path: Path, capsys):
    from fixed_web_platform.cli import main as cli

    ResultWriter(tmp_path / "old")
    assert cli.main(["--output-dir", str(tmp_path / "old"), "--bits", "8"]) == 2
    assert "already holds a sweep" in capsys.readouterr().err
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "plan.json").write_text('{"runs": []}')
    assert cli.main(["--resume", str(tmp_path / "broken")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a readable plan" in err[0]
    assert cli.main(["--resume", str(tmp_path / "nothing-here")]) == 2
    assert "plan.json" in capsys.readouterr().err


def test_an_invalid_row_reports_no_performance_figures():
    """A wrong output's latency is not a figure anyone should read (raw samples stay on disk)."""
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], (8,))[0]
    job = _job(run)
    timing = TimingConfig(min_iterations=1, max_iterations=10)
    bad = (job.prepared.ref_dequantized * 1.5).astype(np.float32).tobytes()
    row, samples = _measure(run, job, [_page(job.prepared, [0.001, 0.001])], [bad], timing)
    assert row.outcome == Outcome.INVALID
    assert row.latency_ms_median is None and row.gflops is None and row.latency_ms_p90 is None
    assert row.rel_error_vs_dequantized > row.kernel_tolerance  # the why stays
    assert samples["wall_ms"] == [0.001, 0.001]


def test_calibrating_on_the_evaluation_texts_is_refused_in_one_line(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """What int8 activations and gptq are fit to is never what their accuracy is judged on:
    --calibration sharing a text with --inputs is one line and exit 2, before any browser."""
    from fixed_web_platform.cli import main as cli

    texts, other = tmp_path / "texts.txt", tmp_path / "other.txt"
    texts.write_text("the cat sat on the mat\na quick brown fox\n")
    other.write_text("rain is expected tomorrow\na quick brown fox\n")
    for calibration in (texts, other):
        assert cli.main(["--model", "all-MiniLM-L6-v2", "--calibration", str(calibration), "--inputs", str(texts),
                         "--act-bits", "32", "8", "--bits", "8", "--browser", "chrome", "--platform", "webgpu",
                         "--output-dir", str(tmp_path / "out"), "--no-report"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        shared = 2 if calibration == texts else 1
        assert len(err) == 1 and f"shares {shared} of its 2 texts with the evaluated inputs" in err[0], err
    assert not (tmp_path / "out").exists()

"""End-to-end timing protocol, memory figures and resume, in real browsers."""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_browser

from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan, save_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
SMALL = Workload("test-small", 8, 256, 128)


def _run(browser, timing, out, bits=(8,), platforms=(Platform.WEBGPU,)):
    plan = build_plan([browser], list(platforms), [SMALL], bits)
    writer = ResultWriter(out)
    return asyncio.run(run_sweep(plan, writer, SweepOptions(timing=timing))), writer


@pytest.mark.parametrize("browser", [BrowserName.CHROME, BrowserName.FIREFOX])
def test_min_time_repeat_and_memory(browser, tmp_path):
    require_browser(browser)
    timing = TimingConfig(warmup=1, min_iterations=3, min_time_s=0.3, max_iterations=500, repeat=2)
    (row,), writer = _run(browser, timing, tmp_path)
    assert row.outcome == Outcome.OK, row.reason
    assert row.pages == 2 and row.samples_short is False
    record = json.loads(writer.samples_path.read_text().splitlines()[0])
    per_page = record["samples_per_page"]
    assert len(per_page) == 2 and all(n >= 3 for n in per_page)
    assert row.n_samples == sum(per_page) == len(record["wall_ms"])
    # each page kept iterating until the minimum time had passed, not just the minimum count
    # (the time from the floor's end to the last iteration's end, gaps included: the figures'
    # samples may start later, at the steady segment)
    first = record["series"][0]
    start, wall, floor = first["start_ms"], first["wall_ms"], first["floor_iterations"]
    assert start[-1] + wall[-1] - start[floor] >= 0.3 * 1000 * 0.95
    assert len(record["cold_ms"]) == 2  # one cold iteration per page, kept apart
    # statistics come with their spread and a stability verdict
    assert row.latency_ms_p10 <= row.latency_ms_median <= row.latency_ms_p90
    assert row.latency_ms_iqr >= 0 and row.latency_ms_stdev >= 0
    assert isinstance(row.unstable, bool) and (row.unstable == bool(row.instability))
    # process-tree memory sampled during the run
    assert row.proc_rss_peak_bytes > 50 * 2**20
    assert row.proc_rss_baseline_bytes > 0 and row.proc_count >= 2
    assert row.proc_rss_delta_bytes == row.proc_rss_peak_bytes - row.proc_rss_baseline_bytes
    assert row.proc_uss_peak_bytes is not None and row.proc_uss_peak_bytes <= row.proc_rss_peak_bytes
    # weight memory: packed vs float32
    assert row.compression == pytest.approx(row.weight_bytes_f32 / row.weight_bytes)
    assert row.compression > 3
    # the page's JS heap, or the reason there is none
    if browser is BrowserName.CHROME:
        assert row.js_heap_bytes > 0 and row.js_heap_source
    else:
        assert row.js_heap_bytes is None and row.js_heap_source.startswith("unavailable")


def test_resume_skips_runs_already_on_disk(tmp_path):
    require_browser(BrowserName.CHROME)
    timing = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=2)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], (8, 4, 2))
    writer = ResultWriter(tmp_path)
    save_plan(tmp_path, plan, timing)
    asyncio.run(run_sweep(plan[:2], writer, SweepOptions(timing=timing)))  # "interrupted" after two
    writer.close()  # what the interrupted process's exit would do
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_real_webgpu_webnn.py"), "--resume", str(tmp_path), "--no-report"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 of 3 runs already on disk, 1 to go" in proc.stdout
    assert "[1/1] chrome harness/webgpu 2-bit" in proc.stdout
    with (tmp_path / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["run_id"]) for r in rows] == [0, 1, 2]
    assert [r["bits_requested"] for r in rows] == ["8", "4", "2"]
    samples = [json.loads(line)["run_id"] for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert samples == [0, 1, 2]
    # resuming a finished sweep runs nothing
    again = subprocess.run(
        [sys.executable, str(ROOT / "run_real_webgpu_webnn.py"), "--resume", str(tmp_path), "--no-report"],
        capture_output=True, text=True, timeout=120,
    )
    assert again.returncode == 0 and "0 to go" in again.stdout

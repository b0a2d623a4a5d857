"""End-to-end: real Chromium and Firefox run the WGSL kernels; rows are checked for honesty."""

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
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
SMALL = Workload("test-small", 8, 256, 128)
ALL_BITS = (32, 16, 8, 4, 2)
QUICK = TimingConfig(warmup=1, min_iterations=5, min_time_s=0, max_iterations=5, timeout_s=90)


def _sweep(browsers, bits, out: Path, workload=SMALL, options=SweepOptions(timing=QUICK, progress=None)):
    plan = build_plan(browsers, [Platform.WEBGPU], [workload], bits)
    writer = ResultWriter(out)
    return asyncio.run(run_sweep(plan, writer, options)), writer


@pytest.fixture(scope="module", params=[BrowserName.CHROME, BrowserName.FIREFOX])
def browser_sweep(request, tmp_path_factory):
    require_browser(request.param)
    out = tmp_path_factory.mktemp(f"sweep-{request.param}")
    rows, writer = _sweep([request.param], ALL_BITS, out)
    return request.param, rows, writer


def test_every_bits_runs_ok_with_the_requested_precision(browser_sweep):
    browser, rows, _ = browser_sweep
    by_bits = {r.bits_requested: r for r in rows}
    assert sorted(by_bits) == sorted(ALL_BITS)
    for bits, row in by_bits.items():
        assert row.outcome == Outcome.OK, f"{browser} {bits}-bit: {row.outcome} {row.reason}"
        assert row.bits_executed == bits
        assert row.browser_version
        assert row.n_samples == QUICK.min_iterations and row.samples_short is False
        assert row.latency_ms_median is not None and row.latency_ms_median > 0
        assert row.latency_ms_p10 <= row.latency_ms_median <= row.latency_ms_p90
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance
        assert row.kernel_variant.endswith(" tile 8x4"), row.kernel_variant  # 8 rows: one tile


EDGE_SHAPES = (
    Workload("edge-gemv-n1", 1, 32, 1),  # one row, one column, K of one block
    Workload("edge-gemm", 37, 64, 65),  # rows 13+13+11 (the last tile clamped), columns 16 x 4 + 1;
    # packed: dequantized once (65 x 2 blocks: the last workgroup part-filled), then float32
    Workload("edge-gemv-tile", 3, 64, 7),  # the GEMV kernel (3 rows < 4 columns), columns 4 + 3
)
EDGE_TILES = {"edge-gemv-n1": "1x1", "edge-gemm": "13x4", "edge-gemv-tile": "3x4"}
FLOAT_ZERO = {BrowserName.CHROME: "hqq", BrowserName.FIREFOX: "offset"}
"""A weight quantizer that keeps a float zero point per block (precision/quantizers.py) per browser:
the kernels read every such quantizer's bytes alike, so one per browser covers each WGSL compiler."""


@pytest.fixture(scope="module", params=[BrowserName.CHROME, BrowserName.FIREFOX])
def edge_sweep(request, tmp_path_factory):
    """The edge shapes at every bits, weight-only, and at 8 and 4 bits with int8 activations (the
    DP4A kernel; on Chromium also WebNN's W8A8), and at 4 bits weight-only with a quantizer that
    keeps a float zero point (every packed kernel's other zero-point form): one browser session for
    the tests below. Rows by (workload, platform, bits, act_bits, weight_quant)."""
    browser = request.param
    require_browser(browser)
    platforms = [Platform.WEBGPU, Platform.WEBNN] if browser is BrowserName.CHROME else [Platform.WEBGPU]
    plan = build_plan([browser], platforms, list(EDGE_SHAPES), ALL_BITS, act_bits=[32, 8], observer="minmax",
                      weight_quant=["minmax", FLOAT_ZERO[browser]])
    plan = [r for r in plan if (r.platform is Platform.WEBGPU or (r.bits == 8 and r.act_bits == 8))
            and (r.weight_quant == "minmax" or (r.bits == 4 and r.act_bits == 32 and r.platform is Platform.WEBGPU))]
    rows = asyncio.run(run_sweep(plan, ResultWriter(tmp_path_factory.mktemp(f"edges-{browser}")),
                                 SweepOptions(timing=QUICK, progress=None)))
    return browser, {(r.workload, r.platform, r.bits_requested, r.act_bits, r.weight_quant or "minmax"): r
                     for r in rows}


def test_tile_edges_are_exact_at_every_bits(edge_sweep):
    """Shapes that are no multiple of the tile (rows, columns) and K of one block: every kernel
    still within tolerance of the float64 dequantized reference, and the row names its tile."""
    browser, by = edge_sweep
    rows = [r for (_, platform, _, act, quantizer), r in by.items()
            if platform == "webgpu" and act == 32 and quantizer == "minmax"]
    assert len(rows) == len(EDGE_SHAPES) * len(ALL_BITS)
    for row in rows:
        where = f"{browser} {row.workload} {row.bits_requested}-bit"
        assert row.outcome == Outcome.OK, f"{where}: {row.outcome} {row.reason}"
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, where
        assert row.kernel_variant.endswith(f" tile {EDGE_TILES[row.workload]}"), (where, row.kernel_variant)
        gemv_kernel = row.workload == "edge-gemv-tile" and row.bits_requested <= 8
        assert ("-gemv " in row.kernel_variant) == gemv_kernel, (where, row.kernel_variant)
        dequantized = row.workload == "edge-gemm" and row.bits_requested <= 8  # three row tiles
        assert row.kernel_variant.startswith("dequant-") == dequantized, (where, row.kernel_variant)


def test_quantization_error_grows_as_bits_shrink(browser_sweep):
    _, rows, _ = browser_sweep
    err = {r.bits_requested: r.rel_error_vs_float for r in rows}
    assert err[2] > err[4] > err[8] > err[16] > err[32]
    assert err[32] < 1e-5  # float32 weights: only the kernel's rounding
    assert 1e-2 < err[4] < 0.3 and err[2] > 0.2  # 4-bit and 2-bit really lose information


def test_packed_weights_shrink_memory(browser_sweep):
    _, rows, _ = browser_sweep
    size = {r.bits_requested: r.weight_bytes for r in rows}
    assert size[32] == SMALL.n * SMALL.k * 4
    assert size[32] > size[16] > size[8] > size[4] > size[2]


def test_rows_and_samples_are_on_disk(browser_sweep):
    browser, rows, writer = browser_sweep
    with writer.csv_path.open() as f:
        disk = list(csv.DictReader(f))
    assert [int(r["bits_requested"]) for r in disk] == [r.bits_requested for r in rows]
    assert all(r["outcome"] == "ok" for r in disk)
    samples = [json.loads(line) for line in writer.samples_path.read_text().splitlines()]
    assert len(samples) == len(rows)
    for line, row in zip(samples, rows):
        assert line["run_id"] == row.run_id
        headline = line["gpu_ms"] if row.timing_source == "gpu-timestamp" else line["wall_ms"]
        assert len(headline) == QUICK.min_iterations
    env = json.loads(writer.environment_path.read_text())
    info = env["browsers"][browser]
    assert info["version"] == rows[0].browser_version
    assert info["probe"]["webgpu"]["available"] is True


def test_sixteen_bit_path_matches_the_adapter(browser_sweep):
    """f16 arithmetic only where the adapter has shader-f16; the row says which path ran."""
    browser, rows, writer = browser_sweep
    env = json.loads(writer.environment_path.read_text())
    has_f16 = "shader-f16" in env["browsers"][browser]["probe"]["webgpu"]["features"]
    row16 = next(r for r in rows if r.bits_requested == 16)
    assert row16.compute_dtype == ("f16" if has_f16 else "f32")
    assert row16.shader == ("matmul_f16.wgsl" if has_f16 else "matmul_f16_unpack.wgsl")


@pytest.mark.parametrize("browser", [BrowserName.CHROME, BrowserName.FIREFOX])
def test_a_browser_killed_mid_sweep_costs_one_row(browser, tmp_path):
    require_browser(browser)
    killed: list[int] = []

    async def kill_second_run(run, session, job):
        if run.run_id != 1:
            return
        await job.spec_fetched.wait()
        killed.append(session.pid)
        await asyncio.to_thread(session.kill)

    options = SweepOptions(
        timing=TimingConfig(warmup=2, min_iterations=50, min_time_s=0, max_iterations=50, timeout_s=90), on_run_start=kill_second_run,
        progress=None,
    )
    rows, writer = _sweep([browser], (8, 4, 2), tmp_path, Workload("crash", 32, 256, 256), options)
    assert killed, "the hook never ran"
    assert [r.outcome for r in rows] == [Outcome.OK, Outcome.CRASH, Outcome.OK], [r.reason for r in rows]
    assert "died" in rows[1].reason or "crash" in rows[1].reason
    assert rows[1].latency_ms_median is None and rows[1].rel_error_vs_float is None
    with writer.csv_path.open() as f:
        assert [r["outcome"] for r in csv.DictReader(f)] == ["ok", "crash", "ok"]


def test_missing_browser_is_an_unavailable_row_and_the_sweep_goes_on(tmp_path):
    require_browser(BrowserName.CHROME)
    options = SweepOptions(timing=QUICK, binaries={BrowserName.EDGE: "/nonexistent/msedge"}, progress=None)
    rows, _ = _sweep([BrowserName.EDGE, BrowserName.CHROME], (8,), tmp_path, options=options)
    assert [(r.browser, r.outcome) for r in rows] == [("edge", "unavailable"), ("chrome", "ok")]
    assert "/nonexistent/msedge" in rows[0].reason


def test_cli_sweep_writes_results_and_exits_zero(tmp_path):
    require_browser(BrowserName.CHROME)
    out = tmp_path / "cli"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_real_webgpu_webnn.py"), "--browser", "chrome", "--bits", "4",
         "--only-shapes", "--shape", "4x64x64", "--warmup", "1", "--min-iterations", "3", "--min-time", "0",
         "--browser-arg", "chrome=--user-agent=precision-harness-check", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[1/1] chrome harness/webgpu 4-bit 4x64x64: ok" in proc.stdout
    with (out / "results.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert set(ResultRow.columns()) == set(row)
    assert row["outcome"] == "ok" and row["bits_executed"] == "4"
    assert row["weight_format"] == "int4-block32-asymmetric"
    # --browser-arg reached the browser (the page saw it) and is on record with the command line
    env = json.loads((out / "environment.json").read_text())
    assert env["browsers"]["chrome"]["probe"]["userAgent"] == "precision-harness-check"
    assert "--user-agent=precision-harness-check" in env["browsers"]["chrome"]["launch_args"]
    assert "chrome=--user-agent=precision-harness-check" in env["provenance"]["command"]
    assert env["timing"] | {"warmup": 1, "min_iterations": 3, "min_time_s": 0} == env["timing"]  # the protocol run
    assert env["machine"]["os"] and env["machine"]["cpu_model"]  # what ran it, by name
    # the sweep leaves its report, and says where as its last line
    page = out / "report" / "report.html"
    assert proc.stdout.strip().splitlines()[-1] == f"report: {page}"
    html = page.read_text()
    if row["adapter"].endswith(" (fallback)"):  # SwiftShader here: named before any figure
        caveat = html.index("Software adapter: The ok WebGPU run here ran on a fallback adapter (chrome: ")
        assert caveat < html.index("At a glance") and "· fallback adapter" in html
    assert list((out / "report" / "plots").glob("*.png"))


def _kill_chrome_child(process_type: str, killed: list[int], delay_s: float = 0.0):  # noqa: ANN202
    """A run hook that kills the second run's Chrome child process of ``--type=<process_type>``
    once its page has fetched its job (and ``delay_s`` more), recording the pids in ``killed``."""
    import psutil

    async def kill(run, session, job):  # noqa: ANN001, ANN202
        if run.run_id != 1:
            return
        await job.spec_fetched.wait()
        await asyncio.sleep(delay_s)
        for proc in psutil.Process(session.pid).children(recursive=True):
            try:  # an earlier page's renderer may be a zombie not yet reaped: not the one to kill
                found = f"--type={process_type}" in " ".join(proc.cmdline())
            except psutil.Error:
                continue
            if found:
                proc.kill()
                killed.append(proc.pid)

    return kill


def test_a_crashed_renderer_is_a_crash_row_not_a_timeout(tmp_path):
    """Only the page's renderer dies (the browser's main process lives): found within seconds."""
    require_browser(BrowserName.CHROME)
    import time

    killed: list[int] = []
    timing = TimingConfig(warmup=2, min_iterations=50, min_time_s=0, max_iterations=50, timeout_s=90)
    options = SweepOptions(timing=timing, on_run_start=_kill_chrome_child("renderer", killed), progress=None)
    started = time.monotonic()
    rows, _ = _sweep([BrowserName.CHROME], (8, 4, 2), tmp_path, Workload("crash", 32, 256, 256), options)
    elapsed = time.monotonic() - started
    assert killed, "no renderer process was found to kill"
    assert [r.outcome for r in rows] == [Outcome.OK, Outcome.CRASH, Outcome.OK], [r.reason for r in rows]
    assert "crash" in rows[1].reason
    assert elapsed < 60, f"the crash was only noticed after {elapsed:.0f} s"


def test_a_lost_gpu_device_is_its_own_outcome_and_the_next_run_is_ok(tmp_path):
    """Chrome's GPU process killed while a page computes: the page's device is lost (the browser's
    loss, reason 'unknown', seen by web/meter.js), the row says device-lost with the reason, not a
    generic failure; the next run's page gets a fresh device and is ok."""
    require_browser(BrowserName.CHROME)
    killed: list[int] = []
    timing = TimingConfig(warmup=2, min_iterations=400, min_time_s=0, max_iterations=400, timeout_s=90)
    options = SweepOptions(timing=timing, on_run_start=_kill_chrome_child("gpu-process", killed, 1.0), progress=None)
    rows, _ = _sweep([BrowserName.CHROME], (8, 4, 2), tmp_path, Workload("lost", 32, 256, 256), options)
    assert killed, "no GPU process was found to kill"
    assert [r.outcome for r in rows] == [Outcome.OK, Outcome.DEVICE_LOST, Outcome.OK], [r.reason for r in rows]
    assert "device was lost" in rows[1].reason and rows[1].latency_ms_median is None


def test_int8_activations_run_on_the_dp4a_kernel(edge_sweep):
    """W8A8 and W4A8 through dot4I8Packed (both browsers list packed_4x8_integer_dot_product):
    exact integer dot products, so the kernel error is float32 rounding of the rescale; the
    activations cost accuracy on top of the weights'; WebNN runs them through quantizeLinear."""
    browser, by = edge_sweep
    for shape in EDGE_SHAPES:  # 1x32x1 (one block), 37x64x65 (clamped tiles), 3x64x7 (GEMV)
        for bits in (8, 4):
            row = by[(shape.name, "webgpu", bits, 8, "minmax")]
            where = f"{browser} {shape.name} W{bits}A8"
            assert row.outcome == Outcome.OK, f"{where}: {row.reason}"
            assert row.kernel_variant.startswith(f"dp4a-w{bits}a8 tile"), where
            assert row.compute_dtype == "i8dot" and row.observer == "minmax" and row.bits_executed == bits
            assert row.rel_error_vs_dequantized <= 1e-6, where
            weight_only = by[(shape.name, "webgpu", bits, 32, "minmax")]
            if shape.m * shape.n > 100:  # one output (1x32x1) may cancel errors by chance
                assert row.rel_error_vs_float >= weight_only.rel_error_vs_float * 0.99, where
    if browser is BrowserName.CHROME:  # WebNN's quantizeLinear -> dequantizeLinear on x, beside
        for shape in EDGE_SHAPES:
            webnn = by[(shape.name, "webnn", 8, 8, "minmax")]
            assert webnn.outcome == Outcome.OK, webnn.reason
            assert webnn.rel_error_vs_dequantized <= webnn.kernel_tolerance, shape.name


def test_float_zero_points_run_in_every_packed_kernel(edge_sweep):
    """The hqq (Chromium) and offset (Firefox) quantizers' weights (a float32 zero point per block) through the GEMV,
    single-tile and dequantize-first kernels: within tolerance of the float64 reference on the same
    bytes, the row names the quantizer, the kernel's zero-point form and the bytes it held."""
    browser, by = edge_sweep
    for shape in EDGE_SHAPES:
        blocks = shape.n * shape.k // 32
        minmax = by[(shape.name, "webgpu", 4, 32, "minmax")]
        quantizer = FLOAT_ZERO[browser]
        row = by[(shape.name, "webgpu", 4, 32, quantizer)]
        where = f"{browser} {shape.name} 4-bit {quantizer}"
        assert row.outcome == Outcome.OK, f"{where}: {row.outcome} {row.reason}"
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, where
        assert row.weight_quant == quantizer and row.zero_point_dtype == "float32", where
        assert "-zf32" in row.kernel_variant and row.kernel_variant.endswith(f" tile {EDGE_TILES[shape.name]}"), \
            (where, row.kernel_variant)
        assert row.weight_bytes == shape.n * shape.k // 2 + 8 * blocks and row.bits_executed == 4, where
        if shape.name == "edge-gemm":  # 4,225 outputs: a finer grid per block costs less than min/max's
            assert row.rel_error_vs_float < minmax.rel_error_vs_float, (where, row.rel_error_vs_float)

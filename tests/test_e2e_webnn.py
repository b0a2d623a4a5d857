"""End-to-end WebNN in real browsers: the WebNN Chromium (LiteRT/XNNPACK) and Firefox (no WebNN)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_browser

from fixed_web_platform.api import run_real_test
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform, PrecisionMode
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
SMALL = Workload("test-small", 8, 256, 128)
QUICK = TimingConfig(warmup=1, min_iterations=5, min_time_s=0, max_iterations=5, timeout_s=90)
BITS = (16, 8, 4, 2)


def _sweep(browser, platforms, bits, mode, out: Path):
    plan = build_plan([browser], platforms, [SMALL], bits, precision_mode=mode)
    return asyncio.run(run_sweep(plan, ResultWriter(out), SweepOptions(timing=QUICK, progress=None)))


@pytest.fixture(scope="module")
def standard_rows(tmp_path_factory):
    require_browser(BrowserName.CHROME)
    rows = _sweep(BrowserName.CHROME, [Platform.WEBNN], BITS, PrecisionMode.STANDARD,
                  tmp_path_factory.mktemp("standard"))
    return {r.bits_requested: r for r in rows}


@pytest.fixture(scope="module")
def experimental_rows(tmp_path_factory):
    require_browser(BrowserName.CHROME)
    rows = _sweep(BrowserName.CHROME, [Platform.WEBNN], BITS, PrecisionMode.EXPERIMENTAL,
                  tmp_path_factory.mktemp("experimental"))
    return {r.bits_requested: r for r in rows}


def test_standard_mode_upgrades_unguaranteed_precisions_to_8_bit(standard_rows):
    executed = {bits: row.bits_executed for bits, row in standard_rows.items()}
    assert executed == {16: 16, 8: 8, 4: 8, 2: 8}
    for bits, row in standard_rows.items():
        assert row.outcome == Outcome.OK, f"{bits}-bit: {row.reason}"
        assert row.platform == "webnn" and row.precision_mode == "standard"
        assert row.device_type == "cpu"
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance
    assert standard_rows[8].reason == ""
    assert "int4 is not a spec-guaranteed WebNN type" in standard_rows[4].reason
    assert "2-bit" in standard_rows[2].reason
    assert standard_rows[4].weight_dtype == standard_rows[2].weight_dtype == "int8"
    # the upgraded runs really ran the 8-bit weights: same accuracy as the 8-bit row
    assert standard_rows[4].rel_error_vs_float == pytest.approx(standard_rows[8].rel_error_vs_float, rel=1e-3)


def test_experimental_4_bit_runs_as_int4(experimental_rows):
    row = experimental_rows[4]
    assert row.outcome == Outcome.OK, row.reason
    assert row.bits_executed == 4
    assert row.weight_dtype == "int4" and row.zero_point_dtype == "int4"
    assert row.rel_error_vs_dequantized <= row.kernel_tolerance
    assert row.rel_error_vs_float > experimental_rows[8].rel_error_vs_float  # real 4-bit loss


def test_experimental_2_bit_reports_the_browsers_own_error(experimental_rows):
    row = experimental_rows[2]
    assert row.outcome == Outcome.UNSUPPORTED
    assert row.bits_executed is None and row.latency_ms_median is None
    assert "browser said:" in row.reason and "int2" in row.reason.split("browser said:")[1]


def test_experimental_mode_never_falls_back(experimental_rows):
    for bits, row in experimental_rows.items():
        assert row.bits_executed in (bits, None)
        assert row.precision_mode == "experimental"


def test_firefox_webnn_is_an_unsupported_row_not_a_crash(tmp_path):
    require_browser(BrowserName.FIREFOX)
    rows = _sweep(BrowserName.FIREFOX, [Platform.WEBGPU, Platform.WEBNN], (8,), PrecisionMode.STANDARD, tmp_path)
    by_platform = {r.platform: r for r in rows}
    assert by_platform["webgpu"].outcome == Outcome.OK
    assert by_platform["webnn"].outcome == Outcome.UNSUPPORTED
    assert "no WebNN" in by_platform["webnn"].reason


def test_both_platforms_side_by_side_agree(tmp_path):
    require_browser(BrowserName.CHROME)
    rows = _sweep(BrowserName.CHROME, [Platform.WEBGPU, Platform.WEBNN], (16, 8), PrecisionMode.STANDARD, tmp_path)
    assert [(r.bits_requested, r.platform) for r in rows] == [
        (16, "webgpu"), (16, "webnn"), (8, "webgpu"), (8, "webnn")]
    for gpu, nn in (rows[0:2], rows[2:4]):
        assert gpu.outcome == nn.outcome == Outcome.OK, (gpu.reason, nn.reason)
        assert gpu.rel_error_vs_dequantized <= gpu.kernel_tolerance
        assert nn.rel_error_vs_dequantized <= nn.kernel_tolerance
        assert gpu.weight_bytes == nn.weight_bytes  # the same packed bytes feed both
        if gpu.compute_dtype == nn.compute_dtype:
            assert nn.rel_error_vs_float == pytest.approx(gpu.rel_error_vs_float, rel=0.05)
        else:  # e.g. WebNN float16 matmul vs WebGPU f32 arithmetic: both close to float64
            assert max(gpu.rel_error_vs_float, nn.rel_error_vs_float) < 1e-3


def test_api_returns_rows_as_plain_data(tmp_path):
    require_browser(BrowserName.CHROME)
    rows = asyncio.run(run_real_test(
        [Platform.WEBNN], browser="chrome", bits=[4], experimental_precision=True,
        shapes=["4x64x32"], timing=QUICK, output_dir=tmp_path / "api",
    ))
    assert len(rows) == 1 and isinstance(rows[0], dict)
    assert rows[0]["outcome"] == "ok" and rows[0]["bits_executed"] == 4
    assert json.loads(json.dumps(rows[0], default=str))["weight_dtype"] == "int4"
    assert (tmp_path / "api" / "results.csv").is_file()


def test_capabilities_command(tmp_path):
    require_browser(BrowserName.CHROME)
    require_browser(BrowserName.FIREFOX)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_real_webgpu_webnn.py"), "capabilities", "--browser", "chrome",
         "firefox", "edge", "--webnn-device", "cpu", "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "capabilities.json").read_text())
    entries = {e["browser"]: e for e in doc["browsers"]}
    chrome, firefox, edge = entries["chrome"], entries["firefox"], entries["edge"]
    assert chrome["status"] == "ok" and chrome["webnn"]["contexts"]["cpu"]["available"] is True
    assert "int4" in chrome["webnn"]["contexts"]["cpu"]["limits"]["dequantizeLinear"]["input"]["dataTypes"]
    assert chrome["probe"]["webgpu"]["available"] is True
    assert firefox["status"] == "ok" and firefox["webnn"]["present"] is False
    assert edge["status"] == "unavailable" and "msedge" in edge["reason"]
    table = (tmp_path / "capabilities.md").read_text()
    assert "| chrome | 153" in table and "| firefox |" in table and "| edge |" in table


def test_a_float_zero_point_is_subtracted_per_block_in_every_layout(tmp_path):
    """offset's float zero points (one float32 per block) on int4 codes: dequantizeLinear with a zero
    of 0, then zero x scale subtracted per block (web/engines/webnn_graph.js) in the three layouts a
    graph form gives the weight ([N, K], [K, N] re-packed, [N x blocks, block]). A wrong offset or
    layout would put the output off the float64 reference on the held bytes by the size of a step."""
    require_browser(BrowserName.CHROME)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBNN], [SMALL], [4], precision_mode=PrecisionMode.EXPERIMENTAL,
                      weight_quant="offset", graph_form=["transpose", "pretransposed", "blockrows"])
    rows = asyncio.run(run_sweep(plan, ResultWriter(tmp_path), SweepOptions(timing=QUICK, progress=None)))
    assert [r.graph_form for r in rows] == ["transpose", "pretransposed", "blockrows"]
    for row in rows:
        assert row.outcome == Outcome.OK, f"{row.graph_form}: {row.reason}"
        assert (row.weight_quant, row.weight_dtype, row.zero_point_dtype) == ("offset", "int4", "float32")
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, row.graph_form
    assert len({round(r.rel_error_vs_float, 6) for r in rows}) == 1  # the same values in every layout

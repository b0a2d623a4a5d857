"""End-to-end ONNX Runtime Web beside the harness, in real browsers: the same quantized bytes,
every provider, fallback made visible, figures judged against the same float64 references."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import require_browser

from fixed_web_platform.engines.ort import DEFAULT_ORT
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.report.render import build_report
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads import MatmulWorkload

pytestmark = pytest.mark.browser
SMALL = MatmulWorkload("test-small", 4, 128, 64)
QUICK = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=2, timeout_s=90)
BITS = (32, 16, 8, 4, 2)


def _sweep(browser: BrowserName, platforms, out: Path):  # noqa: ANN001, ANN202
    require_browser(browser)
    assert (DEFAULT_ORT.directory / "ort.webgpu.min.mjs").is_file(), "run scripts/setup.sh first"
    plan = build_plan([browser], platforms, [SMALL], BITS, engines=[EngineName.HARNESS, EngineName.ORT])
    rows = asyncio.run(run_sweep(plan, ResultWriter(out), SweepOptions(timing=QUICK)))
    return plan, rows


@pytest.fixture(scope="module")
def chrome(tmp_path_factory):  # noqa: ANN001, ANN201
    out = tmp_path_factory.mktemp("ort-chrome")
    plan, rows = _sweep(BrowserName.CHROME, [Platform.WEBGPU, Platform.WEBNN, Platform.WASM], out)
    return out, plan, {(r.engine, r.platform, r.bits_requested): r for r in rows}


def test_every_planned_run_has_a_row_and_ort_sits_beside_the_harness(chrome) -> None:  # noqa: ANN001
    _, plan, rows = chrome
    assert len(rows) == len(plan) == len(BITS) * 5  # harness webgpu/webnn + ort webgpu/webnn/wasm
    for bits in BITS:
        for platform in ("webgpu", "webnn", "wasm"):
            assert ("ort", platform, bits) in rows
        assert ("harness", "wasm", bits) not in rows


def test_ort_rows_are_measured_and_right_or_say_why(chrome) -> None:  # noqa: ANN001
    _, _, rows = chrome
    for (engine, platform, bits), row in rows.items():
        if engine != "ort":
            continue
        if row.outcome == Outcome.UNSUPPORTED:
            assert row.reason, (platform, bits)
            continue
        assert row.outcome == Outcome.OK, f"ort/{platform} {bits}-bit: {row.reason}"
        assert row.executed_on in ("webgpu", "webnn", "wasm")
        assert row.bits_executed == bits
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance
        assert row.n_samples >= QUICK.min_iterations and row.latency_ms_median > 0
        assert row.engine_version == "1.30.0" and row.threads >= 1
        # ORT's WebGPU session profile gives kernel timestamps; other providers: wall clock
        assert row.timing_source == ("gpu-timestamp" if row.executed_on == "webgpu" else "wall-clock")
        harness = rows.get(("harness", "webgpu", bits))
        if bits <= 8 and harness is not None and harness.outcome == Outcome.OK:
            # the same quantized values: what quantization costs is the same figure
            assert row.rel_error_vs_float == pytest.approx(harness.rel_error_vs_float, rel=1e-2)


def test_wasm_runs_where_it_was_asked(chrome) -> None:  # noqa: ANN001
    _, _, rows = chrome
    for bits in (32, 8, 4, 2):
        row = rows[("ort", "wasm", bits)]
        assert row.outcome == Outcome.OK and row.executed_on == "wasm" and "placed" not in row.reason


def test_4_bit_on_ort_webnn_falls_back_visibly(chrome) -> None:  # noqa: ANN001
    """ORT lowers 4-bit MatMulNBits to uint4 dequantizeLinear, which this Chromium's WebNN does
    not list: the node runs on wasm and the row says so, with ORT's own words."""
    _, _, rows = chrome
    row = rows[("ort", "webnn", 4)]
    assert row.outcome == Outcome.OK
    assert row.executed_on == "wasm"
    assert "placed the weight-bearing node on wasm, not webnn" in row.reason
    assert "fallback to CPU EP has been explicitly disabled" in row.reason
    assert "CPUExecutionProvider" in row.reason  # ORT's own node-placement log
    assert rows[("ort", "webnn", 32)].executed_on == "webnn"  # float32 MatMul: WebNN takes it


def test_samples_and_report_side_by_side(chrome, tmp_path: Path) -> None:  # noqa: ANN001
    out, _, rows = chrome
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    ort_ok = [r for r in records if rows_by_id(rows)[r["run_id"]].engine == "ort" and r["outcome"] == "ok"]
    assert ort_ok and all(len(r["wall_ms"]) >= QUICK.min_iterations for r in ort_ok)
    assert all(r.get("onnx_node") for r in ort_ok)
    files = build_report([out], tmp_path / "report")
    summary = pd.read_csv(files.summary_csv)
    ort = summary[(summary["engine"] == "ort") & (summary["platform"] == "webgpu")]
    assert not ort.empty and ort["latency_vs_harness"].notna().all()
    assert "latency vs harness" in files.markdown.read_text()
    # the engine build the pages reported loading is on record, and in the report's environment
    assert json.loads((out / "environment.json").read_text())["engines"] == {"ort": ["1.30.0"]}
    assert "engine builds: ort 1.30.0" in files.html.read_text()


def rows_by_id(rows: dict) -> dict:
    return {r.run_id: r for r in rows.values()}


def test_firefox_runs_ort_webgpu_and_wasm_or_says_why(tmp_path: Path) -> None:
    _, rows = _sweep(BrowserName.FIREFOX, [Platform.WEBGPU, Platform.WASM], tmp_path / "ff")
    ort = [r for r in rows if r.engine == "ort"]
    assert len(ort) == 2 * len(BITS)
    for row in ort:
        assert row.outcome in (Outcome.OK, Outcome.UNSUPPORTED), row.reason
        if row.outcome == Outcome.OK:
            assert row.executed_on == row.platform
            assert row.rel_error_vs_dequantized <= row.kernel_tolerance
        else:
            assert row.reason


def test_every_engine_holds_the_quantizers_bytes_it_can(tmp_path: Path) -> None:
    """GPTQ's weights (minmax's grid, integer zero points) at 8 bits: the harness's WGSL and WebNN
    and ORT on every provider hold the same bytes and land on the same figures. The offset
    quantizer's at 4 bits (a float32 zero point per block): ORT's wasm MatMulNBits takes them as they
    are, beside the WGSL kernels and the harness's WebNN graph (at 8 bits there: standard mode); ORT's
    WebGPU provider is refused with the reason, before any page."""
    require_browser(BrowserName.CHROME)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WEBNN, Platform.WASM], [SMALL], [8, 4],
                      engines=[EngineName.HARNESS, EngineName.ORT], weight_quant=["gptq", "offset"])
    plan = [r for r in plan if (r.bits, r.weight_quant) in ((8, "gptq"), (4, "offset"))
            and (r.weight_quant == "gptq" or r.platform != Platform.WEBNN or r.engine == EngineName.HARNESS)]
    rows = {(r.weight_quant, r.engine, r.platform): r
            for r in asyncio.run(run_sweep(plan, ResultWriter(tmp_path / "q"), SweepOptions(timing=QUICK)))}
    assert len(rows) == 5 + 4
    gptq = [r for (q, _, _), r in rows.items() if q == "gptq"]
    for row in gptq:
        assert row.outcome == Outcome.OK, f"{row.engine}/{row.platform}: {row.reason}"
        assert row.calibration == "synthetic" and row.weight_format.endswith("-block32-gptq"), row.weight_format
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, (row.engine, row.platform)
        assert row.rel_error_vs_float == pytest.approx(gptq[0].rel_error_vs_float, rel=1e-3), (row.engine, row.platform)
    harness, wasm, webgpu, webnn = (rows[("offset", e, p)] for e, p in (
        ("harness", "webgpu"), ("ort", "wasm"), ("ort", "webgpu"), ("harness", "webnn")))
    for row in (harness, wasm, webnn):
        assert row.outcome == Outcome.OK, f"{row.engine}/{row.platform}: {row.reason}"
        assert row.weight_quant == "offset" and row.zero_point_dtype == "float32"
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, row.engine
    assert wasm.executed_on == "wasm" and wasm.weight_bytes == harness.weight_bytes
    assert wasm.rel_error_vs_float == pytest.approx(harness.rel_error_vs_float, rel=1e-4)
    assert webgpu.outcome == Outcome.UNSUPPORTED, webgpu.reason
    assert "engines that do: harness/webgpu, harness/webnn, ort/wasm" in webgpu.reason

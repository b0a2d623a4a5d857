"""The weight-quantizer axis (--weight-quant): the bytes a quantizer's codes are held as, the runs
a plan makes of it and who refuses them, the rows that carry it (and older folders that read as
minmax), and the WGSL kernels that read a float zero point per block. The kernels' arithmetic in
real browsers: tests/test_e2e_webgpu.py (test_float_zero_points_run_in_every_packed_kernel)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fixed_web_platform.engines.wgsl import kernels as wgsl
from fixed_web_platform.plan import build_plan
from fixed_web_platform.precision import quant
from fixed_web_platform.precision.held import hold_weights
from fixed_web_platform.precision.quantizers import quantize
from fixed_web_platform.progress import describe
from fixed_web_platform.report.glance import precision_text
from fixed_web_platform.results.reader import load
from fixed_web_platform.results.rows import ResultRow, identity_columns
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.models import rules
from fixed_web_platform.workloads import EncoderWorkload
from fixed_web_platform.workloads.matmul import MatmulWorkload

SHAPE = MatmulWorkload("q", 3, 64, 8)


def _w() -> np.ndarray:
    return (np.random.default_rng(7).standard_normal((8, 64)) * 0.05).astype(np.float32)


@pytest.mark.parametrize("unsigned", [False, True])
@pytest.mark.parametrize(("name", "bits"), [("offset", 4), ("offset", 2), ("hqq", 4), ("kquant", 4)])
def test_a_float_zero_quantizers_bytes_decode_to_its_codes(name: str, bits: int, unsigned: bool) -> None:
    if name == "hqq":
        pytest.importorskip("torch")
    w = _w()
    codes, held = quantize(w, bits, 32, name), hold_weights(w, bits, 32, unsigned, name)
    shift = 0 if unsigned else 1 << (bits - 1)
    packed = np.frombuffer(held.tensors["w"], dtype=np.uint8)
    assert np.array_equal(quant.unpack_bits(packed, bits, w.size, not unsigned).reshape(w.shape) + shift, codes.codes)
    assert np.array_equal(np.frombuffer(held.tensors["zero_points"], dtype=np.float32), codes.zero.reshape(-1))
    assert np.array_equal(np.frombuffer(held.tensors["scales"], dtype=np.float32), codes.scale.reshape(-1))
    assert np.array_equal(held.w_exec, codes.dequantize())  # the reference holds what the bytes say
    blocks = w.size // 32
    assert held.weight_bytes == w.size * bits // 8 + 4 * blocks + 4 * blocks  # a float32 zero per block
    assert (held.quantizer, held.zero_point_dtype) == (name, "float32")
    assert held.weight_format == f"{'u' if unsigned else ''}int{bits}-block32-{name}"


def test_minmax_bytes_are_unchanged_and_per_channel_stays_minmax() -> None:
    w = _w()
    held = hold_weights(w, 4, 32)
    assert (held.quantizer, held.zero_point_dtype, held.weight_format) == ("minmax", "int4", "int4-block32-asymmetric")
    np.testing.assert_allclose(held.w_exec, quantize(w, 4, 32, "minmax").dequantize(), rtol=1.2e-7)
    with pytest.raises(ValueError, match="per-channel weights are held symmetric by minmax, not hqq"):
        hold_weights(w, 4, 0, quantizer="hqq")


def test_the_plan_multiplies_blockwise_packed_runs_and_engines_refuse_what_they_cannot_hold() -> None:
    runs = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WEBNN, Platform.WASM], [SHAPE], [32, 4],
                      engines=[EngineName.HARNESS, EngineName.ORT], act_bits=[32, 8], observer="minmax",
                      granularity=["block", "per-channel"], weight_quant=["minmax", "offset"])
    harness = {(r.bits, r.granularity, r.act_bits, r.weight_quant): r for r in runs
               if r.engine == EngineName.HARNESS and r.platform == Platform.WEBGPU}
    # float weights and per-channel weights: minmax once; blockwise 4-bit: each quantizer
    assert sorted(harness) == [(4, "block", 8, "minmax"), (4, "block", 8, "offset"), (4, "block", 32, "minmax"),
                               (4, "block", 32, "offset"), (4, "per-channel", 8, "minmax"),
                               (4, "per-channel", 32, "minmax"), (32, "block", 32, "minmax")]
    assert not harness[(4, "block", 32, "offset")].refused
    assert "DP4A" in harness[(4, "block", 8, "offset")].refused  # integer zero points in i32
    refused = [r for r in runs if r.weight_quant == "offset" and r.act_bits == 32 and r.refused]
    assert {(r.engine, r.platform) for r in refused} == {(EngineName.ORT, Platform.WEBGPU), (EngineName.ORT, Platform.WEBNN)}
    for run in refused:
        assert "offset quantizer (a float zero point per block)" in run.refused, run.refused
        assert run.refused.endswith("(engines that do: harness/webgpu, harness/webnn, ort/wasm)"), run.refused
    assert not any(r.refused for r in runs if r.weight_quant == "minmax" and r.act_bits == 32)
    wasm = [r for r in runs if r.platform == Platform.WASM and r.weight_quant == "offset" and r.act_bits == 32]
    assert len(wasm) == 1 and not wasm[0].refused  # ONNX Runtime's CPU MatMulNBits takes float zero points
    with pytest.raises(ValueError, match="weight quantizer 'gptq2' is not one of minmax, offset, hqq, kquant, gptq"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SHAPE], [4], weight_quant=["gptq2"])


def test_ort_wasm_holds_float_zero_points_at_4_and_2_bits_only() -> None:
    """ORT's CPU MatMulNBits fails a run with float zero points at 8 bits (seen in the browser):
    planned as a refusal that says so, at 8 bits and wherever a model's rules put a layer at 8."""
    runs = build_plan([BrowserName.CHROME], [Platform.WASM], [SHAPE], [8, 4, 2], engines=[EngineName.ORT],
                      weight_quant=["offset", "gptq"])
    refused = {(r.bits, r.weight_quant): r.refused for r in runs}
    assert "at 4 and 2 bits only, not 8" in refused[(8, "offset")], refused[(8, "offset")]
    assert not refused[(4, "offset")] and not refused[(2, "offset")] and not refused[(8, "gptq")]
    mixed = EncoderWorkload.create("all-MiniLM-L6-v2", rules=rules.mixed_precision_rules(), rules_name="mixed")
    (run,) = build_plan([BrowserName.CHROME], [Platform.WASM], [mixed], [4], engines=[EngineName.ORT],
                        weight_quant=["hqq"])
    assert "not 8" in run.refused


def test_rows_carry_the_quantizer_and_older_folders_read_as_minmax(tmp_path) -> None:  # noqa: ANN001
    assert "weight_quant" in identity_columns()
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SHAPE], [32, 4], weight_quant=["hqq", "minmax"])
    rows = [ResultRow.without_measurement(r, Outcome.UNSUPPORTED, "x") for r in plan]
    assert [(r.bits_requested, r.weight_quant) for r in rows] == [(32, ""), (4, "hqq"), (4, "minmax")]
    assert plan[1].label.startswith("chrome/harness/webgpu 4-bit hqq ")
    assert describe(plan[1]).startswith("chrome harness/webgpu 4-bit hqq ")  # the progress line
    writer = ResultWriter(tmp_path / "old")
    for row in rows[::2]:
        writer.add(row)
    writer.close()
    table = pd.read_csv(writer.csv_path, dtype=str, keep_default_na=False)
    table.drop(columns=["weight_quant"]).to_csv(writer.csv_path, index=False)  # a folder from before the axis
    assert list(load(writer.directory).rows["weight_quant"]) == ["", "minmax"]


def test_the_report_names_a_quantizer_where_it_tells_rows_apart() -> None:
    row = pd.Series({"bits_requested": 4, "weight_quant": "hqq", "granularity": "block"})
    assert precision_text(row) == "4-bit hqq"
    assert precision_text(row.copy().replace("hqq", "minmax")) == "4-bit"
    assert precision_text(row.copy().replace("hqq", "minmax"), quantizers=2) == "4-bit minmax"


def test_packed_kernels_read_a_float_zero_point_per_block_where_the_quantizer_keeps_one() -> None:
    gemv, one_tile, gemm = wgsl.tiling_for(3, 64), wgsl.tiling_for(1, 1), wgsl.tiling_for(37, 65)
    families = [v.kernel_variant(t) for m, t in ((3, gemv), (1, one_tile), (37, gemm))
                for v in wgsl.variants_for(4, 32, t, m, zero="float")]
    assert families == ["quant-w4-zf32-gemv tile 3x4", "quant-w4-zf32 tile 1x1", "dequant-w4-zf32-f32 tile 13x4"]
    for shader in ("matmul_quant.wgsl", "matmul_quant_gemv.wgsl"):
        floats = wgsl.shader_source(shader, gemv, 4, zero="float")
        assert "@binding(4) var<storage, read> zero_points: array<f32>;" in floats and "{ZERO" not in floats
        assert "zero_points: array<u32>" in wgsl.shader_source(shader, gemv, 4, zero="packed")
    assert "@binding(2) var<storage, read> zero_points: array<f32>;" in wgsl.dequantize_source(4, "float")
    assert wgsl.variants_for(4, 8, gemm, 37, zero="float")[0].zero == ""  # DP4A reads its own integer ones
    with pytest.raises(ValueError, match="zero points are held packed or float, not 'half'"):
        wgsl.variants_for(4, 32, gemv, 3, zero="half")


def test_a_calibrated_quantizer_needs_a_calibration_set_and_integer_zeros_reach_every_engine() -> None:
    import dataclasses
    import types

    from fixed_web_platform.engines.registry import engine_for, kind_runner

    (run,) = build_plan([BrowserName.CHROME], [Platform.WEBNN], [SHAPE], [8], weight_quant=["gptq"])
    assert not run.refused and run.weight_quant == "gptq"  # integer zero points: WebNN holds GPTQ's bytes
    row = ResultRow.without_measurement(run, Outcome.UNSUPPORTED, "x")
    assert row.calibration == "synthetic"  # the draws it calibrated on, never the timed x
    unseen = dataclasses.replace(run, workload=types.SimpleNamespace(kind="new-kind", calibration_label=""))
    engine = engine_for(EngineName.HARNESS, Platform.WEBNN)
    why = kind_runner(EngineName.HARNESS, Platform.WEBNN, "speech").refusal(engine, unseen)
    assert why == ("the gptq quantizer calibrates on inputs apart from the evaluated ones; new-kind workloads "
                   "have no calibration set yet")


def test_rows_carry_the_buffer_cache_and_older_folders_read_as_ort_s_default(tmp_path) -> None:  # noqa: ANN001
    """A setting, not a precision: ORT's WebGPU rows name the mode they ran (a folder from before the
    column ran ORT's default, bucket); other engines' rows leave it blank."""
    assert "buffer_cache" in identity_columns()
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WASM], [SHAPE], [8],
                      engines=[EngineName.ORT], buffer_cache=["simple"])
    rows = [ResultRow.without_measurement(r, Outcome.UNSUPPORTED, "x") for r in plan]
    assert sorted((r.platform, r.buffer_cache) for r in rows) == [("wasm", ""), ("webgpu", "simple")]
    assert "cache:simple" in next(r.label for r in plan if r.buffer_cache)
    writer = ResultWriter(tmp_path / "old")
    for row in rows:
        writer.add(row)
    writer.close()
    table = pd.read_csv(writer.csv_path, dtype=str, keep_default_na=False)
    table.drop(columns=["buffer_cache"]).to_csv(writer.csv_path, index=False)
    read = load(writer.directory).rows
    assert dict(zip(read["platform"], read["buffer_cache"])) == {"webgpu": "bucket", "wasm": ""}

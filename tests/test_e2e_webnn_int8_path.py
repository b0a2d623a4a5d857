"""End to end in real Chromium (WebNN on LiteRT/XNNPACK): per-channel weights and the fused int8
form (gemm_qdq) beside its unfused control (gemm), for a lone matmul and for all-MiniLM-L6-v2;
per-channel weights on the WebGPU kernels too; the weight-only per-channel form (gemm_scale);
ONNX Runtime Web's int8 QDQ models of the same numbers on its WebNN and wasm providers. What is checked is what a user relies on: every
row ran, says its granularity and graph form, and matches its float64 reference (with the int8
output for the fused form); the fused and control rows differ only by the output's quantization.
Speed is not asserted here (docs/guides and benchmarks carry the figures)."""

from __future__ import annotations

import asyncio
import functools

import pytest
from conftest import require_browser

from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.models.inputs import builtin_texts
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads import EncoderWorkload, parse_shape

pytestmark = pytest.mark.browser
QUICK = TimingConfig(warmup=1, min_iterations=3, min_time_s=0, max_iterations=3, timeout_s=240)
SHAPE = parse_shape("32x256x128")


@functools.cache
def minilm() -> EncoderWorkload:
    """MiniLM at 2 x 16 tokens (made when first asked for, not at collection)."""
    return EncoderWorkload.create("all-MiniLM-L6-v2", batch_size=2, seq_len=16, texts=builtin_texts()[:4])


def _rows(tmp_path, platforms, workload, bits=(32, 8), **kw):  # noqa: ANN001, ANN003, ANN202
    require_browser(BrowserName.CHROME)
    plan = build_plan([BrowserName.CHROME], platforms, [workload], list(bits), **kw)
    writer = ResultWriter(tmp_path)
    rows = asyncio.run(run_sweep(plan, writer, SweepOptions(timing=QUICK)))
    writer.close()
    return rows


@pytest.fixture(scope="module")
def matmul_rows(tmp_path_factory):  # noqa: ANN001, ANN201
    return _rows(tmp_path_factory.mktemp("int8-path-matmul"), [Platform.WEBNN, Platform.WEBGPU], SHAPE,
                 act_bits=[32, 8], granularity=["block", "per-channel"], graph_form=["", "gemm"])


def _one(rows, **want):  # noqa: ANN001, ANN003, ANN202
    """The row of that configuration (the default form and the form it resolves to, asked for by
    name, are two runs of one configuration: the first)."""
    found = [r for r in rows if all(getattr(r, k) == v for k, v in want.items())]
    assert found, want
    return found[0]


def test_every_matmul_row_ran_and_is_right(matmul_rows) -> None:  # noqa: ANN001
    for r in matmul_rows:
        assert r.outcome == Outcome.OK, (r.platform, r.bits_requested, r.granularity, r.graph_form, r.reason)
        assert r.rel_error_vs_dequantized <= r.kernel_tolerance, (r.graph_form, r.rel_error_vs_dequantized)


def test_per_channel_rows_say_so_and_hold_symmetric_bytes(matmul_rows) -> None:  # noqa: ANN001
    for platform in ("webgpu", "webnn"):
        r = _one(matmul_rows, platform=platform, bits_requested=8, act_bits=32, granularity="per-channel",
                 graph_form="gemm" if platform == "webnn" else "")
        assert r.weight_format.endswith("-per-channel-symmetric"), r.weight_format
        assert r.block_size == 0
        block = _one(matmul_rows, platform=platform, bits_requested=8, act_bits=32, granularity="block",
                     graph_form="transpose" if platform == "webnn" else "")
        # one scale per row instead of K / 32 of them, and no zero points to speak of
        assert r.weight_bytes < block.weight_bytes


def test_weight_only_per_channel_default_is_gemm_scale_with_the_dequantized_forms_numbers(matmul_rows) -> None:  # noqa: ANN001
    scaled = _one(matmul_rows, platform="webnn", bits_requested=8, act_bits=32, granularity="per-channel",
                  graph_form="gemm_scale")
    dequantized = _one(matmul_rows, platform="webnn", bits_requested=8, act_bits=32, granularity="per-channel",
                       graph_form="gemm")
    # the same product (W = scale * q, zero point 0), the scales applied after gemm: float32 rounding apart
    assert scaled.rel_error_vs_dequantized < 1e-5 and dequantized.rel_error_vs_dequantized < 1e-5
    assert abs(scaled.rel_error_vs_float - dequantized.rel_error_vs_float) < 1e-5
    assert scaled.weight_bytes == dequantized.weight_bytes


def test_fused_form_is_the_default_for_w8a8_per_channel_and_its_control_differs_only_by_the_output(
        matmul_rows) -> None:  # noqa: ANN001
    fused = _one(matmul_rows, platform="webnn", bits_requested=8, act_bits=8, granularity="per-channel",
                 graph_form="gemm_qdq")
    control = _one(matmul_rows, platform="webnn", bits_requested=8, act_bits=8, granularity="per-channel",
                   graph_form="gemm")
    # the control has no int8 output: it matches its reference to float32 rounding
    assert control.rel_error_vs_dequantized < 1e-5
    # the fused row's reference has the int8 output; measured against it, the error is at most the
    # requantization's rounding, far under one output step on every element
    assert fused.rel_error_vs_dequantized < fused.kernel_tolerance / 4
    assert fused.rel_error_vs_float > control.rel_error_vs_float


@pytest.fixture(scope="module")
def model_rows(tmp_path_factory):  # noqa: ANN001, ANN201
    return _rows(tmp_path_factory.mktemp("int8-path-model"), [Platform.WEBNN], minilm(),
                 act_bits=[32, 8], granularity=["per-channel"])


def test_fused_minilm_runs_with_outlier_channels_apart_and_keeps_its_accuracy(model_rows) -> None:  # noqa: ANN001
    f32 = _one(model_rows, bits_requested=32)
    fused = _one(model_rows, bits_requested=8, act_bits=8)
    weight_only = _one(model_rows, bits_requested=8, act_bits=32)
    for r in (f32, fused, weight_only):
        assert r.outcome == Outcome.OK, r.reason
        assert r.rel_error_vs_dequantized <= r.kernel_tolerance
    assert (fused.graph_form, weight_only.graph_form, f32.graph_form) == ("gemm_qdq", "gemm_scale", "pretransposed_gemm")
    assert "int8 outputs (the fused form) in 36 of 36 linear layers" in fused.reason, fused.reason
    assert "outlier output channels computed in float apart" in fused.reason
    assert fused["cosine_mean"] > 0.98, fused["cosine_mean"]
    assert weight_only["cosine_mean"] > 0.999


@pytest.fixture(scope="module")
def ort_qdq_rows(tmp_path_factory):  # noqa: ANN001, ANN201
    """ONNX Runtime Web's int8 QDQ model beside the harness's fused form, the same numbers."""
    return _rows(tmp_path_factory.mktemp("int8-path-ort"), [Platform.WEBNN, Platform.WASM], SHAPE, bits=[8],
                 engines=[EngineName.HARNESS, EngineName.ORT], act_bits=[8], granularity=["per-channel"])


def test_ort_int8_qdq_models_run_the_fused_forms_numbers_on_webnn_and_wasm(ort_qdq_rows) -> None:  # noqa: ANN001
    harness = _one(ort_qdq_rows, engine="harness", platform="webnn", act_bits=8)
    assert harness.outcome == Outcome.OK and harness.graph_form == "gemm_qdq", harness.reason
    for platform in ("webnn", "wasm"):
        r = _one(ort_qdq_rows, engine="ort", platform=platform, act_bits=8)
        assert r.outcome == Outcome.OK, (platform, r.reason)
        assert (r.graph_form, r.executed_on, r.weight_format) == ("gemm_qdq", platform, harness.weight_format)
        assert r.rel_error_vs_dequantized <= r.kernel_tolerance, (platform, r.rel_error_vs_dequantized)
        # the same quantized model: the cost of quantization matches the harness's to the output step
        assert abs(r.rel_error_vs_float - harness.rel_error_vs_float) < r.kernel_tolerance
    assert "graph optimizations disabled" in _one(ort_qdq_rows, engine="ort", platform="webnn").reason
    # blockwise weights have no int8 QDQ model here: refused before any page, with the reason
    blockwise = build_plan([BrowserName.CHROME], [Platform.WASM], [SHAPE], [8], engines=[EngineName.ORT],
                           act_bits=[8])
    assert "int8 QDQ models, built with 8-bit per-channel" in [r.refused for r in blockwise if r.act_bits == 8][0]


def test_ort_int8_qdq_encoder_runs_on_webnn_with_the_harness_reference(tmp_path) -> None:  # noqa: ANN001
    (r,) = _rows(tmp_path, [Platform.WEBNN], minilm(), bits=[8], engines=[EngineName.ORT], act_bits=[8],
                 granularity=["per-channel"])
    assert r.outcome == Outcome.OK, r.reason
    assert (r.graph_form, r.weight_format) == ("gemm_qdq", "QDQ8")
    assert r.rel_error_vs_dequantized <= r.kernel_tolerance
    assert r["cosine_mean"] > 0.98, r["cosine_mean"]

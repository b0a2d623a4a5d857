"""Whole models with int8 activations, without a browser: calibration by PyTorch hooks (real tokens
only, 8-/4-bit layers only), the float64 reference's quantize -> dequantize, the flip-aware kernel
tolerance (a correct engine passes it, planted faults do not), WebNN's activation types, the
engines that refuse, and the CLI's words."""

from __future__ import annotations

import asyncio
import functools
import struct

import numpy as np
import pytest

from fixed_web_platform.architectures import int8
from fixed_web_platform.cli import main as cli
from fixed_web_platform.engines.registry import build_job
from fixed_web_platform.models import calibration, rules
from fixed_web_platform.models.inputs import builtin_texts
from fixed_web_platform.models.source import load, resolve
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.precision.quant import error_metrics
from fixed_web_platform.precision.webnn_precision import choose_activation_plan
from fixed_web_platform.vocabulary import (
    BrowserName,
    EngineName,
    Outcome,
    Platform,
    PrecisionMode,
)
from fixed_web_platform.workloads import EncoderWorkload
from fixed_web_platform.workloads.encoder.prepared import (
    KERNEL_TOLERANCE_F32,
    embed,
    prepare_model,
)

MINILM = "all-MiniLM-L6-v2"
SHORT = tuple(t for t in builtin_texts() if len(t.split()) <= 8)[:6]


@functools.cache
def small() -> EncoderWorkload:
    """MiniLM at 3 x 16 tokens (made when first asked for, not at collection)."""
    return EncoderWorkload.create(MINILM, batch_size=3, seq_len=16, texts=SHORT)


@pytest.fixture(scope="module")
def minilm():  # noqa: ANN201
    return load(resolve(MINILM))


def _names(workload: EncoderWorkload) -> tuple[str, ...]:
    return tuple(layer.name for layer in workload.config().linear_layers())


def test_calibration_sees_real_tokens_only(minilm) -> None:  # noqa: ANN001
    """Padding and the last batch's filler are never observed: MinMax ranges do not move when the
    sequences get longer (more padding) or the batch leaves filler rows."""
    names = _names(small())
    base = calibration.calibrate(minilm, calibration.EncoderBatches(SHORT, 2, 16), "minmax", names)

    def same(params: dict) -> bool:
        # PyTorch's float32 GEMMs round differently at other shapes on some CPUs (AVX-512: a scale
        # one float32 step apart): "the same range" is to a millionth, far below what a padded
        # token or another text moves it
        return params.keys() == base.keys() and all(
            p.zero_point == base[n].zero_point and p.scale == pytest.approx(base[n].scale, rel=1e-6)
            for n, p in params.items())

    assert same(calibration.calibrate(minilm, calibration.EncoderBatches(SHORT, 2, 32), "minmax", names))
    # 6 texts: 2 filler rows
    assert same(calibration.calibrate(minilm, calibration.EncoderBatches(SHORT, 4, 16), "minmax", names))
    # ...while another observer or other texts do move them
    assert not same(calibration.calibrate(minilm, calibration.EncoderBatches(SHORT, 2, 16), "percentile", names))
    assert not same(calibration.calibrate(minilm, calibration.EncoderBatches(SHORT[:3], 2, 16), "minmax", names))


def test_qparams_are_int8_with_float32_scales(minilm) -> None:  # noqa: ANN001
    params = calibration.calibrate(minilm, calibration.EncoderBatches(SHORT, 3, 16), "mse", _names(small()))
    assert len(params) == 36
    for p in params.values():
        assert -128 <= p.zero_point <= 127 and p.scale > 0
        assert float(np.float32(p.scale)) == p.scale
    # Q, K and V see one input: one set of parameters
    q, k = (params[f"encoder.layer.2.attention.self.{n}"] for n in ("query", "key"))
    assert q == k


def test_only_8_and_4_bit_layers_get_int8_inputs() -> None:
    ffn16 = (rules.PrecisionRule(match="*.intermediate.dense", bits=16),)
    workload = EncoderWorkload.create(MINILM, batch_size=3, seq_len=16, texts=SHORT, rules=ffn16, rules_name="ffn16")
    p = prepare_model(workload, 8, 32, 0, act_bits=8, observer="minmax")
    for layer, act in zip(p.plan, p.act_quant):
        assert (act is None) == (layer.bits == 16), layer.layer.name
    linears = p.options()["linears"]
    assert sum(1 for linear in linears if linear["act"]) == 30


def test_reference_rounds_half_to_even_and_clamps() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 1000.0, -1000.0, 0.26])
    got = int8.fake_quantize_int8(x, 1.0, 0)
    assert got.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 127.0, -128.0, 0.0]
    assert int8.fake_quantize_int8(np.array([0.0]), 0.5, -10).tolist() == [0.0]


def test_tolerance_passes_float32_rounding_and_fails_planted_faults() -> None:
    """The kernel check can fail: an engine that quantizes with the zero point off by one or
    clamps at -127 lands beyond the tolerance, one that skips activation quantization is nearer
    the float-activation reference; float32-sized noise passes both."""
    p = prepare_model(small(), 8, 32, 0, act_bits=8, observer="minmax")
    w_only = prepare_model(small(), 8, 32, 0)
    tol = p.tolerance("i8dot")
    assert KERNEL_TOLERANCE_F32 < tol < 0.1 and "noise" in p.tolerance_basis
    assert w_only.tolerance("f32") == KERNEL_TOLERANCE_F32 and w_only.kernel_problem(w_only.ref_dequantized) == ""
    ref = p.ref_dequantized
    ids, mask, tt = p.batches.flat()
    acts = {lp.layer.name: (a.scale, a.zero_point) for lp, a in zip(p.plan, p.act_quant) if a}
    weights = p.held.exec_weights()

    def engine(acts_used, noise=0.0, seed=0):  # noqa: ANN001, ANN202
        rng = np.random.default_rng(seed)
        w = {k: np.asarray(v, np.float64) * (1 + noise * rng.standard_normal(v.shape)) for k, v in weights.items()}
        return embed(p.held.model, w, ids, mask, tt, acts_used)

    def judged_bad(out) -> bool:  # noqa: ANN001
        return error_metrics(out, ref)["rel_error"] > tol or p.kernel_problem(out) != ""

    for seed in range(4):  # float32-sized noise: flips happen (one moves this run by 0.03), all pass
        assert not judged_bad(engine(acts, 1e-7, seed))
    assert "did not run" in p.kernel_problem(engine(None))  # int8 activations skipped
    assert judged_bad(engine({k: (s, z + 1) for k, (s, z) in acts.items()}))  # zero point off by one
    assert judged_bad(engine({k: (s * 1.01, z) for k, (s, z) in acts.items()}))  # scale 1% off
    # what int8 activations cost, against PyTorch fp32: more than weight-only 8-bit
    cos = lambda r: float(np.mean(np.sum(r * p.ref_float, axis=1)))  # noqa: E731
    assert cos(ref) < cos(w_only.ref_dequantized)


LISTS_INT8 = {op: {operand: {"dataTypes": ["int32", "int8", "uint8"]} for operand in operands}
              for op, operands in (("quantizeLinear", ("output", "zeroPoint")),
                                   ("dequantizeLinear", ("input", "zeroPoint")))}


def test_webnn_activation_types_follow_the_context() -> None:
    assert choose_activation_plan(PrecisionMode.STANDARD, LISTS_INT8).dtype == "int8"
    only_u8 = {op: {k: {"dataTypes": ["uint8"]} for k in v} for op, v in LISTS_INT8.items()}
    plan = choose_activation_plan(PrecisionMode.STANDARD, only_u8)
    assert (plan.dtype, plan.zero_point_offset, plan.unsupported) == ("uint8", 128, "")
    no_int8_q = {**LISTS_INT8, "quantizeLinear": {"output": {"dataTypes": ["int32"]}}}
    refused = choose_activation_plan(PrecisionMode.STANDARD, no_int8_q)
    assert "quantizeLinear" in refused.unsupported
    tried = choose_activation_plan(PrecisionMode.EXPERIMENTAL, no_int8_q)
    assert tried.dtype == "int8" and tried.asks_unlisted and not tried.unsupported


def test_ort_refuses_blockwise_int8_activations_for_models_before_any_page() -> None:
    (run,) = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [small()], [8], engines=[EngineName.ORT],
                        act_bits=[8])
    refusal = asyncio.run(build_job(run, TimingConfig(), None))
    assert refusal.outcome == Outcome.UNSUPPORTED and "int8 activations" in refusal.reason
    assert "--granularity per-channel" in refusal.reason


def test_rows_name_the_calibration_set() -> None:
    runs = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [small()], [8], act_bits=[32, 8])
    assert [r.workload.calibration_label for r in runs] == ["builtin-calibration"] * 2
    calib = set(calibration.builtin_calibration_texts())
    assert len(calib) >= 32 and not calib & set(builtin_texts())  # never evaluated


@pytest.mark.parametrize("argv, needle", [
    (["--calibration", "/nonexistent/texts.txt"], "goes with --model"),
    (["--model", MINILM, "--act-bits", "8", "--bits", "8", "--calibration", "/nonexistent/texts.txt"],
     "calibration file /nonexistent/texts.txt: cannot read"),
    (["--model", MINILM, "--act-bits", "8", "--bits", "16"], "8- or 4-bit weights"),
])
def test_bad_calibration_input_is_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*argv, "--browser", "chrome"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


@pytest.mark.parametrize(("batch", "dequantized"), [(3, True), (1, False)])
def test_wgsl_model_steps_dequantize_once_when_rows_span_several_tiles(batch: int, dequantized: bool) -> None:
    """48 rows (3 x 16) span three row tiles: every 4-bit linear step carries the dequantize step,
    which binds the layer's packed tensors and the shared float32 scratch buffer (sized for the
    largest layer) that the kernel then binds in their place. 16 rows: one tile, no step."""
    from fixed_web_platform.engines.base import EngineJob
    from fixed_web_platform.engines.wgsl import kernels as wgsl

    workload = EncoderWorkload.create(MINILM, batch_size=batch, seq_len=16, texts=SHORT)
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [workload], [4], engines=[EngineName.HARNESS])[0]
    job = asyncio.run(build_job(run, TimingConfig(), None))
    assert isinstance(job, EngineJob)
    options = job.spec.options
    linears = [s for s in options["steps"] if s["op"] == "linear"]
    assert len(linears) == 36 and all(s["weights"] == f"{s['name']}.w" for s in linears)
    if not dequantized:
        assert not any("prologue" in s for s in linears) and wgsl.DEQUANTIZED not in options["activations"]
        assert all(s["bindings"][2] == s["weights"] for s in linears)
        return
    largest = max(job.prepared.plan, key=lambda p: p.layer.n * p.layer.k).layer
    assert options["activations"][wgsl.DEQUANTIZED] == largest.n * largest.k * 4
    assert "dequantize_w4" in options["programs"]
    for s in linears:
        name = s["name"]
        assert s["prologue"]["program"] == "dequantize_w4"
        assert s["prologue"]["bindings"] == [f"{name}.w", f"{name}.scales", f"{name}.zero_points", wgsl.DEQUANTIZED]
        assert s["bindings"][2] == wgsl.DEQUANTIZED and "BITS" not in s["constants"]
    (variant,) = options["linear_variants"]["4"]
    assert variant["shader"] == "dequantize.wgsl>matmul_f32.wgsl"


def test_wgsl_int8_steps_bind_the_scale_and_zero_point_so_layers_of_a_shape_share_a_pipeline() -> None:
    """Each quantize_act and DP4A step binds an 8-byte tensor (float32 scale, int32 zero point:
    the very values the float64 reference quantizes with) instead of override constants, so
    the page compiles one pipeline per shape, not one per layer."""
    from fixed_web_platform.engines.base import EngineJob
    from fixed_web_platform.engines.wgsl import kernels as wgsl
    from fixed_web_platform.engines.wgsl.encoder import ACT_QUANT_SUFFIX, INT8_INPUT

    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [small()], [4], act_bits=[8],
                     engines=[EngineName.HARNESS])[0]
    job = asyncio.run(build_job(run, TimingConfig(), None))
    assert isinstance(job, EngineJob)
    p, steps = job.prepared, job.spec.options["steps"]
    acts = dict(zip((lp.layer.name for lp in p.plan), p.act_quant))
    quantize = [s for s in steps if s["op"] == "quantize_act"]
    linears = [s for s in steps if s["op"] == "linear"]
    assert len(quantize) == 4 * 6  # one per distinct input a layer: Q, K and V share theirs
    for s in linears:
        name = s["bindings"][wgsl.ACT_QUANT_BINDING]
        assert len(s["bindings"]) == wgsl.ACT_QUANT_BINDING + 1 and name.endswith(ACT_QUANT_SUFFIX)
        assert s["bindings"][0] == INT8_INPUT and s["bindings"][5] == f"{s['name']}.bias"
        scale, zero_point = struct.unpack("<fi", job.tensors[name])
        act = acts[s["name"]]
        assert (scale, zero_point) == (np.float32(act.scale), act.zero_point) and scale == act.scale
        assert not {"X_SCALE", "X_ZERO"} & set(s["constants"])
    for s, after in zip(steps, steps[1:]):
        if s["op"] == "quantize_act":  # the layer after it reads the same scale and zero point
            assert after["op"] == "linear" and len(s["bindings"]) == 3
            assert s["bindings"][2] == after["bindings"][wgsl.ACT_QUANT_BINDING]
            assert set(s["constants"]) == {"WORDS"}
    # one tensor per distinct (scale, zero point); every one is bound
    named = [t for t in job.tensors if t.endswith(ACT_QUANT_SUFFIX)]
    assert len(named) == len({(a.scale, a.zero_point) for a in p.act_quant if a})
    assert set(named) == {s["bindings"][wgsl.ACT_QUANT_BINDING] for s in linears}
    assert set(job.spec.bindings) == set(job.tensors)
    # what the page compiles: one pipeline per (kernel, constants): three linear shapes, two quantize sizes
    pipelines = {(s.get("kernel") or s["program"], repr(sorted(s["constants"].items())))
                 for s in linears + quantize}
    assert len(pipelines) == 3 + 2

"""int8 activations (W8A8, W4A8): the plan, the calibration of the matmul sweep, and the integer
algebra the DP4A kernel (shaders/matmul_dp4a.wgsl) relies on. The kernel itself runs in
tests/test_e2e_webgpu.py."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from fixed_web_platform.cli import main as cli
from fixed_web_platform.engines.wgsl.kernels import (
    DP4A,
    shader_source,
    tiling_for,
    variants_for,
)
from fixed_web_platform.plan import build_plan
from fixed_web_platform.precision import quant
from fixed_web_platform.vocabulary import BrowserName, Platform
from fixed_web_platform.workloads.matmul import MatmulWorkload, prepare

SMALL = MatmulWorkload("small", 4, 64, 32)


def test_int8_activations_go_with_8_and_4_bit_weights_only() -> None:
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [32, 8, 4, 2], act_bits=[32, 8],
                      observer="percentile")
    got = [(r.bits, r.act_bits, r.observer) for r in plan]
    assert got == [(32, 32, ""), (8, 32, ""), (8, 8, "percentile"), (4, 32, ""), (4, 8, "percentile"),
                   (2, 32, "")]
    with pytest.raises(ValueError, match="--bits 8 or 4"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [32, 2], act_bits=[8])
    with pytest.raises(ValueError, match="observer"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [8], act_bits=[8], observer="kl")
    # several observers: one int8 run each, beside the float one
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [8], act_bits=[32, 8],
                      observer=["minmax", "mse"])
    assert [(r.act_bits, r.observer) for r in plan] == [(32, ""), (8, "minmax"), (8, "mse")]


@pytest.mark.parametrize("argv", [["--act-bits", "4"], ["--act-bits", "8", "--bits", "2"],
                                  ["--act-bits", "8", "--observer", "kl"]])
def test_bad_activation_input_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*argv, "--browser", "chrome"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")


def test_calibrated_activations_are_held_as_int8_words() -> None:
    p = prepare(SMALL, 8, 32, 0, act_bits=8, observer="minmax")
    assert p.act_bits == 8 and p.observer == "minmax" and p.act_scale > 0
    assert len(p.tensors["x"]) == SMALL.m * SMALL.k  # one byte per activation
    qx = np.frombuffer(p.tensors["x"], dtype=np.int8).astype(np.int64).reshape(SMALL.m, SMALL.k)
    x_exec = (qx - p.act_zero_point) * np.float32(p.act_scale)
    w_only = prepare(SMALL, 8, 32, 0)
    # the reference uses the activations the kernel holds; the float reference is unchanged
    w_exec = np.linalg.lstsq(x_exec.astype(np.float64), p.ref_dequantized, rcond=None)[0]
    assert np.allclose(p.ref_float, w_only.ref_float)
    assert np.abs(x_exec.astype(np.float64) @ w_exec - p.ref_dequantized).max() < 1e-9
    err_w = quant.rel_rms_error(w_only.ref_dequantized, p.ref_float)
    err_wa = quant.rel_rms_error(p.ref_dequantized, p.ref_float)
    assert err_wa > err_w  # int8 activations cost accuracy on top of the weights'


def test_the_kernels_integer_decomposition_is_exact() -> None:
    """sum (qx - zx)(qw - zw) = sum qx qw - zw sum qx - zx sum qw + BLOCK * zx zw, in integers."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        qx = rng.integers(-128, 128, 32)
        qw = rng.integers(-8, 8, 32)
        zx, zw = int(rng.integers(-128, 128)), int(rng.integers(-8, 8))
        direct = int(((qx - zx) * (qw - zw)).sum())
        kernel = int((qx * qw).sum()) - zw * int(qx.sum()) - zx * int(qw.sum()) + 32 * zx * zw
        assert kernel == direct
        assert abs(int((qx * qw).sum())) < 2**24  # exact in i32 and when converted to f32


def test_the_dp4a_variant_needs_the_wgsl_language_feature() -> None:
    (variant,) = variants_for(4, act_bits=8)
    assert variant.requires == (DP4A,) and variant.compute_dtype == "i8dot"
    source = shader_source(variant.shader, tiling_for(37, 65), 4, variant.x_element)
    assert source.startswith("requires packed_4x8_integer_dot_product;")
    assert "var<storage, read> x: array<u32>;" in source and "dot4I8Packed" in source
    assert not any(line.lstrip().startswith("//@") for line in source.splitlines())  # all unrolled


def test_the_dp4a_matmul_binds_the_scale_and_zero_point_after_the_weights() -> None:
    """The lone matmul's DP4A kernel reads x's scale and zero point from an 8-byte tensor (float32,
    then int32) at the binding the model kernels use too, not from override constants."""
    from fixed_web_platform.engines.wgsl.kernels import ACT_QUANT_BINDING
    from fixed_web_platform.engines.wgsl.matmul import ACT_QUANT, constants_for, tensors_and_layout

    p = prepare(SMALL, 4, 32, 0, act_bits=8, observer="minmax")
    tensors, layout = tensors_and_layout(p)
    assert layout == ["x", "out", "w", "scales", "zero_points", None, ACT_QUANT]
    assert layout.index(ACT_QUANT) == ACT_QUANT_BINDING
    assert struct.unpack("<fi", tensors[ACT_QUANT]) == (np.float32(p.act_scale), p.act_zero_point)
    assert list(tensors)[:-1] == list(p.tensors) and ACT_QUANT not in p.tensors  # other engines' bytes untouched
    assert not {"X_SCALE", "X_ZERO"} & set(constants_for(p))
    source = shader_source("matmul_dp4a.wgsl", tiling_for(4, 32), 4, "u32")
    assert f"@binding({ACT_QUANT_BINDING}) var<storage, read> x_quant" in source and "override X_" not in source
    float_tensors, float_layout = tensors_and_layout(prepare(SMALL, 4, 32, 0))
    assert None not in float_layout and ACT_QUANT not in float_tensors

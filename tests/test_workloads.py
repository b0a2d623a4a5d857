"""Unit tests for fixed_web_platform.workloads: the bytes sent to the page and the references."""

from __future__ import annotations

import numpy as np
import pytest

from fixed_web_platform.engines.wgsl.kernels import variants_for
from fixed_web_platform.engines.wgsl.matmul import constants_for
from fixed_web_platform.precision import quant
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload
from fixed_web_platform.workloads.matmul import _float_tensors, prepare

WL = Workload("tiny", 4, 64, 32)  # M, K, N
M, K, N = WL.m, WL.k, WL.n
BLOCK = 32
PACKED = (8, 4, 2)


def _floats(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x [M, K] and the original float32 weights W [N, K], read back from the 32-bit bytes."""
    p = prepare(WL, 32, BLOCK, seed)
    x = np.frombuffer(p.tensors["x"], dtype="<f4").reshape(M, K)
    w = np.frombuffer(p.tensors["w"], dtype="<f4").reshape(N, K)
    return x, w


def _unpack_words(data: bytes, bits: int, count: int) -> np.ndarray:
    """Signed fields from little-endian u32 words, first element in the lowest bits."""
    return quant.unpack_bits(np.frombuffer(data, dtype=np.uint8), bits, count, signed=True)


@pytest.mark.parametrize("bits", [32, 16, 8, 4, 2])
def test_tensor_byte_sizes(bits: int) -> None:
    p = prepare(WL, bits, BLOCK, seed=0)
    assert len(p.tensors["x"]) == 4 * M * K
    expected_w = {32: 4 * N * K, 16: 2 * N * K}.get(bits, N * K * bits // 8)
    assert len(p.tensors["w"]) == expected_w
    if bits in PACKED:
        assert list(p.tensors) == ["x", "w", "scales", "zero_points"]  # shader binding order
        blocks = N * (K // BLOCK)
        assert len(p.tensors["scales"]) == blocks * 4
        assert len(p.tensors["zero_points"]) == -(-blocks * bits // 32) * 4  # whole u32 words
    else:
        assert list(p.tensors) == ["x", "w"]


@pytest.mark.parametrize("bits", [32, 16, 8, 4, 2])
def test_weight_bytes_is_sum_of_weight_tensors(bits: int) -> None:
    p = prepare(WL, bits, BLOCK, seed=0)
    assert p.weight_bytes == sum(len(v) for k, v in p.tensors.items() if k != "x")


@pytest.mark.parametrize("bits", [32, 16, 8, 4, 2])
def test_labels_and_constants(bits: int) -> None:
    p = prepare(WL, bits, BLOCK, seed=0)
    base = {"M": M, "K": K, "N": N}
    if bits in PACKED:
        assert constants_for(p) == base | {"BITS": bits, "BLOCK_SIZE": BLOCK}
        assert p.block_size == BLOCK
        assert p.weight_format == f"int{bits}-block{BLOCK}-asymmetric"
        assert [v.shader for v in variants_for(bits)] == ["matmul_quant.wgsl"]
    else:
        assert constants_for(p) == base
        assert p.block_size == 0
        assert p.weight_format == {32: "float32", 16: "float16"}[bits]


def test_ref_float_is_x_times_w_transposed() -> None:
    x, w = _floats()
    expected = x.astype(np.float64) @ w.astype(np.float64).T
    for bits in (32, 16, 8, 4, 2):
        p = prepare(WL, bits, BLOCK, seed=0)
        assert p.ref_float.shape == (M, N)
        np.testing.assert_allclose(p.ref_float, expected, rtol=1e-12, atol=1e-12)


def test_ref_dequantized_float32_equals_ref_float() -> None:
    p = prepare(WL, 32, BLOCK, seed=0)
    np.testing.assert_array_equal(p.ref_dequantized, p.ref_float)


def test_ref_dequantized_float16() -> None:
    x, w = _floats()
    p = prepare(WL, 16, BLOCK, seed=0)
    w16 = np.frombuffer(p.tensors["w"], dtype="<f2").reshape(N, K)  # pairs, element 0 low half
    np.testing.assert_array_equal(w16, quant.to_float16(w))
    expected = x.astype(np.float64) @ w16.astype(np.float64).T
    np.testing.assert_allclose(p.ref_dequantized, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bits", PACKED)
def test_ref_dequantized_matches_quant_reference(bits: int) -> None:
    x, w = _floats()
    q, params = quant.quantize_weights(w, bits, granularity="blockwise", block_size=BLOCK)
    deq = quant.dequantize_weights(q, params)
    expected = x.astype(np.float64) @ deq.astype(np.float64).T
    p = prepare(WL, bits, BLOCK, seed=0)
    np.testing.assert_allclose(p.ref_dequantized, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bits", PACKED)
def test_packed_bytes_decode_to_the_dequantized_reference(bits: int) -> None:
    """Read the tensors the way matmul_quant.wgsl does: (q - zero_point) * scale per block."""
    x, w = _floats()
    p = prepare(WL, bits, BLOCK, seed=0)
    blocks = K // BLOCK
    q = _unpack_words(p.tensors["w"], bits, N * K).reshape(N, K)
    zp = _unpack_words(p.tensors["zero_points"], bits, N * blocks).reshape(N, blocks)
    scale = np.frombuffer(p.tensors["scales"], dtype="<f4").reshape(N, blocks)
    zp_full = np.repeat(zp, BLOCK, axis=1)
    scale_full = np.repeat(scale.astype(np.float64), BLOCK, axis=1)
    w_kernel = ((q - zp_full) * scale_full).astype(np.float32)

    # Round-to-nearest quantization: each weight is within half a step of the original.
    assert np.all(np.abs(w_kernel - w) <= scale_full / 2 + 1e-6)
    expected = x.astype(np.float64) @ w_kernel.astype(np.float64).T
    np.testing.assert_allclose(p.ref_dequantized, expected, rtol=1e-12, atol=1e-12)


def test_error_vs_float_grows_as_bits_shrink() -> None:
    errors = {}
    for bits in (32, 16, 8, 4, 2):
        p = prepare(WL, bits, BLOCK, seed=0)
        errors[bits] = quant.rel_rms_error(p.ref_dequantized, p.ref_float)
    assert errors[32] == pytest.approx(0.0, abs=1e-12)
    assert errors[2] > errors[4] > errors[8] > errors[16] > errors[32]
    assert errors[16] > 0  # float16 really rounds


def test_same_seed_same_bytes_other_seed_different() -> None:
    for bits in (32, 16, 4):
        a = prepare(WL, bits, BLOCK, seed=1)
        prepare.cache_clear()  # the second preparation must really be computed again
        _float_tensors.cache_clear()
        b = prepare(WL, bits, BLOCK, seed=1)
        assert a is not b and a.tensors == b.tensors
        np.testing.assert_array_equal(a.ref_float, b.ref_float)
        c = prepare(WL, bits, BLOCK, seed=2)
        assert c.tensors["x"] != a.tensors["x"]
        assert c.tensors["w"] != a.tensors["w"]
        assert not np.array_equal(c.ref_float, a.ref_float)


def test_invalid_shape_rejected_by_prepare() -> None:
    with pytest.raises(ValueError, match="K=48"):
        prepare(Workload("bad", 1, 48, 8), 4, BLOCK, seed=0)
    for bits in (32, 16):
        with pytest.raises(ValueError, match="K=6 must be a multiple of 4"):
            prepare(Workload("odd", 1, 6, 8), bits, BLOCK, seed=0)


def test_packed_kernel_follows_the_tile() -> None:
    """GEMV tiles (fewer rows than columns) mask fields in place and scale x; a single GEMM tile
    shifts the weights every row shares; several row tiles dequantize once; float kernels are the
    same for all."""
    from fixed_web_platform.engines.wgsl.kernels import tiling_for

    gemv, gemm, one_column = tiling_for(1, 3072), tiling_for(128, 768), tiling_for(1, 1)
    assert [v.shader for v in variants_for(4, tiling=gemv)] == ["matmul_quant_gemv.wgsl"]
    assert variants_for(4, tiling=gemv)[0].kernel_variant(gemv) == "quant-w4-gemv tile 1x4"
    assert [v.shader for v in variants_for(2, tiling=gemm)] == ["matmul_quant.wgsl"]
    assert [v.shader for v in variants_for(8, tiling=one_column)] == ["matmul_quant.wgsl"]  # 1 row, 1 column
    assert variants_for(32, tiling=gemv) == variants_for(32, tiling=gemm)
    # M spanning several row tiles: decoded once into float32, then the float32 kernel
    assert [v.id for v in variants_for(4, tiling=gemm, m=128)] == ["dequantize.wgsl>matmul_f32.wgsl"]
    assert variants_for(2, tiling=gemm, m=128)[0].kernel_variant(gemm) == "dequant-w2-f32 tile 16x4"
    assert [v.id for v in variants_for(8, tiling=tiling_for(16, 768), m=16)] == ["matmul_quant.wgsl"]  # one tile
    assert variants_for(32, tiling=gemm, m=128) == variants_for(32, tiling=gemm)
    assert variants_for(8, 8, tiling=gemm, m=128)[0].shader == "matmul_dp4a.wgsl"  # int8 inputs: DP4A

"""The weight quantizers (precision/quantizers.py), each against the implementation it follows, on
the same tensors: ONNX Runtime's default MatMulNBits quantizer (minmax), gguf's Q4_1 (offset),
ONNX Runtime's HQQ (hqq)."""

from __future__ import annotations

import numpy as np
import pytest

from fixed_web_platform.precision import quant, quantizers
from fixed_web_platform.precision.quantizers import QUANTIZERS, quantize


def _weights(n: int = 16, k: int = 256, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
    w[0, :32] = np.abs(w[0, :32]) + 0.01  # an all-positive block: minmax widens it to 0, offset does not
    w[1, 32:64] = 0.25  # a block of equal values
    w[2, ::7] += 0.05  # outliers
    return w


def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """ORT's rows of packed unsigned fields (first value in the lowest bits, as the harness packs)."""
    return np.stack([quant.unpack_bits(row, bits, count, signed=False) for row in packed])


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_minmax_is_onnxruntimes_default_matmulnbits_quantizer(bits: int) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, DefaultWeightOnlyQuantizer

    w = _weights()
    ours = quantize(w, bits, 32, "minmax")
    packed, scales, zero_points = DefaultWeightOnlyQuantizer(
        DefaultWeightOnlyQuantConfig(block_size=32, bits=bits)).qbits_block_quant(np.ascontiguousarray(w.T))
    assert np.array_equal(_unpack(packed.reshape(w.shape[0], -1), bits, w.shape[1]), ours.codes)
    assert np.array_equal(_unpack(zero_points, bits, w.shape[1] // 32), ours.zero)
    np.testing.assert_allclose(ours.scale, scales, rtol=2.4e-7)  # one float32 ulp: MLAS divides in float32
    # and it is the harness's held bytes (precision/quant.py), as unsigned codes
    q, params = quant.quantize_weights(w, bits, granularity="blockwise", block_size=32)
    np.testing.assert_allclose(ours.dequantize(), quant.dequantize_weights(q, params), rtol=1.2e-7)  # its float32


def test_offset_at_4_bits_is_ggufs_q4_1() -> None:
    import gguf

    w = _weights()
    # a block of exact halfway values (steps of 1/64): Q4_1 rounds them up, round-half-even would not
    w[3, :32] = np.concatenate([[0, 15], np.arange(15) + 0.5, np.arange(15)]) / 64
    ours = quantize(w, 4, 32, "offset")
    blocks = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_1).reshape(-1, 20)
    d = blocks[:, 0:2].copy().view(np.float16).reshape(w.shape[0], -1)
    m = blocks[:, 2:4].copy().view(np.float16).reshape(w.shape[0], -1)
    nibbles = blocks[:, 4:]
    codes = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).reshape(w.shape).astype(np.int64)  # j, j + 16
    assert np.array_equal(codes, ours.codes)
    varied = ours.scale != 1  # gguf keeps d = 0 for a block of equal values; here its scale is 1
    assert np.array_equal(d[varied], ours.scale[varied].astype(np.float16))
    assert np.array_equal(m, w.reshape(w.shape[0], -1, 32).min(axis=-1).astype(np.float16))
    # the float offset: code 0 stands for the block's own minimum, not widened to 0
    np.testing.assert_allclose(-ours.zero * ours.scale, w.reshape(w.shape[0], -1, 32).min(axis=-1), rtol=1e-6)
    assert ours.float_zero and not np.all(ours.zero == np.round(ours.zero))
    assert ours.dequantize()[1, 32:64] == pytest.approx(0.25)  # equal values held exactly


@pytest.mark.parametrize("bits", [2, 8])
def test_offset_at_other_bits_keeps_each_block_within_half_a_step(bits: int) -> None:
    w = _weights()
    ours = quantize(w, bits, 32, "offset")
    assert ours.codes.min() == 0 and ours.codes.max() == (1 << bits) - 1
    step = np.repeat(ours.scale, 32, axis=1)
    assert np.all(np.abs(ours.dequantize() - w) <= step * (0.5 + 1e-5))


def test_hqq_calls_onnxruntimes_quantizer_and_holds_a_float_zero() -> None:
    pytest.importorskip("torch")
    w = _weights(n=64, k=512, seed=3)
    hqq, minmax = quantize(w, 4, 32, "hqq"), quantize(w, 4, 32, "minmax")
    assert hqq.codes.shape == w.shape and hqq.scale.shape == hqq.zero.shape == (64, 16)
    assert hqq.codes.min() >= 0 and hqq.codes.max() <= 15
    assert hqq.float_zero and not np.all(hqq.zero == np.round(hqq.zero))  # optimised, not rounded
    # HQQ optimises the zero for an l0.7 weight error; on these weights it beats min/max's RMS too
    assert hqq.weight_error(w) < minmax.weight_error(w) < 0.2


@pytest.mark.parametrize("name", list(QUANTIZERS))
def test_every_quantizer_loses_more_at_fewer_bits(name: str) -> None:
    if name == "hqq":
        pytest.importorskip("torch")
    w = _weights(n=8, k=128, seed=5)
    moment = np.eye(w.shape[1]) if QUANTIZERS[name].calibrated else None
    errors = [quantize(w, bits, 32, name, moment).weight_error(w) for bits in (8, 4, 2)]
    assert errors == sorted(errors) and errors[0] < 0.01 and errors[2] < 0.7, errors
    assert QUANTIZERS[name].float_zero == quantize(w, 4, 32, name, moment).float_zero


def test_bad_input_is_one_clear_error() -> None:
    w = _weights(n=4, k=64)
    with pytest.raises(ValueError, match="not one of minmax, offset, hqq, kquant, gptq, gptq-offset"):
        quantize(w, 4, 32, "awq")
    with pytest.raises(ValueError, match="8, 4 or 2 bits, not 3"):
        quantizers.offset(w, 3, 32)
    with pytest.raises(ValueError, match="K=64 is not a multiple of the block size 48"):
        quantize(w, 4, 48, "offset")
    w[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        quantize(w, 4, 32, "minmax")


def _plain_gptq(w: np.ndarray, bits: int, block: int, h: np.ndarray, grid_name: str = "minmax") -> np.ndarray:
    """The recursion GPTQ batches, written out: quantize one column (in act order) on the static
    grid of ``grid_name`` (minmax: round half to even, integer zero; offset: Q4_1's round half up
    with a float minimum), spread its error over the columns left through the inverse Hessian,
    then drop the column from the inverse (its Schur complement). No Cholesky, no lazy batches."""
    grid = quantize(w, bits, block, grid_name)
    w, h = w.astype(np.float64).copy(), h.copy()
    h[np.diag_indices_from(h)] += quantizers.GPTQ_DAMP * np.mean(np.diag(h))
    inverse = np.linalg.inv(h)
    codes = np.zeros(w.shape, dtype=np.int64)
    left = list(np.argsort(-np.diag(h), kind="stable"))  # act order (damping keeps it)
    while left:
        c, rest = left[0], left[1:]
        g = c // block
        scale, zero = grid.scale[:, g].astype(np.float64), grid.zero[:, g].astype(np.float64)
        nearest = np.floor(w[:, c] / scale + zero + 0.5) if grid.float_zero else np.rint(w[:, c] / scale) + zero
        q = np.clip(nearest, 0, (1 << bits) - 1)
        codes[:, c] = q
        err = (w[:, c] - (q - zero) * scale) / inverse[c, c]
        w[:, rest] -= np.outer(err, inverse[c, rest])
        inverse = inverse - np.outer(inverse[:, c], inverse[c, :]) / inverse[c, c]
        left = rest
    return codes


@pytest.mark.parametrize(("name", "grid_name"), [("gptq", "minmax"), ("gptq-offset", "offset")])
def test_gptq_is_the_column_recursion_it_batches_and_beats_rounding_on_correlated_inputs(name: str,
                                                                                           grid_name: str) -> None:
    rng = np.random.default_rng(11)
    k = 256  # two lazy batches of 128 columns
    mix = rng.standard_normal((k, k)) * 0.3 + np.eye(k)
    x = rng.standard_normal((512, k)) @ mix  # correlated inputs
    h = quantizers.input_moment(x)
    w = _weights(n=8, k=k, seed=4)
    ours = quantize(w, 4, 32, name, h)
    assert np.array_equal(ours.codes, _plain_gptq(w, 4, 32, h, grid_name))
    rounded = quantize(w, 4, 32, grid_name)
    assert np.array_equal(ours.scale, rounded.scale) and np.array_equal(ours.zero, rounded.zero)  # the grid's
    assert ours.float_zero == rounded.float_zero == QUANTIZERS[name].float_zero

    def output_error(codes) -> float:
        return float(np.linalg.norm(x @ (codes.dequantize() - w).T) / np.linalg.norm(x @ w.T))
    assert output_error(ours) < 0.8 * output_error(rounded)  # what it is for: the layer's output
    # uncorrelated inputs of equal power: no error to spread, it is the grid's own rounding
    # (offset's is in float32, this in float64: a value a hair from a half may round apart)
    plain = quantize(w, 4, 32, name, np.eye(k)).codes
    assert np.mean(plain == rounded.codes) > 0.999 and np.abs(plain - rounded.codes).max() <= 1
    if grid_name == "minmax":
        assert np.array_equal(plain, rounded.codes)
    with pytest.raises(ValueError, match="calibration data"):
        quantize(w, 4, 32, name)


@pytest.fixture(scope="module")
def ggml_make_qkx2(tmp_path_factory):  # noqa: ANN001, ANN201
    """ggml's make_qkx2_quants, compiled from tests/fixtures/ggml_make_qkx2.c with the system's cc."""
    import ctypes
    import shutil
    import subprocess
    from pathlib import Path

    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "a C compiler is needed to check kquant against ggml's C (setup installs build-essential)"
    library = tmp_path_factory.mktemp("ggml") / "libqkx2.so"
    source = Path(__file__).parent / "fixtures" / "ggml_make_qkx2.c"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(source), "-lm"], check=True)
    lib = ctypes.CDLL(str(library))
    lib.kquant_block.restype = ctypes.c_float
    lib.kquant_block.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_float),
                                 ctypes.POINTER(ctypes.c_uint8), ctypes.POINTER(ctypes.c_float)]

    def run(block: np.ndarray, nmax: int) -> tuple[np.ndarray, float, float]:
        x = np.ascontiguousarray(block, dtype=np.float32)
        codes, the_min = np.zeros(len(x), dtype=np.uint8), ctypes.c_float()
        scale = lib.kquant_block(len(x), nmax, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                 codes.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), ctypes.byref(the_min))
        return codes.astype(np.int64), scale, the_min.value
    return run


@pytest.mark.parametrize("bits", [4, 2, 8])
def test_kquant_is_ggmls_make_qkx2_quants(ggml_make_qkx2, bits: int) -> None:  # noqa: ANN001
    w = _weights(n=24, k=256, seed=9)
    w[5, :32] = -0.125  # a block of equal values (flat after the minimum is clamped to at most 0)
    ours = quantize(w, bits, 32, "kquant")
    for row in range(w.shape[0]):
        for b in range(w.shape[1] // 32):
            codes, scale, the_min = ggml_make_qkx2(w[row, 32 * b:32 * (b + 1)], (1 << bits) - 1)
            assert np.array_equal(ours.codes[row, 32 * b:32 * (b + 1)], codes), (row, b)
            if scale:  # ggml's value is scale * code - the_min; ours (code - zero) * scale
                assert ours.scale[row, b] == np.float32(scale), (row, b)
                assert ours.zero[row, b] * ours.scale[row, b] == pytest.approx(the_min, rel=1e-6, abs=1e-9)
            else:
                assert -ours.zero[row, b] * ours.scale[row, b] == pytest.approx(-the_min)
    assert ours.float_zero and ours.weight_error(w) < quantize(w, bits, 32, "offset").weight_error(w)

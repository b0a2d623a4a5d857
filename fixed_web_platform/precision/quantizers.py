"""Weight quantizers: the rules by which a float weight matrix W[N, K] becomes integer codes with a
scale and a zero per block of ``block_size`` values along K, at 8, 4 or 2 bits.

Every quantizer returns the same form, :class:`BlockCodes`: unsigned codes in [0, 2^bits - 1], a
float32 scale per block and a zero per block, standing for ``(code - zero) * scale``. The zero is
an integer (int64) for the quantizers whose bytes every engine takes (WebNN's ``dequantizeLinear``,
ORT's ``MatMulNBits`` with uint8 zero points, the WGSL kernels) and a float (float32) for the ones
that keep a float offset per block (llama.cpp's Q4_1, HQQ), which only some engines hold as such.

Each quantizer follows, or calls, the implementation users quantize with, and tests/test_quantizers.py
checks it against that implementation on the same tensors:

- ``minmax``: the harness's own min/max round-to-nearest (precision/quant.py, the range widened to
  hold 0, an integer zero point); the same codes, zero points and scales (to one float32 ulp) as
  ONNX Runtime's default ``MatMulNBits`` quantizer.
- ``offset``: a float minimum per block, llama.cpp's Q4_1 rule (``d = (max - min) / (2^bits - 1)``,
  ``code = trunc((x - min) / d + 0.5)``, ``x = code * d + min``) at any bits; at 4 bits and block
  32 the codes are gguf's Q4_1 codes and its d and m are this scale and minimum in float16.
- ``hqq``: Half-Quadratic Quantization, onnxruntime's ``HQQWeightOnlyQuantizer`` (its min/max scale,
  the zero optimised for an l0.7 weight error; a float zero). Needs PyTorch.
- ``kquant``: llama.cpp's k-quant search (ggml ``make_qkx2_quants`` as ``quantize_row_q4_K_ref`` calls
  it) at any bits: per block, 21 candidate scales around (max - min) / (2^bits - 1), each block's
  codes from it, then the scale and minimum that fit those codes best in a least-squares sense
  weighted by rms(block) + |x|; the best of them kept. A float minimum (zero). The scales and
  minimums stay float32 here: Q4_K's 6-bit quantization of them within a super-block of 256 is
  its file format's, not the search's.
- ``gptq``: GPTQ (Frantar et al., 2022) on ``minmax``'s grid, calibrated: each column's rounding
  error is spread over the columns not yet quantized through the inverse of the layer's input
  second moment E[x x^T] (``hessian``, from calibration data no figure is scored on). Static
  groups (each block's scale and integer zero from the float weights, as ``minmax``), columns in
  descending order of E[x_k^2] (act order), dampening ``GPTQ_DAMP`` of the mean diagonal. Integer
  zero points: every engine that holds ``minmax``'s bytes holds its bytes.
- ``gptq-offset``: the same GPTQ on ``offset``'s grid (each block's scale and float minimum from the
  float weights, Q4_1's rule; each column rounded half up onto it). A float zero: the engines that
  hold ``offset``'s bytes hold its bytes. On a model shipped on a Q4_1 grid (SmolLM2 here) it
  re-finds that grid where the weights lie on it, and spreads the error where they do not.

A sweep's ``--weight-quant`` axis (RunSpec.weight_quant, the rows' ``weight_quant``): held.py makes
the bytes every engine holds from these codes; engines that cannot hold a quantizer's zero points
refuse its runs with the reason (KindRunner.weight_quants).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import quant


@dataclass(frozen=True)
class BlockCodes:
    """W[N, K] held as unsigned codes with a scale and a zero per block of ``block_size`` along K."""

    quantizer: str
    bits: int
    block_size: int
    codes: np.ndarray
    """int64 [N, K] in [0, 2^bits - 1]."""
    scale: np.ndarray
    """float32 [N, K / block_size]."""
    zero: np.ndarray
    """[N, K / block_size]: int64 (an integer zero point) or float32 (a float offset)."""

    @property
    def float_zero(self) -> bool:
        return self.zero.dtype.kind == "f"

    def dequantize(self) -> np.ndarray:
        """float64 [N, K]: (code - zero) * scale, blockwise."""
        n, k = self.codes.shape
        blocks = self.codes.reshape(n, k // self.block_size, self.block_size).astype(np.float64)
        values = (blocks - self.zero[..., None].astype(np.float64)) * self.scale[..., None].astype(np.float64)
        return values.reshape(n, k)

    def weight_error(self, w: np.ndarray) -> float:
        """Relative RMS error of the held values against the float weights ``w``."""
        return quant.rel_rms_error(self.dequantize(), np.asarray(w, dtype=np.float64))


@dataclass(frozen=True)
class Quantizer:
    name: str
    description: str
    reference: str
    """The implementation it follows or calls (what tests/test_quantizers.py checks it against)."""
    float_zero: bool
    quantize: Callable[..., BlockCodes]
    """(W float32 [N, K], bits, block_size[, hessian]) -> BlockCodes."""
    calibrated: bool = False
    """It needs the layer's input statistics (``hessian``: E[x x^T] over calibration data)."""


def _blocks(w: np.ndarray, bits: int, block_size: int) -> np.ndarray:
    """float32 [N, K / block_size, block_size], after the checks every quantizer shares."""
    w = np.asarray(w, dtype=np.float32)
    if bits not in (2, 4, 8):
        raise ValueError(f"weight quantizers hold 8, 4 or 2 bits, not {bits}")
    if w.ndim != 2 or w.size == 0:
        raise ValueError(f"weights must be a non-empty [N, K] matrix, got shape {w.shape}")
    if block_size <= 0 or w.shape[1] % block_size:
        raise ValueError(f"K={w.shape[1]} is not a multiple of the block size {block_size}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights contain NaN or infinite values")
    return w.reshape(w.shape[0], -1, block_size)


def minmax(w: np.ndarray, bits: int, block_size: int) -> BlockCodes:
    _blocks(w, bits, block_size)
    q, params = quant.quantize_weights(w, bits, granularity="blockwise", block_size=block_size)
    offset = 1 << (bits - 1)  # the signed codes precision/quant.py holds, as unsigned ones
    return BlockCodes("minmax", bits, block_size, q + offset, params.scale.astype(np.float32),
                      params.zero_point + offset)


def offset(w: np.ndarray, bits: int, block_size: int) -> BlockCodes:
    """llama.cpp's Q4_1 rule (ggml ``quantize_row_q4_1_ref``, gguf's ``Q4_1.quantize_blocks``) at
    any bits, in the same float32 arithmetic: the block's own minimum (not widened to 0), round half
    up. A block whose values are all equal holds them as scale 1 and zero -min."""
    blocks = _blocks(w, bits, block_size)
    top = (1 << bits) - 1
    lo, hi = blocks.min(axis=-1, keepdims=True), blocks.max(axis=-1, keepdims=True)
    d = (hi - lo) / np.float32(top)
    with np.errstate(divide="ignore"):
        inverse = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    codes = np.clip(np.trunc((blocks - lo) * inverse + np.float32(0.5)), 0, top).astype(np.int64)
    scale = np.where(d[..., 0] == 0, np.float32(1), d[..., 0]).astype(np.float32)
    zero = (-lo[..., 0] / scale).astype(np.float32)
    return BlockCodes("offset", bits, block_size, codes.reshape(w.shape), scale, zero)


def hqq(w: np.ndarray, bits: int, block_size: int) -> BlockCodes:
    """onnxruntime's HQQ (``HQQWeightOnlyQuantizer.quantize_internal``: 20 iterations at most,
    lp-norm 0.7) on this one tensor; its scale is floored at 1 / 2e4 (its inverse-scale clamp)."""
    _blocks(w, bits, block_size)
    import torch
    from onnxruntime.quantization.matmul_nbits_quantizer import HQQWeightOnlyQuantConfig, HQQWeightOnlyQuantizer

    quantizer = HQQWeightOnlyQuantizer(HQQWeightOnlyQuantConfig(block_size=block_size, bits=bits))
    codes, scale, zero = quantizer.quantize_internal(torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)),
                                                     bits=bits, group_size=block_size)
    n = w.shape[0]
    return BlockCodes("hqq", bits, block_size, codes.numpy().astype(np.int64).reshape(w.shape),
                      scale.numpy().astype(np.float32).reshape(n, -1), zero.numpy().astype(np.float32).reshape(n, -1))


KQUANT_SEARCH = (-1.0, 0.1, 20)
"""make_qkx2_quants' rmin, rdelta and nstep as Q4_K calls it: candidate inverse scales
(rmin + rdelta * i + 2^bits - 1) / (max - min) for i = 0 .. nstep."""


def _running_sum(values: np.ndarray) -> np.ndarray:
    """Sum along the last axis in order, in float32 (as C's loop adds: numpy's sum pairs terms)."""
    return np.cumsum(values, axis=-1, dtype=np.float32)[..., -1]


def kquant(w: np.ndarray, bits: int, block_size: int) -> BlockCodes:
    """llama.cpp's ``make_qkx2_quants`` on every block at once, in its float32 arithmetic and order
    (tests/fixtures/ggml_make_qkx2.c is the C it is checked against)."""
    blocks = _blocks(w, bits, block_size)
    n, nb, size = blocks.shape
    x = blocks.reshape(-1, size)
    f, top = np.float32, (1 << bits) - 1
    rmin, rdelta, nstep = KQUANT_SEARCH
    av_x = np.sqrt(_running_sum(x * x) / f(size)).astype(f)
    weights = (av_x[:, None] + np.abs(x)).astype(f)
    minimum = np.minimum(x.min(axis=1), f(0))
    hi = x.max(axis=1)
    flat = hi == minimum
    sum_w, sum_x = _running_sum(weights), _running_sum(weights * x)

    def codes_for(steps: np.float32) -> np.ndarray:
        """Codes on the grid of ``steps`` steps from the current minimum to the maximum (ggml moves
        its minimum to each better fit, and the next candidates start from there)."""
        inverse = (steps / np.where(flat, f(1), hi - minimum)).astype(f)
        return inverse, np.clip(np.rint((inverse[:, None] * (x - minimum[:, None])).astype(f)), 0, top).astype(f)

    inverse, codes = codes_for(f(top))
    scale = (f(1) / inverse).astype(f)
    diff = (scale[:, None] * codes + minimum[:, None]).astype(f) - x
    best = _running_sum(weights * (diff * diff))
    for i in range(nstep + 1):
        _, tried = codes_for(f(f(rmin) + f(rdelta) * f(i)) + f(top))
        sum_l, sum_l2 = _running_sum(weights * tried), _running_sum(weights * tried * tried)
        sum_xl = _running_sum(weights * tried * x)
        d = (sum_w * sum_l2 - sum_l * sum_l).astype(f)
        fits = d > 0
        d = np.where(fits, d, f(1))
        this_scale = ((sum_w * sum_xl - sum_x * sum_l) / d).astype(f)
        this_min = ((sum_l2 * sum_x - sum_l * sum_xl) / d).astype(f)
        positive = this_min > 0
        this_scale = np.where(positive, sum_xl / np.where(sum_l2 > 0, sum_l2, f(1)), this_scale).astype(f)
        this_min = np.where(positive, f(0), this_min).astype(f)
        diff = (this_scale[:, None] * tried + this_min[:, None]).astype(f) - x
        error = _running_sum(weights * (diff * diff))
        better = fits & (error < best) & ~flat
        codes = np.where(better[:, None], tried, codes)
        best = np.where(better, error, best)
        scale = np.where(better, this_scale, scale)
        minimum = np.where(better, this_min, minimum)
    codes = np.where(flat[:, None], f(0), codes)
    scale = np.where(flat, f(1), scale).astype(f)  # equal values: code 0 stands for them
    zero = (-minimum / scale).astype(f)
    return BlockCodes("kquant", bits, block_size, codes.astype(np.int64).reshape(w.shape),
                      scale.reshape(n, nb), zero.reshape(n, nb))


GPTQ_DAMP = 0.1
"""GPTQ's dampening: this share of the mean of E[x_k^2] added to the diagonal before inverting.
0.1, not the paper's 0.01: it did better on all-MiniLM-L6-v2 at 4 bits (docs/design/
weight-quantizers.md says how it was chosen and what was measured with it)."""
GPTQ_LAZY_COLUMNS = 128
"""Columns quantized between two whole-matrix updates (the paper's lazy batch; the result is the
same at any width, the cost is not)."""


def gptq(w: np.ndarray, bits: int, block_size: int, hessian: np.ndarray | None = None) -> BlockCodes:
    """GPTQ on minmax's grid (module docstring). ``hessian``: E[x x^T] of the layer's input, [K, K]."""
    return _gptq(w, bits, block_size, hessian, minmax, "gptq")


def gptq_offset(w: np.ndarray, bits: int, block_size: int, hessian: np.ndarray | None = None) -> BlockCodes:
    """GPTQ on offset's grid: each block's scale and float minimum from the float weights (Q4_1's
    rule), each column rounded half up onto it (module docstring)."""
    return _gptq(w, bits, block_size, hessian, offset, "gptq-offset")


def _gptq(w: np.ndarray, bits: int, block_size: int, hessian: np.ndarray | None,
          grid_of: Callable[[np.ndarray, int, int], BlockCodes], name: str) -> BlockCodes:
    """GPTQ with static groups on ``grid_of``'s grid of the float weights."""
    blocks = _blocks(w, bits, block_size)
    n, k = w.shape
    if hessian is None:
        raise ValueError(f"{name} needs the layer's input statistics from calibration data (E[x x^T])")
    h = np.array(hessian, dtype=np.float64)
    if h.shape != (k, k) or not np.all(np.isfinite(h)):
        raise ValueError(f"{name} needs a finite [K, K] = [{k}, {k}] input second moment, got shape {h.shape}")
    grid = grid_of(blocks.reshape(n, k), bits, block_size)  # static groups: the float weights' scale and zero
    scale, zero = grid.scale.astype(np.float64), grid.zero.astype(np.float64)
    top = (1 << bits) - 1
    work = w.astype(np.float64).copy()
    dead = np.diag(h) == 0  # inputs that never vary: nothing to spread their error through
    h[dead, dead] = 1.0
    work[:, dead] = 0.0
    order = np.argsort(-np.diag(h), kind="stable")
    work, h = work[:, order], h[order][:, order]
    h[np.diag_indices(k)] += GPTQ_DAMP * np.mean(np.diag(h))
    upper = np.linalg.cholesky(np.linalg.inv(h)).T  # inverse Hessian = upper^T upper
    codes = np.zeros((n, k), dtype=np.int64)
    for i1 in range(0, k, GPTQ_LAZY_COLUMNS):
        i2 = min(i1 + GPTQ_LAZY_COLUMNS, k)
        part, errors = work[:, i1:i2].copy(), np.zeros((n, i2 - i1))
        for i in range(i2 - i1):
            column, group = order[i1 + i], order[i1 + i] // block_size
            q = np.clip(_round_onto(part[:, i], scale[:, group], zero[:, group], grid.float_zero), 0, top)
            codes[:, column] = q
            errors[:, i] = (part[:, i] - (q - zero[:, group]) * scale[:, group]) / upper[i1 + i, i1 + i]
            part[:, i:] -= np.outer(errors[:, i], upper[i1 + i, i1 + i:i2])
        work[:, i2:] -= errors @ upper[i1:i2, i2:]
    return BlockCodes(name, bits, block_size, codes, grid.scale, grid.zero)


def _round_onto(values: np.ndarray, scale: np.ndarray, zero: np.ndarray, float_zero: bool) -> np.ndarray:
    """The nearest code of ``values`` on a grid, unclipped: an integer zero point's grid rounds
    half to even (minmax), a float offset's rounds half up (Q4_1's ``trunc(x / d - min / d + 0.5)``)."""
    if float_zero:
        return np.floor(values / scale + zero + 0.5)
    return np.rint(values / scale) + zero


QUANTIZERS: dict[str, Quantizer] = {q.name: q for q in (
    Quantizer("minmax", "min/max round-to-nearest, the range widened to hold 0, an integer zero point",
              "onnxruntime's default MatMulNBits quantizer (MLAS)", False, minmax),
    Quantizer("offset", "a float minimum per block (llama.cpp's Q4_1 rule at any bits)",
              "gguf's Q4_1 (llama.cpp quantize_row_q4_1_ref)", True, offset),
    Quantizer("hqq", "Half-Quadratic Quantization: the zero optimised for an l0.7 weight error, a float zero",
              "onnxruntime's HQQWeightOnlyQuantizer", True, hqq),
    Quantizer("kquant", "llama.cpp's k-quant search: the scale and a float minimum per block fitted by weighted least "
              "squares over 21 candidate grids", "ggml's make_qkx2_quants (as Q4_K calls it), compiled from C", True,
              kquant),
    Quantizer("gptq", "GPTQ on minmax's grid, calibrated: rounding errors spread through the inverse input "
              "second moment (act order, static groups), an integer zero",
              "the column-by-column recursion it batches (tests), and round-to-nearest where inputs are "
              "uncorrelated", False, gptq, calibrated=True),
    Quantizer("gptq-offset", "GPTQ on offset's grid, calibrated: as gptq, with a float minimum per block (Q4_1's "
              "grid) in place of an integer zero", "the same recursion (tests), and offset's rounding where inputs are "
              "uncorrelated", True, gptq_offset, calibrated=True),
)}
"""Every weight quantizer by name; the first is the harness's default."""


INTEGER_ZERO = tuple(name for name, q in QUANTIZERS.items() if not q.float_zero)
"""The quantizers whose zero points are integers: their bytes have minmax's form, so every engine
that holds minmax's bytes holds theirs (WebNN's dequantizeLinear, ORT's MatMulNBits on every provider)."""
DEFAULT_QUANTIZER = next(iter(QUANTIZERS))
"""What sweeps quantize with unless ``--weight-quant`` says otherwise; rows from before the
quantizer axis read as it."""


def check_quantizer(name: str) -> Quantizer:
    """The one check of a weight quantizer's name (the CLI, the Python API and plan files)."""
    if name not in QUANTIZERS:
        raise ValueError(f"weight quantizer {name!r} is not one of {', '.join(QUANTIZERS)}")
    return QUANTIZERS[name]


def quantize(w: np.ndarray, bits: int, block_size: int, quantizer: str = DEFAULT_QUANTIZER,
             hessian: np.ndarray | None = None) -> BlockCodes:
    """``hessian``: the layer's input second moment, for the calibrated quantizers (gptq)."""
    q = check_quantizer(quantizer)
    return q.quantize(w, bits, block_size, hessian) if q.calibrated else q.quantize(w, bits, block_size)


def input_moment(inputs: np.ndarray) -> np.ndarray:
    """E[x x^T] over the rows of ``inputs`` [rows, K] (float64): what gptq calibrates with."""
    x = np.asarray(inputs, dtype=np.float64).reshape(-1, np.shape(inputs)[-1])
    return x.T @ x / max(len(x), 1)

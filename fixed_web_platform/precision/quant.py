"""Pure-numpy quantization reference for the browser precision benchmarks.

Everything the browser side computes (WebNN ``quantizeLinear`` /
``dequantizeLinear``, WebGPU kernels reading packed 2/4/8-bit weights or
packed float16 pairs) has a CPU counterpart here, so that results coming back
from a browser can be checked against a reference that is itself validated on
the WebNN web-platform-tests conformance vectors (see tests/test_quant.py).

Conventions:

* Quantized values are carried as plain ``int64`` arrays; sub-byte types
  (int4/uint4/int2/uint2) only exist as packed bytes at the GPU boundary
  (:func:`pack_bits`, :func:`pack_u32_words`).
* Scale / zero-point tensors follow WebNN's *blockwise broadcast*: they have the
  input's rank and every input dimension is an exact multiple of the matching
  parameter dimension (:func:`expand_blockwise`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "DTYPE_RANGES",
    "QuantParams",
    "choose_qparams",
    "cosine_similarity",
    "dequantize_linear",
    "dequantize_weights",
    "dtype_bits",
    "dtype_signed",
    "error_metrics",
    "expand_blockwise",
    "float16_bits_u32",
    "max_abs_error",
    "pack_bits",
    "pack_u32_words",
    "quantize_linear",
    "quantize_weights",
    "rel_rms_error",
    "snr_db",
    "to_float16",
    "unpack_bits",
]

# Inclusive integer range of every quantized type the harness uses. WebNN
# defines int8/uint8/int4/uint4/int32; int2/uint2 are the 2-bit weight formats
# the WebGPU kernels exercise.
DTYPE_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int4": (-8, 7),
    "uint4": (0, 15),
    "int2": (-2, 1),
    "uint2": (0, 3),
    "int32": (-(2**31), 2**31 - 1),
}

_DTYPE_BITS: dict[str, int] = {
    "int8": 8,
    "uint8": 8,
    "int4": 4,
    "uint4": 4,
    "int2": 2,
    "uint2": 2,
    "int32": 32,
}

_SIGNED_DTYPE_FOR_BITS: dict[int, str] = {8: "int8", 4: "int4", 2: "int2"}

_PACK_BITS = (2, 4, 8)


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPE_RANGES:
        raise ValueError(
            f"unknown quantized dtype {dtype!r}; expected one of {sorted(DTYPE_RANGES)}"
        )
    return dtype


def dtype_bits(dtype: str) -> int:
    """Storage width in bits of a quantized dtype (what the packer needs)."""
    return _DTYPE_BITS[_check_dtype(dtype)]


def dtype_signed(dtype: str) -> bool:
    """Whether the dtype is two's-complement signed (decides sign extension on unpack)."""
    return DTYPE_RANGES[_check_dtype(dtype)][0] < 0


# ---------------------------------------------------------------------------
# Blockwise broadcast + WebNN quantizeLinear / dequantizeLinear
# ---------------------------------------------------------------------------


def expand_blockwise(param: ArrayLike, shape: tuple[int, ...] | list[int]) -> np.ndarray:
    """Expand a scale/zero-point tensor to ``shape`` with WebNN blockwise broadcast.

    WebNN (unlike numpy) requires the parameter to have the input's rank and
    lets each parameter element cover a contiguous block: on every axis the
    input dimension must be an exact multiple of the parameter dimension, and
    input index ``i`` reads parameter index ``i // (dim // param_dim)``. A 0-D
    parameter is accepted for any shape (per-tensor). Anything else raises
    ``ValueError`` naming both shapes, so a wrong layout never silently
    broadcasts the numpy way.
    """
    p = np.asarray(param)
    shape = tuple(int(d) for d in shape)
    if p.ndim == 0:
        return np.broadcast_to(p, shape).copy()
    if p.ndim != len(shape):
        raise ValueError(
            f"parameter shape {tuple(p.shape)} does not blockwise-broadcast to input "
            f"shape {shape}: ranks differ ({p.ndim} vs {len(shape)})"
        )
    out = p
    for axis, (dim, pdim) in enumerate(zip(shape, p.shape)):
        if pdim == 0:
            if dim != 0:
                raise ValueError(
                    f"parameter shape {tuple(p.shape)} does not blockwise-broadcast to "
                    f"input shape {shape}: axis {axis} has parameter size 0"
                )
            continue
        if dim % pdim != 0:
            raise ValueError(
                f"parameter shape {tuple(p.shape)} does not blockwise-broadcast to "
                f"input shape {shape}: axis {axis} size {dim} is not a multiple of {pdim}"
            )
        block = dim // pdim
        if block != 1:
            out = np.repeat(out, block, axis=axis)
    return np.ascontiguousarray(out)


def _as_int_array(a: ArrayLike, what: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{what} must hold integers")
        return arr.astype(np.int64)
    raise ValueError(f"{what} must hold integers, got dtype {arr.dtype}")


def quantize_linear(
    x: ArrayLike,
    scale: ArrayLike,
    zero_point: ArrayLike,
    dtype: str,
    *,
    compute_dtype: str = "float64",
) -> np.ndarray:
    """WebNN ``quantizeLinear``: ``clamp(roundHalfToEven(x / scale) + zero_point)``.

    ``x`` and ``scale`` are first rounded to their own float types (that is what
    a browser holds), then divided in ``compute_dtype``. The default float64
    reproduces all WPT conformance vectors exactly; "float32" mimics an f32
    GPU kernel and is off by one on the int32 vector (a 24-bit mantissa cannot
    hold 26391447), still inside WPT's +-1 tolerance; float16 division must
    not be used (one vector moves by 2). Returns ``int64`` values inside
    ``DTYPE_RANGES[dtype]``; NaN inputs map to ``zero_point`` and +-inf
    saturate. Raises ``ValueError`` for an unknown dtype, a zero point outside
    the dtype's range or shapes that do not blockwise-broadcast.
    """
    lo, hi = DTYPE_RANGES[_check_dtype(dtype)]
    work = np.dtype(compute_dtype)
    if work.kind != "f":
        raise ValueError(f"compute_dtype must be a float type, got {compute_dtype!r}")
    xa = np.asarray(x)
    sa = np.asarray(scale)
    if xa.dtype.kind not in "fiu" or sa.dtype.kind not in "fiu":
        raise ValueError("quantize_linear needs numeric input and scale")
    zp = _as_int_array(zero_point, "zero_point")
    if zp.size and (zp.min() < lo or zp.max() > hi):
        raise ValueError(f"zero_point outside the {dtype} range [{lo}, {hi}]")
    s = expand_blockwise(sa, xa.shape).astype(work)
    z = expand_blockwise(zp, xa.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.rint(xa.astype(work) / s).astype(np.float64)
        r = np.where(np.isnan(r), 0.0, r) + z  # exact: |z| < 2**31 and r is integral
        r = np.clip(r, lo, hi)
    return r.astype(np.int64)


def dequantize_linear(q: ArrayLike, scale: ArrayLike, zero_point: ArrayLike) -> np.ndarray:
    """WebNN ``dequantizeLinear``: ``(q - zero_point) * scale`` in the scale's float type.

    The result has the scale's dtype (float16 scale -> float16 output, float32
    -> float32; non-float scales give float32). ``q - zero_point`` is taken
    exactly in int64 and the product is rounded once to the output type, which
    equals computing natively in that type whenever ``q - zero_point`` is
    representable there (always for 8/4/2-bit inputs) and is the correctly
    rounded value otherwise. Same blockwise-broadcast rules as
    :func:`quantize_linear`.
    """
    qa = _as_int_array(q, "q")
    sa = np.asarray(scale)
    out_dtype = sa.dtype if sa.dtype.kind == "f" else np.dtype(np.float32)
    s = expand_blockwise(sa, qa.shape).astype(np.float64)
    z = expand_blockwise(_as_int_array(zero_point, "zero_point"), qa.shape)
    diff = (qa - z).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return (diff * s).astype(out_dtype)


# ---------------------------------------------------------------------------
# Bit packing (the layout the WebGPU kernels and the WPT harness use)
# ---------------------------------------------------------------------------


def _check_pack_bits(bits: int) -> int:
    if bits not in _PACK_BITS:
        raise ValueError(f"bits must be one of {_PACK_BITS}, got {bits!r}")
    return int(bits)


def pack_bits(values: ArrayLike, bits: int) -> np.ndarray:
    """Pack integers into bytes, ``8 // bits`` per byte, first element in the lowest bits.

    Values are flattened in C order with no padding between rows; only the last
    byte is zero-padded. Signed and unsigned values are both accepted (each is
    stored as its low ``bits`` two's-complement bits), so the valid range is
    ``[-2**(bits-1), 2**bits - 1]``; anything outside raises ``ValueError``
    rather than being silently truncated.
    """
    bits = _check_pack_bits(bits)
    v = _as_int_array(values, "values").ravel()
    lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    if v.size and (v.min() < lo or v.max() > hi):
        bad = v[(v < lo) | (v > hi)][0]
        raise ValueError(f"value {int(bad)} does not fit in {bits} bits (range [{lo}, {hi}])")
    per = 8 // bits
    n_bytes = -(-v.size // per)
    u = np.zeros(n_bytes * per, dtype=np.uint8)
    u[: v.size] = (v & ((1 << bits) - 1)).astype(np.uint8)
    u = u.reshape(n_bytes, per)
    out = np.zeros(n_bytes, dtype=np.uint8)
    for j in range(per):
        out |= (u[:, j] << np.uint8(j * bits)).astype(np.uint8)
    return out


def unpack_bits(packed: ArrayLike, bits: int, count: int, signed: bool) -> np.ndarray:
    """Inverse of :func:`pack_bits`: the first ``count`` values as ``int64``.

    ``signed`` sign-extends from the top bit of each field (int4 from bit 3),
    which is how the WPT harness and the kernels read signed sub-byte data.
    """
    bits = _check_pack_bits(bits)
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise ValueError(f"packed must be a uint8 array, got dtype {p.dtype}")
    p = p.ravel()
    per = 8 // bits
    if count < 0 or count > p.size * per:
        raise ValueError(f"cannot unpack {count} {bits}-bit values from {p.size} bytes")
    mask = (1 << bits) - 1
    fields = np.stack([(p >> np.uint8(j * bits)) & np.uint8(mask) for j in range(per)], axis=1)
    v = fields.reshape(-1)[:count].astype(np.int64)
    if signed:
        v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return v


def pack_u32_words(values: ArrayLike, bits: int) -> np.ndarray:
    """The :func:`pack_bits` stream as little-endian u32 words (zero-padded to 4 bytes).

    WGSL storage buffers are read as ``array<u32>``, so kernels extract field
    ``i`` from word ``i // (32 // bits)`` at bit ``(i % (32 // bits)) * bits``.
    """
    b = pack_bits(values, bits)
    pad = (-b.size) % 4
    if pad:
        b = np.concatenate([b, np.zeros(pad, dtype=np.uint8)])
    return b.view("<u4").astype(np.uint32)


# ---------------------------------------------------------------------------
# Parameter choice for weight matrices
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QuantParams:
    """Quantization parameters of a [N, K] weight matrix.

    ``scale`` (float32) and ``zero_point`` (int64) are rank 2 so they feed
    :func:`quantize_linear` / WebNN directly: [1, 1] per tensor, [N, 1] per
    channel, [N, K // block_size] blockwise. ``scheme`` is "symmetric" or
    "asymmetric"; ``block_size`` is None unless blockwise.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: str
    block_size: int | None
    scheme: str


_GRANULARITIES = ("per_tensor", "per_channel", "blockwise")


def choose_qparams(
    w: ArrayLike,
    bits: int,
    *,
    symmetric: bool = False,
    granularity: str = "blockwise",
    block_size: int = 32,
) -> QuantParams:
    """Min/max quantization parameters for a float weight matrix ``w`` of shape [N, K].

    Always targets the signed type of the width (int8/int4/int2), as the
    kernels do. Symmetric: ``scale = max|w| / qmax`` and zero point 0.
    Asymmetric: the range is widened to include 0 (so 0.0 is exactly
    representable, e.g. for padding), ``scale = (max - min) / (qmax - qmin)``
    and ``zero_point = clamp(round(qmin - min / scale))``. Groups whose range is
    zero (or whose scale underflows float32) get scale 1 so nothing divides by
    zero. ``K % block_size != 0`` raises ``ValueError``.
    """
    if bits not in _SIGNED_DTYPE_FOR_BITS:
        raise ValueError(f"bits must be one of {sorted(_SIGNED_DTYPE_FOR_BITS)}, got {bits!r}")
    dtype = _SIGNED_DTYPE_FOR_BITS[bits]
    wa = np.asarray(w, dtype=np.float64)
    if wa.ndim != 2:
        raise ValueError(f"w must be a 2-D [N, K] matrix, got shape {wa.shape}")
    if not np.all(np.isfinite(wa)):
        raise ValueError("w contains NaN or infinite values")
    n, k = wa.shape
    if n == 0 or k == 0:
        raise ValueError(f"w must be non-empty, got shape {wa.shape}")
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be one of {_GRANULARITIES}, got {granularity!r}")

    bs: int | None = None
    if granularity == "per_tensor":
        groups = wa.reshape(1, 1, n * k)
    elif granularity == "per_channel":
        groups = wa.reshape(n, 1, k)
    else:
        bs = int(block_size)
        if bs <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        if k % bs != 0:
            raise ValueError(
                f"K={k} (reduction dim of w with shape {wa.shape}) is not a multiple of "
                f"block_size={bs}"
            )
        groups = wa.reshape(n, k // bs, bs)

    scale32, zp = qparams_from_range(groups.min(axis=2), groups.max(axis=2), bits, symmetric=symmetric)
    return QuantParams(
        scale=scale32,
        zero_point=zp,
        dtype=dtype,
        block_size=bs,
        scheme="symmetric" if symmetric else "asymmetric",
    )


def qparams_from_range(lo: ArrayLike, hi: ArrayLike, bits: int, *, symmetric: bool = False,
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(float32 scale, int64 zero point) for values observed in [lo, hi] (elementwise arrays of
    any shape): the one rule weights (:func:`choose_qparams`) and calibrated activations share.
    Symmetric: ``scale = max(|lo|, |hi|) / qmax``, zero point 0. Asymmetric: the range widened
    to include 0, ``scale = (hi - lo) / (qmax - qmin)``, ``zero_point = clamp(round(qmin - lo /
    scale))`` from the float32 scale actually stored. A zero (or underflowing) range gets scale 1."""
    if bits not in _SIGNED_DTYPE_FOR_BITS:
        raise ValueError(f"bits must be one of {sorted(_SIGNED_DTYPE_FOR_BITS)}, got {bits!r}")
    qmin, qmax = DTYPE_RANGES[_SIGNED_DTYPE_FOR_BITS[bits]]
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if symmetric:
        scale = np.maximum(np.abs(lo), np.abs(hi)) / qmax
    else:
        lo = np.minimum(lo, 0.0)
        hi = np.maximum(hi, 0.0)
        scale = (hi - lo) / (qmax - qmin)
    scale32 = scale.astype(np.float32)
    ok = np.isfinite(scale32) & (scale32 > np.finfo(np.float32).tiny)
    scale32 = np.where(ok, scale32, np.float32(1.0)).astype(np.float32)
    if symmetric:
        return scale32, np.zeros(scale32.shape, dtype=np.int64)
    zp_f = np.rint(qmin - lo / scale32.astype(np.float64))
    return scale32, np.clip(zp_f, qmin, qmax).astype(np.int64)


def quantize_weights(w: ArrayLike, bits: int, **kw: object) -> tuple[np.ndarray, QuantParams]:
    """Choose parameters for ``w`` (see :func:`choose_qparams`) and quantize with them."""
    params = choose_qparams(w, bits, **kw)  # type: ignore[arg-type]
    w32 = np.asarray(w, dtype=np.float32)
    q = quantize_linear(w32, params.scale, params.zero_point, params.dtype)
    return q, params


def dequantize_weights(q: ArrayLike, params: QuantParams) -> np.ndarray:
    """Float32 reconstruction of quantized weights (what an exact kernel should see)."""
    return dequantize_linear(q, params.scale.astype(np.float32), params.zero_point)


# ---------------------------------------------------------------------------
# float16 helpers
# ---------------------------------------------------------------------------


def to_float16(x: ArrayLike) -> np.ndarray:
    """Round to float16 with numpy's round-to-nearest-even (what GPUs do on store)."""
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(np.float16)


def float16_bits_u32(x: ArrayLike) -> np.ndarray:
    """Pack float16 bit patterns in pairs into u32 words, element 0 in the low half.

    Matches WGSL ``unpack2x16float``; an odd count is padded with +0.0.
    """
    h = to_float16(x).ravel().view(np.uint16).astype(np.uint32)
    if h.size % 2:
        h = np.concatenate([h, np.zeros(1, dtype=np.uint32)])
    return (h[0::2] | (h[1::2] << np.uint32(16))).astype(np.uint32)


# ---------------------------------------------------------------------------
# Error metrics (float64; NaN in the output propagates instead of raising)
# ---------------------------------------------------------------------------


def _pair(out: ArrayLike, ref: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    o = np.asarray(out, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    if o.shape != r.shape:
        raise ValueError(f"output shape {o.shape} does not match reference shape {r.shape}")
    return o.ravel(), r.ravel()


def _norm(a: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.sum(a * a)))


def rel_rms_error(out: ArrayLike, ref: ArrayLike) -> float:
    """``||out - ref||_2 / ||ref||_2`` (0 if both are zero, inf if only ref is)."""
    o, r = _pair(out, ref)
    with np.errstate(invalid="ignore", over="ignore"):
        num = _norm(o - r)
    den = _norm(r)
    if math.isnan(num) or math.isnan(den):
        return math.nan
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def max_abs_error(out: ArrayLike, ref: ArrayLike) -> float:
    """Largest element-wise ``|out - ref|`` (0 for empty arrays)."""
    o, r = _pair(out, ref)
    if o.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        return float(np.max(np.abs(o - r)))


def snr_db(out: ArrayLike, ref: ArrayLike) -> float:
    """``20 * log10(||ref|| / ||out - ref||)``; ``math.inf`` when identical."""
    o, r = _pair(out, ref)
    with np.errstate(invalid="ignore", over="ignore"):
        noise = _norm(o - r)
    sig = _norm(r)
    if math.isnan(noise) or math.isnan(sig):
        return math.nan
    if noise == 0.0:
        return math.inf
    if sig == 0.0:
        return -math.inf
    return 20.0 * math.log10(sig / noise)


def cosine_similarity(out: ArrayLike, ref: ArrayLike) -> float:
    """Cosine of the angle between the flattened arrays (1 if both are all zero, 0 if one is)."""
    o, r = _pair(out, ref)
    no, nr = _norm(o), _norm(r)
    if math.isnan(no) or math.isnan(nr):
        return math.nan
    if no == 0.0 and nr == 0.0:
        return 1.0
    if no == 0.0 or nr == 0.0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        c = float(np.dot(o / no, r / nr))
    return max(-1.0, min(1.0, c)) if not math.isnan(c) else math.nan


def error_metrics(out: ArrayLike, ref: ArrayLike) -> dict[str, float]:
    """All metrics at once: keys ``rel_error``, ``max_abs_error``, ``snr_db``, ``cosine``."""
    return {
        "rel_error": rel_rms_error(out, ref),
        "max_abs_error": max_abs_error(out, ref),
        "snr_db": snr_db(out, ref),
        "cosine": cosine_similarity(out, ref),
    }

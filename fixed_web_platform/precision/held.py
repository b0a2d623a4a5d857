"""The one place a float32 weight matrix W[N, K] becomes the bytes every engine holds at some bits
(packed integers blockwise along K with the harness's scales and zero points, float16, or float32),
with the values those bytes stand for. The matmul sweep and whole models both hold weights here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..vocabulary import PER_CHANNEL_BLOCK
from . import quant


@dataclass(frozen=True)
class HeldWeights:
    """A weight matrix W[N, K] as an engine holds it at some bits: the bytes, and their values."""

    tensors: dict[str, bytes]
    """w[, scales, zero_points]: packed integers are little-endian u32 words, first element in
    the lowest bits; 16-bit is float16 bit patterns in u32 words; 32-bit is float32."""
    w_exec: np.ndarray
    """The values the held bytes stand for (dequantized)."""
    weight_format: str
    weight_dtype: str
    weight_bytes: int
    block_size: int
    """The block along K the bytes were made with (K itself per channel); 0 for float weights."""


def hold_weights(w: np.ndarray, bits: int, block_size: int, unsigned: bool = False) -> HeldWeights:
    """The one place a float32 W[N, K] becomes the bytes every engine gets at ``bits``.
    ``block_size`` PER_CHANNEL_BLOCK (0): one symmetric scale per output channel (zero points 0),
    held like blockwise bytes whose block is all of K. ``unsigned`` stores 8/4/2-bit values
    shifted by 2^(bits-1), zero points too (same values)."""
    if bits == 32:
        return HeldWeights({"w": w.tobytes()}, w, "float32", "float32", w.nbytes, 0)
    if bits == 16:
        w16 = quant.to_float16(w)
        packed = quant.float16_bits_u32(w16).tobytes()
        return HeldWeights({"w": packed}, w16.astype(np.float32), "float16", "float16", len(packed), 0)
    per_channel = block_size == PER_CHANNEL_BLOCK
    if per_channel:
        q, params = quant.quantize_weights(w, bits, granularity="per_channel", symmetric=True)
        block_size = w.shape[1]
    else:
        q, params = quant.quantize_weights(w, bits, granularity="blockwise", block_size=block_size)
    w_exec = quant.dequantize_weights(q, params)
    zero_point, weight_dtype = params.zero_point, params.dtype
    if unsigned:
        offset = 1 << (bits - 1)
        q, zero_point, weight_dtype = q + offset, zero_point + offset, "u" + params.dtype
    tensors = {"w": quant.pack_u32_words(q, bits).tobytes(),
               "scales": params.scale.astype(np.float32).tobytes(),
               "zero_points": quant.pack_u32_words(zero_point, bits).tobytes()}
    grouping = "per-channel" if per_channel else f"block{block_size}"
    return HeldWeights(tensors, w_exec, f"{weight_dtype}-{grouping}-{params.scheme}", weight_dtype,
                       sum(len(t) for t in tensors.values()), block_size)

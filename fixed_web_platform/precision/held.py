"""The one place a float32 weight matrix W[N, K] becomes the bytes every engine holds at some bits
(packed integers blockwise along K with the harness's scales and zero points, float16, or float32),
with the values those bytes stand for. The matmul sweep and whole models both hold weights here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..vocabulary import PER_CHANNEL_BLOCK
from . import quant
from .quantizers import DEFAULT_QUANTIZER, BlockCodes, quantize

FLOAT_ZERO = "float32"
"""``HeldWeights.zero_point_dtype`` of a quantizer that keeps a float offset per block (offset,
hqq, ...): one float32 per block, in the unsigned code domain. Each engine says how it holds them
(WGSL: a float zero buffer; WebNN: a subtraction after dequantizeLinear; ORT wasm: MatMulNBits'
float zero points)."""


@dataclass(frozen=True)
class HeldWeights:
    """A weight matrix W[N, K] as an engine holds it at some bits: the bytes, and their values."""

    tensors: dict[str, bytes]
    """w[, scales, zero_points]: packed integers are little-endian u32 words, first element in
    the lowest bits; 16-bit is float16 bit patterns in u32 words; 32-bit is float32. Float zero
    points (quantizers that keep a float offset) are float32, one per block, in the unsigned code
    domain: a weight is (code - zero) * scale, the code being q + 2^(bits-1) for signed q."""
    w_exec: np.ndarray
    """The values the held bytes stand for (dequantized)."""
    weight_format: str
    weight_dtype: str
    weight_bytes: int
    block_size: int
    """The block along K the bytes were made with (K itself per channel); 0 for float weights."""
    quantizer: str = ""
    """The weight quantizer that made the codes (precision/quantizers.py); '' for float weights."""
    zero_point_dtype: str = ""
    """How the zero points are held: the weights' integer type, or float32; '' for float weights."""
    weight_error: float = 0.0
    """Relative RMS error of ``w_exec`` against the float weights (what the bits and the quantizer cost)."""
    codes: BlockCodes | None = None
    """The unsigned codes, scales and zeros the bytes hold (8/4/2 bits): what a format of another
    layout (llama.cpp's Q4_1, engines/wllama/gguf_files.py) writes the same values from."""


def hold_weights(w: np.ndarray, bits: int, block_size: int, unsigned: bool = False,
                 quantizer: str = DEFAULT_QUANTIZER, hessian: np.ndarray | None = None) -> HeldWeights:
    """The one place a float32 W[N, K] becomes the bytes every engine gets at ``bits``.
    ``block_size`` PER_CHANNEL_BLOCK (0): one symmetric scale per output channel (zero points 0),
    held like blockwise bytes whose block is all of K. ``unsigned`` stores 8/4/2-bit values
    shifted by 2^(bits-1), zero points too (same values). ``quantizer`` names the rule that makes
    blockwise codes (precision/quantizers.py; per-channel weights are the default's), ``hessian``
    the layer's input second moment for a calibrated one (gptq)."""
    held = _held_bytes(w, bits, block_size, unsigned, quantizer, hessian)
    return dataclasses.replace(held, weight_error=quant.rel_rms_error(held.w_exec, w))


def _held_bytes(w: np.ndarray, bits: int, block_size: int, unsigned: bool, quantizer: str,
                hessian: np.ndarray | None) -> HeldWeights:
    if bits == 32:
        return HeldWeights({"w": w.tobytes()}, w, "float32", "float32", w.nbytes, 0)
    if bits == 16:
        w16 = quant.to_float16(w)
        packed = quant.float16_bits_u32(w16).tobytes()
        return HeldWeights({"w": packed}, w16.astype(np.float32), "float16", "float16", len(packed), 0)
    per_channel = block_size == PER_CHANNEL_BLOCK
    if quantizer != DEFAULT_QUANTIZER:
        if per_channel:
            raise ValueError(f"per-channel weights are held symmetric by {DEFAULT_QUANTIZER}, not {quantizer}")
        return _hold_codes(w, bits, block_size, unsigned, quantizer, hessian)
    if per_channel:
        q, params = quant.quantize_weights(w, bits, granularity="per_channel", symmetric=True)
        block_size = w.shape[1]
    else:
        q, params = quant.quantize_weights(w, bits, granularity="blockwise", block_size=block_size)
    w_exec = quant.dequantize_weights(q, params)
    zero_point, weight_dtype = params.zero_point, params.dtype
    shift = 1 << (bits - 1)
    codes = BlockCodes(DEFAULT_QUANTIZER, bits, block_size, q + shift, params.scale.astype(np.float32),
                       params.zero_point + shift)
    if unsigned:
        q, zero_point, weight_dtype = q + shift, zero_point + shift, "u" + params.dtype
    tensors = {"w": quant.pack_u32_words(q, bits).tobytes(),
               "scales": params.scale.astype(np.float32).tobytes(),
               "zero_points": quant.pack_u32_words(zero_point, bits).tobytes()}
    grouping = "per-channel" if per_channel else f"block{block_size}"
    return HeldWeights(tensors, w_exec, f"{weight_dtype}-{grouping}-{params.scheme}", weight_dtype,
                       sum(len(t) for t in tensors.values()), block_size, DEFAULT_QUANTIZER, weight_dtype, codes=codes)


def _hold_codes(w: np.ndarray, bits: int, block_size: int, unsigned: bool, quantizer: str,
                hessian: np.ndarray | None) -> HeldWeights:
    """Blockwise bytes from a registered quantizer's codes: the codes packed like the default's
    (signed, or unsigned with ``unsigned``), float32 scales, and the zero points packed like the
    codes when they are integers or as float32 when the quantizer keeps a float offset."""
    codes = quantize(w, bits, block_size, quantizer, hessian)
    offset = 0 if unsigned else 1 << (bits - 1)
    weight_dtype = f"{'u' if unsigned else ''}int{bits}"
    zero = codes.zero.astype(np.float32).tobytes() if codes.float_zero else \
        quant.pack_u32_words(codes.zero - offset, bits).tobytes()
    tensors = {"w": quant.pack_u32_words(codes.codes - offset, bits).tobytes(),
               "scales": codes.scale.astype(np.float32).tobytes(), "zero_points": zero}
    return HeldWeights(tensors, codes.dequantize(), f"{weight_dtype}-block{block_size}-{quantizer}",
                       weight_dtype, sum(len(t) for t in tensors.values()), block_size, quantizer,
                       FLOAT_ZERO if codes.float_zero else weight_dtype, codes=codes)

"""Int8 activations in the float64 references: one rule, which every architecture's reference
applies to each linear layer it is asked to (``ActQuant``): the layer's input, and in WebNN's
``gemm_qdq`` form its output before the bias (``<layer>:output``), through quantize -> dequantize,
rounding half to even and clamping to int8 as WebNN's quantizeLinear and the WGSL kernels do. A
per-token input (models/calibration.ActivationQuant.per_token) is divided by each position's peak
|x| first, and the layer's x @ W^T (after its output's int8) multiplied by it. An engine that
quantizes the input by a rule of its own at run time (ONNX Runtime's DP4A kernels) names it as a
function of x instead."""

from __future__ import annotations

import numpy as np

from .base import OUTPUT_QUANT, ActQuant

PER_TOKEN_MIN_PEAK = 1e-30
"""A position whose input is all zeros is divided by this instead of 0 (it stays 0); the
page's graph uses the same."""


def token_peaks(x: np.ndarray) -> np.ndarray:
    """Each position's peak |x| over the last axis, [..., 1], at least PER_TOKEN_MIN_PEAK: what a
    per-token input is divided by."""
    return np.maximum(np.abs(x).max(axis=-1, keepdims=True), PER_TOKEN_MIN_PEAK)


def fake_quantize_int8(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    q = np.clip(np.rint(x / scale) + zero_point, -128, 127)
    return (q - zero_point) * scale


def linear(x: np.ndarray, weight: np.ndarray, name: str, act_quant: ActQuant | None,
           bias: np.ndarray | None = None) -> np.ndarray:
    """x @ W^T (+ bias) in float64 with layer ``name``'s int8 input and output where ``act_quant``
    names them (output channels listed as kept stay float)."""
    peaks = None
    rule = act_quant.get(name) if act_quant else None
    if callable(rule):  # an engine's own dynamic rule
        x = rule(x)
    elif rule is not None:
        scale, zero_point, *per_token = rule
        if per_token and per_token[0]:  # models/calibration.ActivationQuant.per_token
            peaks = token_peaks(x)
            x = x / peaks
        x = fake_quantize_int8(x, scale, zero_point)
    y = x @ np.asarray(weight, dtype=np.float64).T
    if act_quant and name + OUTPUT_QUANT in act_quant:
        scale, zero_point, *rest = act_quant[name + OUTPUT_QUANT]
        kept = list(rest[0]) if rest else []
        quantized = fake_quantize_int8(y, scale, zero_point)
        quantized[..., kept] = y[..., kept]
        y = quantized
    if peaks is not None:
        y = y * peaks
    return y + bias if bias is not None else y

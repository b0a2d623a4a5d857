"""SmoothQuant (Xiao et al., 2023) for int8 activations: a layer's input channels that carry
outliers are divided by s_j and its weight's columns multiplied by s_j, so x @ W^T is unchanged
while the input int8 has to hold is flatter; s_j = max|x_j|^alpha / max|W_:,j|^(1 - alpha), the
input's peaks from the calibration set (never the evaluated inputs), the weight's over every layer
reading the same input.

The division is folded into the weight that writes the input (an architecture's
``smoothing_groups``: a norm's weight, or a linear layer's rows), so no engine computes anything
more: the smoothed model is the float model with other weights, held, calibrated, exported and
checked as any other (a float64 forward of it equals the original's).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from . import calibration
from .source import LoadedModel

SMOOTH_ALPHA = 0.7
"""How much of an input's outlier range moves into the weights (0: none, 1: all). 0.7 measured
best of 0.5, 0.7 and 0.8 for SmolLM2-135M's int8 inputs and outputs, folded as here, outputs at a
25 dB floor (benchmarks/w8a8_decoder_accuracy.py, PyTorch fake quantization, next-token top-1
against fp32 on the evaluation rows): 0.48 unsmoothed, 0.70 at 0.5, 0.76 at 0.7, 0.70 at 0.8."""
MIN_FACTOR = 1e-5


def note(architecture: Any, config: Any) -> str:
    """What a run with int8 activations says of its smoothing ('' where there is none)."""
    groups = architecture.smoothing_groups(config)
    if not groups:
        return ""
    return (f"int8 inputs smoothed (SmoothQuant, alpha {SMOOTH_ALPHA:g}, on the calibration set: "
            f"{sum(len(g.consumers) for g in groups)} layers' input outliers moved into their weights)")


def label(architecture: Any, config: Any) -> str:
    """The result row's ``act_smoothing`` of int8 activations on this architecture: 'smoothquant-0.7',
    or '' where it has no smoothing groups."""
    return f"smoothquant-{SMOOTH_ALPHA:g}" if architecture.smoothing_groups(config) else ""


def factors(peaks: np.ndarray, weights: list[np.ndarray], alpha: float) -> np.ndarray:
    """s [K] for an input whose channels peak at ``peaks`` [K], read by ``weights`` ([N, K] each)."""
    w_peaks = np.max([np.abs(w).max(axis=0) for w in weights], axis=0).astype(np.float64)
    s = np.maximum(peaks, MIN_FACTOR) ** alpha / np.maximum(w_peaks, MIN_FACTOR) ** (1 - alpha)
    return np.maximum(s, MIN_FACTOR)


@functools.lru_cache(maxsize=1)
def smoothed(model: LoadedModel, inputs: calibration.CalibrationInputs, alpha: float = SMOOTH_ALPHA) -> LoadedModel:
    """``model`` with its architecture's smoothing groups migrated at ``alpha`` over ``inputs``
    (the model itself where its architecture has none)."""
    groups = model.architecture.smoothing_groups(model.config)
    if not groups:
        return model
    peaks = calibration.input_peaks(model, inputs, tuple(g.consumers[0] for g in groups))
    weights = dict(model.weights)
    for g in groups:
        readers = [weights[f"{c}.weight"] for c in g.consumers]
        s = factors(peaks[g.consumers[0]], readers, alpha)
        for name in filter(None, (g.producer, g.producer_bias)):
            value = np.asarray(weights[name], dtype=np.float64)
            offset = g.producer_offset if name == g.producer else 0.0
            divided = (value + offset) / (s[:, None] if g.producer_rows and name == g.producer else s) - offset
            weights[name] = divided.astype(np.float32)
        for c, w in zip(g.consumers, readers):
            weights[f"{c}.weight"] = (np.asarray(w, dtype=np.float64) * s[None, :]).astype(np.float32)
    return dataclasses.replace(model, weights=weights)

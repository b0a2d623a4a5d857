"""A model as one engine run holds it: each linear layer's bytes at its bits, the float tensors,
and the values they stand for (the weights the float64 reference runs with).

Linear layers are quantized exactly as the matmul sweep's weights (precision.held.hold_weights:
blockwise along K, the harness's scales and zero points), so every engine gets the same values.
Embeddings, layer norms and biases stay float32.

Page tensor names: Hugging Face's for float tensors (``embeddings.word_embeddings.weight``, ...),
``<layer>.w`` / ``.scales`` / ``.zero_points`` / ``.bias`` for a linear layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..precision.held import HeldWeights, hold_weights
from ..prepared_caches import per_configuration
from ..precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ..vocabulary import PER_CHANNEL_BLOCK
from .rules import LayerPrecision
from .source import LoadedModel


@dataclass(frozen=True)
class HeldLayer:
    precision: LayerPrecision
    held: HeldWeights

    @property
    def name(self) -> str:
        return self.precision.layer.name

    @property
    def bias_name(self) -> str:
        return f"{self.name}.bias"


@dataclass(frozen=True)
class HeldModel:
    model: LoadedModel
    layers: tuple[HeldLayer, ...]
    unsigned: bool

    @property
    def float_names(self) -> list[str]:
        """Float32 tensors besides the linear weights: embeddings, layer norms, biases."""
        linear = {f"{layer.name}.weight" for layer in self.layers}
        return [n for n in self.model.weights if n not in linear]

    def tensors(self) -> dict[str, bytes]:
        out = {n: np.ascontiguousarray(self.model.weights[n], dtype="<f4").tobytes() for n in self.float_names}
        for layer in self.layers:
            out |= {f"{layer.name}.{part}": data for part, data in layer.held.tensors.items()}
        return out

    def exec_weights(self) -> dict[str, np.ndarray]:
        """The weights as held (dequantized values for quantized layers): the reference's input."""
        out = dict(self.model.weights)
        for layer in self.layers:
            out[f"{layer.name}.weight"] = np.asarray(layer.held.w_exec)
        return out

    @property
    def weight_bytes(self) -> int:
        """Every byte of parameters this run hands the engine (float tensors included)."""
        return (sum(self.model.weights[n].size * 4 for n in self.float_names)
                + sum(layer.held.weight_bytes for layer in self.layers))

    @property
    def weight_bytes_f32(self) -> int:
        return sum(v.size * 4 for v in self.model.weights.values())


LayerMoments = Callable[[tuple[str, ...]], dict[str, np.ndarray]]
"""Layer names -> E[x x^T] of each one's input over a calibration set (models/calibration.py)."""


@per_configuration(maxsize=4)
def hold_model(model: LoadedModel, plan: tuple[LayerPrecision, ...], unsigned: bool = False,
               quantizer: str = DEFAULT_QUANTIZER, moments_of: LayerMoments | None = None) -> HeldModel:
    """Every linear layer held at its planned bits; ``quantizer`` makes the blockwise 8/4/2-bit
    layers' codes (per-channel layers are the default's, symmetric). A calibrated quantizer (gptq)
    sees each layer's input second moment from ``moments_of`` (its kind's calibration set, never
    the inputs a figure is scored on)."""
    quantized = [p for p in plan if p.bits <= 8 and p.block_size != PER_CHANNEL_BLOCK]
    moments: dict[str, np.ndarray] = {}
    if quantized and QUANTIZERS[quantizer].calibrated:
        if moments_of is None:
            raise ValueError(f"the {quantizer} quantizer needs a calibration set apart from the evaluated inputs")
        moments = moments_of(tuple(p.layer.name for p in quantized))
    layers = tuple(HeldLayer(p, hold_weights(model.weights[f"{p.layer.name}.weight"], p.bits, p.block_size, unsigned,
                                             quantizer if p in quantized else DEFAULT_QUANTIZER,
                                             moments.get(p.layer.name)))
                   for p in plan)
    return HeldModel(model, layers, unsigned)

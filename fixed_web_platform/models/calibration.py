"""Static int8 activations of a whole model (W8A8 / W4A8): the input of each linear layer gets one
calibrated scale and zero point, per tensor, from an observer that watched it over calibration texts.

- Calibration runs the float model (transformers' BertModel with the original fp32 weights, as
  PyTorch's static quantization calibrates) over the calibration texts, with a forward pre-hook on
  every linear layer that shows the observer the layer's input at the real tokens only (padding
  positions never reach an output: attention masks them as keys and pooling skips them).
- The texts are the built-in calibration set (data/calibration_sentences.txt: none of them is in
  the evaluation set) or the user's ``--calibration FILE``; batches of the run's shape.
- Scale and zero point come from ``Observer.qparams`` (``quant.qparams_from_range``, the rule the
  weights use), signed int8, and the scale is rounded to float32 once here: the page, the WGSL
  kernel and the float64 reference all use that float32 value.
- Which layers: those whose weights are 8- or 4-bit (``ACT8_WEIGHT_BITS``, the same pairing the
  matmul sweep has); layers at other bits keep float activations.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..precision.observers import make_observer
from ..vocabulary import ACT8_WEIGHT_BITS
from .inputs import read_texts, tokenize
from .rules import LayerPrecision
from .source import LoadedModel, tokenizer

CALIBRATION_SET = Path(__file__).parent / "data" / "calibration_sentences.txt"
CALIBRATION_NAME = "builtin-calibration"


def builtin_calibration_texts() -> tuple[str, ...]:
    return read_texts(CALIBRATION_SET)


@dataclass(frozen=True)
class ActivationQuant:
    """x = (q - zero_point) * scale, q int8, for the whole input tensor of one linear layer."""

    scale: float
    """float32-representable (rounded once, here)."""
    zero_point: int

    def to_json(self) -> dict[str, float | int]:
        return {"scale": self.scale, "zero_point": self.zero_point}


def quantized_inputs(plan: tuple[LayerPrecision, ...]) -> tuple[str, ...]:
    """The layers whose inputs int8 activations quantize: 8- and 4-bit weights."""
    return tuple(p.layer.name for p in plan if p.bits in ACT8_WEIGHT_BITS)


@functools.lru_cache(maxsize=8)
def calibrate(model: LoadedModel, texts: tuple[str, ...], batch_size: int, seq_len: int, observer: str,
              layers: tuple[str, ...]) -> dict[str, ActivationQuant]:
    """Scale and zero point of each named layer's input, from ``observer`` over ``texts``."""
    import torch

    net = model.module()
    modules = model.architecture.linear_modules(net)
    missing = [name for name in layers if name not in modules]
    if missing:
        raise ValueError(f"layer {missing[0]} is not a module of the model")
    batches = tokenize(tokenizer(model.resolved), texts, batch_size, seq_len)
    observers = {name: make_observer(observer) for name in layers}
    shares = {}  # layer -> the layer whose input it receives (Q, K and V: one tensor, one observer)
    real_tokens: list[np.ndarray] = []  # the current batch's [B, S] mask of real tokens
    seen: list[tuple[object, str]] = []  # the current batch's inputs (kept alive: identity is safe)

    def watch(name: str):
        def hook(_module, args):
            first = next((owner for tensor, owner in seen if tensor is args[0]), None)
            if first is not None:
                shares[name] = first
                return
            seen.append((args[0], name))
            observers[name].observe(args[0].detach().double().numpy()[real_tokens[-1]])
        return hook

    handles = [modules[name].register_forward_pre_hook(watch(name)) for name in layers]
    try:
        with torch.no_grad():
            for p in range(batches.passes):
                mask = batches.attention_mask[p].astype(bool)
                texts_here = np.arange(p * batch_size, (p + 1) * batch_size) < batches.count
                real_tokens.append(mask & texts_here[:, None])  # the last batch's filler is not seen twice
                seen.clear()
                net(input_ids=torch.from_numpy(batches.input_ids[p].astype(np.int64)),
                    attention_mask=torch.from_numpy(batches.attention_mask[p].astype(np.int64)),
                    token_type_ids=torch.from_numpy(batches.token_type_ids[p].astype(np.int64)))
    finally:
        for handle in handles:
            handle.remove()
    out = {}
    for name, obs in observers.items():
        if name not in shares:
            scale, zero_point = obs.qparams(8)
            out[name] = ActivationQuant(float(np.float32(scale.reshape(-1)[0])), int(zero_point.reshape(-1)[0]))
    return {name: out[shares.get(name, name)] for name in layers}

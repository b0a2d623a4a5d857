"""The harness's own float64 forward of a BERT encoder in numpy: the kernel-correctness reference.

Given the weights a run actually holds (dequantized where quantized), and for int8-activation
runs the calibrated scale and zero point of each quantized layer's input (quantize -> dequantize,
round half to even, clamped to int8, as WebNN's quantizeLinear and the WGSL kernels do), this is
what a correct engine computes. It is checked against PyTorch (transformers) in the tests to 1e-5.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

from .. import int8
from ..base import ActQuant
from .config import BertConfig

MASKED = -1e30
"""Added to attention scores of padded keys before the softmax (exp underflows to 0)."""


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def hidden_states(cfg: BertConfig, weights: dict[str, np.ndarray], input_ids: np.ndarray,
                  attention_mask: np.ndarray, token_type_ids: np.ndarray | None = None,
                  act_quant: ActQuant | None = None) -> np.ndarray:
    """Last hidden state [B, S, H] in float64."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    b, s = input_ids.shape
    if token_type_ids is None:
        token_type_ids = np.zeros_like(input_ids)
    x = (w["embeddings.word_embeddings.weight"][input_ids]
         + w["embeddings.position_embeddings.weight"][np.arange(s)][None]
         + w["embeddings.token_type_embeddings.weight"][token_type_ids])
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], cfg.eps)
    bias = np.where(attention_mask[:, None, None, :] > 0, 0.0, MASKED)  # [B, 1, 1, S]
    h, d = cfg.heads, cfg.head_dim

    def linear(name: str, v: np.ndarray) -> np.ndarray:
        return int8.linear(v, w[f"{name}.weight"], name, act_quant, w[f"{name}.bias"])

    for i in range(cfg.layers):
        p = f"encoder.layer.{i}."
        q = linear(p + "attention.self.query", x).reshape(b, s, h, d).transpose(0, 2, 1, 3)
        k = linear(p + "attention.self.key", x).reshape(b, s, h, d).transpose(0, 2, 1, 3)
        v = linear(p + "attention.self.value", x).reshape(b, s, h, d).transpose(0, 2, 1, 3)
        probs = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, h * d)
        x = layer_norm(linear(p + "attention.output.dense", ctx) + x,
                       w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], cfg.eps)
        inter = gelu(linear(p + "intermediate.dense", x))
        x = layer_norm(linear(p + "output.dense", inter) + x,
                       w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], cfg.eps)
    return x

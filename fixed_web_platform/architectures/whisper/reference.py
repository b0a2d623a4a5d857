"""The harness's own float64 Whisper in numpy: the kernel-correctness reference (given the weights
a run holds, dequantized where quantized). Checked against PyTorch (transformers'
WhisperForConditionalGeneration) in the tests.

``encode``: log-mel features [mels, frames] -> the encoder's output [positions, d_model];
``Decoder``: the decoder with a self-attention KV cache and the cross-attention keys and values
computed once from the encoder's output; ``greedy``: the transcript's ids (decoding.py's rule).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.special import erf

from .. import int8
from ..base import ActQuant
from . import decoding
from .config import HEAD, WhisperConfig

EPS = 1e-5


def layer_norm(x: np.ndarray, w: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w[f"{name}.weight"] + w[f"{name}.bias"]


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def linear(x: np.ndarray, w: Mapping[str, np.ndarray], name: str, act_quant: ActQuant | None = None) -> np.ndarray:
    """x @ W^T + b, with int8 activations where ``act_quant`` names the layer (architectures/int8.py)."""
    return int8.linear(x, w[f"{name}.weight"], name, act_quant, w.get(f"{name}.bias"))


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int, causal_from: int | None = None) -> np.ndarray:
    """softmax(q k^T / sqrt(head_dim)) v per head; q [t, d], k and v [s, d]. ``causal_from``: the
    position of q's first row (row r sees keys 0..causal_from + r)."""
    t, d = q.shape
    hd = d // heads
    qh = q.reshape(t, heads, hd).transpose(1, 0, 2)
    kh = k.reshape(-1, heads, hd).transpose(1, 0, 2)
    vh = v.reshape(-1, heads, hd).transpose(1, 0, 2)
    scores = qh @ kh.transpose(0, 2, 1) / np.sqrt(hd)
    if causal_from is not None:
        keys = np.arange(k.shape[0])[None, :]
        rows = causal_from + np.arange(t)[:, None]
        scores = np.where(keys <= rows, scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ vh).transpose(1, 0, 2).reshape(t, d)


def conv1d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """x [channels, frames], kernel 3, padding 1 -> [out channels, frames / stride]."""
    padded = np.pad(x, ((0, 0), (1, 1)))
    frames = (x.shape[1] + 2 - 3) // stride + 1
    out = sum(np.asarray(weight[:, :, j], np.float64) @ padded[:, j:j + stride * (frames - 1) + 1:stride]
              for j in range(3))
    return out + np.asarray(bias, np.float64)[:, None]


def encode(cfg: WhisperConfig, w: Mapping[str, np.ndarray], features: np.ndarray,
           act_quant: ActQuant | None = None) -> np.ndarray:
    x = gelu(conv1d(np.asarray(features, np.float64), w["model.encoder.conv1.weight"],
                    w["model.encoder.conv1.bias"], 1))
    x = gelu(conv1d(x, w["model.encoder.conv2.weight"], w["model.encoder.conv2.bias"], 2)).T
    x = x + w["model.encoder.embed_positions.weight"][:x.shape[0]]
    for i in range(cfg.encoder_layers):
        pre = f"model.encoder.layers.{i}."
        h = layer_norm(x, w, pre + "self_attn_layer_norm")
        q, k, v = (linear(h, w, pre + f"self_attn.{p}_proj", act_quant) for p in "qkv")
        ctx = attention(q, k, v, cfg.heads)
        x = x + linear(ctx, w, pre + "self_attn.out_proj", act_quant)
        h = layer_norm(x, w, pre + "final_layer_norm")
        x = x + linear(gelu(linear(h, w, pre + "fc1", act_quant)), w, pre + "fc2", act_quant)
    return layer_norm(x, w, "model.encoder.layer_norm")


class Decoder:
    """Whisper's decoder over one clip's encoder output, with a KV cache (and int8 activations
    where ``act_quant`` names layers)."""

    def __init__(self, cfg: WhisperConfig, w: Mapping[str, np.ndarray], encoded: np.ndarray,
                 act_quant: ActQuant | None = None) -> None:
        self.cfg, self.w = cfg, {k: np.asarray(v, np.float64) for k, v in w.items()
                                 if k.startswith(("model.decoder.", HEAD))}
        self.act_quant = act_quant
        self.cross = [(linear(encoded, self.w, f"model.decoder.layers.{i}.encoder_attn.k_proj", act_quant),
                       linear(encoded, self.w, f"model.decoder.layers.{i}.encoder_attn.v_proj", act_quant))
                      for i in range(cfg.decoder_layers)]
        d = cfg.d_model
        self.keys = [np.zeros((0, d)) for _ in range(cfg.decoder_layers)]
        self.values = [np.zeros((0, d)) for _ in range(cfg.decoder_layers)]

    @property
    def length(self) -> int:
        return self.keys[0].shape[0]

    def step(self, ids: list[int] | np.ndarray) -> np.ndarray:
        """Logits [len(ids), vocab] of the next ids, their keys and values added to the cache."""
        cfg, w, pos, aq = self.cfg, self.w, self.length, self.act_quant
        ids = np.asarray(ids, dtype=np.int64)
        x = w["model.decoder.embed_tokens.weight"][ids] + w["model.decoder.embed_positions.weight"][pos:pos + len(ids)]
        for i in range(cfg.decoder_layers):
            pre = f"model.decoder.layers.{i}."
            h = layer_norm(x, w, pre + "self_attn_layer_norm")
            self.keys[i] = np.concatenate([self.keys[i], linear(h, w, pre + "self_attn.k_proj", aq)])
            self.values[i] = np.concatenate([self.values[i], linear(h, w, pre + "self_attn.v_proj", aq)])
            ctx = attention(linear(h, w, pre + "self_attn.q_proj", aq), self.keys[i], self.values[i], cfg.heads, pos)
            x = x + linear(ctx, w, pre + "self_attn.out_proj", aq)
            h = layer_norm(x, w, pre + "encoder_attn_layer_norm")
            ctx = attention(linear(h, w, pre + "encoder_attn.q_proj", aq), *self.cross[i], cfg.heads)
            x = x + linear(ctx, w, pre + "encoder_attn.out_proj", aq)
            h = layer_norm(x, w, pre + "final_layer_norm")
            x = x + linear(gelu(linear(h, w, pre + "fc1", aq)), w, pre + "fc2", aq)
        return linear(layer_norm(x, w, "model.decoder.layer_norm"), w, HEAD, aq)


def greedy(cfg: WhisperConfig, w: Mapping[str, np.ndarray], encoded: np.ndarray,
           max_tokens: int, act_quant: ActQuant | None = None) -> tuple[list[int], np.ndarray]:
    """The transcript's ids (end of text not included) and the logits of the first choice."""
    decoder = Decoder(cfg, w, encoded, act_quant)
    logits = decoder.step(list(cfg.prompt))[-1]
    first_logits, ids = logits, []
    while len(ids) < max_tokens:
        token = decoding.choose(cfg, logits, first=not ids)
        if token == cfg.eot:
            break
        ids.append(token)
        if len(ids) < max_tokens:
            logits = decoder.step([token])[-1]
    return ids, first_logits

"""The harness's own float64 forward of a Gemma 3 text decoder in numpy, with a KV cache: the
kernel-correctness reference (given the weights a run holds, dequantized where quantized).
Checked against PyTorch (transformers' Gemma3ForCausalLM) in the tests, sliding windows, per-head
query/key norms and grouped-query attention included. Written apart from graph.py, so an error in
either shows as kernel error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .. import int8
from ..base import ActQuant
from ..kv_cache import KVCache
from .config import HEAD, Gemma3Config


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """Gemma's RMSNorm: scaled by (1 + weight)."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * (1.0 + np.asarray(weight, np.float64))


def rope_tables(head_dim: int, theta: float, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, head_dim / 2] of the rotary embedding with base ``theta`` (float64)."""
    half = head_dim // 2
    inv_freq = 1.0 / (theta ** (np.arange(0, half, dtype=np.float64) * 2.0 / head_dim))
    angles = np.arange(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _mask(start: int, t: int, window: int) -> np.ndarray:
    """Additive mask [t, start + t]: query start + r sees keys up to itself, and with a window only
    the last ``window`` of them (transformers' sliding window: key > query - window)."""
    query = np.arange(start, start + t)[:, None]
    key = np.arange(start + t)[None, :]
    seen = key <= query
    if window:
        seen &= key > query - window
    return np.where(seen, 0.0, -np.inf)


def forward(cfg: Gemma3Config, weights: Mapping[str, np.ndarray], ids: Sequence[int] | np.ndarray,
            cache: KVCache | None = None, act_quant: ActQuant | None = None) -> tuple[np.ndarray, KVCache]:
    """Logits [len(ids), vocab] (float64) of the tokens ``ids`` following ``cache``'s positions,
    and the cache with them added (a new object; the one given is not changed); with int8
    activations where ``act_quant`` names layers (int8.linear)."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    past = cache or KVCache()
    start, t = past.length, len(ids)
    tables = {sliding: rope_tables(cfg.head_dim, cfg.rope_local if sliding else cfg.rope_global, start + t)
              for sliding in (False, True)}
    x = np.asarray(weights["model.embed_tokens.weight"])[ids].astype(np.float64) * cfg.embed_scale  # rows first
    group = cfg.heads // cfg.kv_heads
    grown = KVCache()

    def linear(name: str, v: np.ndarray) -> np.ndarray:
        return int8.linear(v, weights[f"{name}.weight"], name, act_quant, weights.get(f"{name}.bias"))

    for i in range(cfg.layers):
        pre = f"model.layers.{i}."
        sliding = cfg.sliding[i]
        cos, sin = (table[start:] for table in tables[sliding])
        h = rms_norm(x, weights[pre + "input_layernorm.weight"], cfg.eps)
        q = linear(pre + "self_attn.q_proj", h).reshape(t, cfg.heads, cfg.head_dim).transpose(1, 0, 2)
        k = linear(pre + "self_attn.k_proj", h).reshape(t, cfg.kv_heads, cfg.head_dim).transpose(1, 0, 2)
        v = linear(pre + "self_attn.v_proj", h).reshape(t, cfg.kv_heads, cfg.head_dim).transpose(1, 0, 2)
        q = _rotate(rms_norm(q, weights[pre + "self_attn.q_norm.weight"], cfg.eps), cos, sin)
        k = _rotate(rms_norm(k, weights[pre + "self_attn.k_norm.weight"], cfg.eps), cos, sin)
        if past.keys:
            k = np.concatenate([past.keys[i], k], axis=1)
            v = np.concatenate([past.values[i], v], axis=1)
        grown.keys.append(k)
        grown.values.append(v)
        kk, vv = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # query head h reads kv head h // group
        scores = q @ kk.transpose(0, 2, 1) / np.sqrt(cfg.head_dim) + _mask(start, t, cfg.sliding_window if sliding else 0)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        ctx = (scores / scores.sum(axis=-1, keepdims=True)) @ vv
        y = linear(pre + "self_attn.o_proj", ctx.transpose(1, 0, 2).reshape(t, cfg.q_dim))
        x = x + rms_norm(y, weights[pre + "post_attention_layernorm.weight"], cfg.eps)
        h = rms_norm(x, weights[pre + "pre_feedforward_layernorm.weight"], cfg.eps)
        ffn = gelu_tanh(linear(pre + "mlp.gate_proj", h)) * linear(pre + "mlp.up_proj", h)
        y = linear(pre + "mlp.down_proj", ffn)
        x = x + rms_norm(y, weights[pre + "post_feedforward_layernorm.weight"], cfg.eps)
    h = rms_norm(x, weights["model.norm.weight"], cfg.eps)
    return linear(HEAD, h), grown


"""The harness's own float64 forward of a Llama-family decoder in numpy, with a KV cache: the
kernel-correctness reference (given the weights a run holds, dequantized where quantized).
Checked against PyTorch (transformers' LlamaForCausalLM) in the tests, KV cache and grouped-query
attention included.

One sequence at a time (decoders run one prompt here): ``forward`` takes the next token ids and
the cache of what came before, and returns their logits and the cache grown by them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .. import int8
from ..base import ActQuant
from ..kv_cache import KVCache
from .config import HEAD, LlamaConfig


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


def rope_tables(cfg: LlamaConfig, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, head_dim / 2] of Llama's rotary embedding (float64)."""
    half = cfg.head_dim // 2
    inv_freq = 1.0 / (cfg.rope_theta ** (np.arange(0, half, dtype=np.float64) * 2.0 / cfg.head_dim))
    angles = np.arange(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [heads, t, head_dim] rotated pairwise (i, i + head_dim/2), as transformers' rotate_half."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def forward(cfg: LlamaConfig, weights: Mapping[str, np.ndarray], ids: Sequence[int] | np.ndarray,
            cache: KVCache | None = None, act_quant: ActQuant | None = None) -> tuple[np.ndarray, KVCache]:
    """Logits [len(ids), vocab] (float64) of the tokens ``ids`` following ``cache``'s positions,
    and the cache with them added (a new object; the one given is not changed); with int8
    activations where ``act_quant`` names layers (int8.linear)."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    past = cache or KVCache()
    start, t = past.length, len(ids)
    cos, sin = rope_tables(cfg, start + t)
    cos, sin = cos[start:], sin[start:]
    x = np.asarray(weights["model.embed_tokens.weight"], dtype=np.float64)[ids]
    causal = np.triu(np.full((t, start + t), -np.inf), k=start + 1)
    group = cfg.heads // cfg.kv_heads
    grown = KVCache()

    def linear(name: str, v: np.ndarray) -> np.ndarray:
        return int8.linear(v, weights[f"{name}.weight"], name, act_quant, weights.get(f"{name}.bias"))

    for i in range(cfg.layers):
        pre = f"model.layers.{i}."
        h = rms_norm(x, weights[pre + "input_layernorm.weight"], cfg.eps)
        q = linear(pre + "self_attn.q_proj", h).reshape(t, cfg.heads, cfg.head_dim).transpose(1, 0, 2)
        k = linear(pre + "self_attn.k_proj", h).reshape(t, cfg.kv_heads, cfg.head_dim).transpose(1, 0, 2)
        v = linear(pre + "self_attn.v_proj", h).reshape(t, cfg.kv_heads, cfg.head_dim).transpose(1, 0, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if past.keys:
            k = np.concatenate([past.keys[i], k], axis=1)
            v = np.concatenate([past.values[i], v], axis=1)
        grown.keys.append(k)
        grown.values.append(v)
        kk, vv = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # query head h reads kv head h // group
        scores = q @ kk.transpose(0, 2, 1) / np.sqrt(cfg.head_dim) + causal
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        ctx = (scores / scores.sum(axis=-1, keepdims=True)) @ vv
        x = x + linear(pre + "self_attn.o_proj", ctx.transpose(1, 0, 2).reshape(t, cfg.q_dim))
        h = rms_norm(x, weights[pre + "post_attention_layernorm.weight"], cfg.eps)
        ffn = silu(linear(pre + "mlp.gate_proj", h)) * linear(pre + "mlp.up_proj", h)
        x = x + linear(pre + "mlp.down_proj", ffn)
    h = rms_norm(x, weights["model.norm.weight"], cfg.eps)
    return linear(HEAD, h), grown


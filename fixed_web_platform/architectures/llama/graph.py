"""Llama's forward passes as ops (architectures/ops.py), for the generate loop: ``prefill`` (the
prompt's rows into the KV cache, the greedy next id from the last row), ``decode`` (one row at the
position the cache has reached) and ``score`` (an evaluation text's rows from position 0, every
row's logits kept). Per layer: RMS norm (adding the previous branch's output ``y`` into the
residual stream ``x`` first), q/k/v, RoPE, the keys and values into the cache, causal
grouped-query attention over it, o_proj, RMS norm, SiLU-gated feed-forward, down_proj; then the
final norm and the LM head."""

from __future__ import annotations

import numpy as np

from ..ops import Argmax, Attention, Embed, GatedAct, Graph, KvWrite, Linear, Norm, Op, Pass, Rope
from .config import HEAD, LlamaConfig
from .reference import rope_tables


def _pass(name: str, cfg: LlamaConfig, rows: int, last: bool, eos: int) -> Pass:
    eps = float(cfg.eps)
    ops: list[Op] = [Embed("ids", "model.embed_tokens.weight", "x", rows, cfg.hidden, cfg.vocab)]
    bounds = []
    for i in range(cfg.layers):
        bounds.append(len(ops))
        pre = f"model.layers.{i}."
        cache = (f"cache.{i}.k", f"cache.{i}.v")
        ops += [
            Norm("rms", "x", "h", pre + "input_layernorm.weight", rows, cfg.hidden, eps, residual="y" if i else ""),
            Linear(pre + "self_attn.q_proj", "h", "q", rows),
            Linear(pre + "self_attn.k_proj", "h", "k", rows),
            Linear(pre + "self_attn.v_proj", "h", "v", rows),
            Rope("q", "k", "rope.cos", "rope.sin", rows, cfg.heads, cfg.kv_heads),
            KvWrite("k", "v", *cache, rows, cfg.kv_dim),
            Attention("cache", "q", *cache, "ctx", rows, cfg.heads, cfg.kv_heads, cfg.q_dim),
            Linear(pre + "self_attn.o_proj", "ctx", "y", rows),
            Norm("rms", "x", "h", pre + "post_attention_layernorm.weight", rows, cfg.hidden, eps, residual="y"),
            Linear(pre + "mlp.gate_proj", "h", "g", rows),
            Linear(pre + "mlp.up_proj", "h", "u", rows),
            GatedAct("g", "u", rows * cfg.intermediate),
            Linear(pre + "mlp.down_proj", "g", "y", rows),
        ]
    bounds.append(len(ops))
    ops += [Norm("rms", "x", "h", "model.norm.weight", rows, cfg.hidden, eps, residual="y", last=last),
            Linear(HEAD, "h", "logits", 1 if last else rows)]
    if last:
        ops.append(Argmax("logits", rows, cfg.vocab, suppress=eos))
    return Pass(name, rows, tuple(ops), tuple(bounds))


def generate(cfg: LlamaConfig, prompt_len: int, eval_len: int, context: int, eos: int = -1) -> Graph:
    """The three passes, and the RoPE tables for ``context`` positions (float32)."""
    cos, sin = rope_tables(cfg, context)
    passes = {"prefill": _pass("prefill", cfg, prompt_len, True, eos), "decode": _pass("decode", cfg, 1, True, eos),
              "score": _pass("score", cfg, eval_len, False, eos)}
    return Graph(passes, {"rope.cos": cos.astype(np.float32), "rope.sin": sin.astype(np.float32)})

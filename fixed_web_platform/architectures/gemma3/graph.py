"""Gemma 3's forward passes as ops (architectures/ops.py), for the generate loop: ``prefill``,
``decode`` and ``score`` as Llama's (architectures/llama/graph.py). Per layer: RMS norm (the
previous branch's normed output ``y`` added into the residual stream ``x`` first), q/k/v, each
query and key head RMS-normed in place, RoPE from the layer's own tables (local or global base),
the keys and values into the cache, causal grouped-query attention over it (within the sliding
window on sliding layers, where the context is longer than the window), o_proj, its output
normed in place; RMS norm, GELU-tanh-gated feed-forward, down_proj, its output normed in place;
then the final norm and the head. Every norm scales by (1 + weight); the embedding by sqrt(hidden)."""

from __future__ import annotations

import numpy as np

from ..ops import Argmax, Attention, Embed, GatedAct, Graph, KvWrite, Linear, Norm, Op, Pass, Rope
from .config import HEAD, Gemma3Config
from .reference import rope_tables

OFFSET = 1.0
"""Gemma's norms scale by (1 + weight)."""


def _rope(sliding: bool) -> tuple[str, str]:
    table = "rope.local" if sliding else "rope.global"
    return f"{table}.cos", f"{table}.sin"


def _pass(name: str, cfg: Gemma3Config, rows: int, last: bool, eos: int, context: int) -> Pass:
    eps, hidden = float(cfg.eps), cfg.hidden

    def norm(x: str, out: str, weight: str, n: int = rows, width: int = hidden, residual: str = "") -> Norm:
        return Norm("rms", x, out, weight, n, width, eps, residual=residual, offset=OFFSET)

    ops: list[Op] = [Embed("ids", "model.embed_tokens.weight", "x", rows, hidden, cfg.vocab, scale=cfg.embed_scale)]
    bounds = []
    for i in range(cfg.layers):
        bounds.append(len(ops))
        pre = f"model.layers.{i}."
        cache = (f"cache.{i}.k", f"cache.{i}.v")
        window = cfg.sliding_window if cfg.sliding[i] and context > cfg.sliding_window else 0
        ops += [
            norm("x", "h", pre + "input_layernorm.weight", residual="y" if i else ""),
            Linear(pre + "self_attn.q_proj", "h", "q", rows),
            Linear(pre + "self_attn.k_proj", "h", "k", rows),
            Linear(pre + "self_attn.v_proj", "h", "v", rows),
            norm("q", "q", pre + "self_attn.q_norm.weight", rows * cfg.heads, cfg.head_dim),
            norm("k", "k", pre + "self_attn.k_norm.weight", rows * cfg.kv_heads, cfg.head_dim),
            Rope("q", "k", *_rope(cfg.sliding[i]), rows, cfg.heads, cfg.kv_heads),
            KvWrite("k", "v", *cache, rows, cfg.kv_dim),
            Attention("cache", "q", *cache, "ctx", rows, cfg.heads, cfg.kv_heads, cfg.q_dim, window=window),
            Linear(pre + "self_attn.o_proj", "ctx", "y", rows),
            norm("y", "y", pre + "post_attention_layernorm.weight"),
            norm("x", "h", pre + "pre_feedforward_layernorm.weight", residual="y"),
            Linear(pre + "mlp.gate_proj", "h", "g", rows),
            Linear(pre + "mlp.up_proj", "h", "u", rows),
            GatedAct("g", "u", rows * cfg.intermediate, act="gelu_tanh"),
            Linear(pre + "mlp.down_proj", "g", "y", rows),
            norm("y", "y", pre + "post_feedforward_layernorm.weight"),
        ]
    bounds.append(len(ops))
    ops += [Norm("rms", "x", "h", "model.norm.weight", rows, hidden, eps, residual="y", last=last, offset=OFFSET),
            Linear(HEAD, "h", "logits", 1 if last else rows)]
    if last:
        ops.append(Argmax("logits", rows, cfg.vocab, suppress=eos))
    return Pass(name, rows, tuple(ops), tuple(bounds))


def generate(cfg: Gemma3Config, prompt_len: int, eval_len: int, context: int, eos: int = -1) -> Graph:
    """The three passes, and both RoPE tables for ``context`` positions (float32)."""
    tables = {}
    for sliding in (False, True):
        cos, sin = rope_tables(cfg.head_dim, cfg.rope_local if sliding else cfg.rope_global, context)
        names = _rope(sliding)
        tables |= {names[0]: cos.astype(np.float32), names[1]: sin.astype(np.float32)}
    passes = {"prefill": _pass("prefill", cfg, prompt_len, True, eos, context),
              "decode": _pass("decode", cfg, 1, True, eos, context),
              "score": _pass("score", cfg, eval_len, False, eos, context)}
    return Graph(passes, tables)

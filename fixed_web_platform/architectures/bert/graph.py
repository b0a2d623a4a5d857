"""BERT's forward pass as ops (architectures/ops.py), for the forward loop: embeddings + layer
norm, then per layer Q/K/V, self-attention under the padding mask, the output projection, residual
+ layer norm (post-norm), the GELU feed-forward, residual + layer norm; then mean pooling and L2
normalisation over the mask. Values: ``hidden`` (the residual stream, normalised in place),
``q``/``k``/``v``/``ctx``, ``y`` (a branch's output before its residual), ``inter``, ``pooled``;
the batch's inputs are ``pass.input_ids``, ``pass.token_type_ids``, ``pass.attention_mask``."""

from __future__ import annotations

from ..ops import Attention, Embed, Graph, Linear, Norm, Op, Pass, Pool
from .config import BertConfig


def forward(cfg: BertConfig, batch: int, seq: int) -> Graph:
    rows, hidden, eps = batch * seq, cfg.hidden, float(cfg.eps)

    def linear(layer: str, x: str, out: str, gelu: bool = False) -> Linear:
        return Linear(layer, x, out, rows, gelu)

    def add_norm(prefix: str) -> Norm:
        return Norm("layer", "hidden", "hidden", f"{prefix}LayerNorm.weight", rows, hidden, eps,
                    bias=f"{prefix}LayerNorm.bias", residual="y")

    ops: list[Op] = [
        Embed("pass.input_ids", "embeddings.word_embeddings.weight", "hidden", rows, hidden, cfg.vocab,
              positions="embeddings.position_embeddings.weight", seq=seq, token_types="pass.token_type_ids",
              type_table="embeddings.token_type_embeddings.weight", type_vocab=cfg.type_vocab),
        Norm("layer", "hidden", "hidden", "embeddings.LayerNorm.weight", rows, hidden, eps,
             bias="embeddings.LayerNorm.bias"),
    ]
    for i in range(cfg.layers):
        pre = f"encoder.layer.{i}."
        ops += [
            linear(pre + "attention.self.query", "hidden", "q"),
            linear(pre + "attention.self.key", "hidden", "k"),
            linear(pre + "attention.self.value", "hidden", "v"),
            Attention("self", "q", "k", "v", "ctx", rows, cfg.heads, cfg.heads, hidden,
                      mask="pass.attention_mask", seq=seq),
            linear(pre + "attention.output.dense", "ctx", "y"),
            add_norm(pre + "attention.output."),
            linear(pre + "intermediate.dense", "hidden", "inter", gelu=True),
            linear(pre + "output.dense", "inter", "y"),
            add_norm(pre + "output."),
        ]
    ops.append(Pool("hidden", "pass.attention_mask", "pooled", batch, seq, hidden))
    return Graph({"forward": Pass("forward", rows, tuple(ops))})

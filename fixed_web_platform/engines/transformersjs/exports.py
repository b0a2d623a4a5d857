"""The fp32 graphs of a transformers.js folder, exported from the architecture's own passes (the
ops, engines/ort/torch_ops.py) by ``torch.onnx.export`` (dynamo, opset 18: the exporter of every
ORT graph here, engines/ort/onnx_export.py), with the inputs and outputs optimum's exports have,
which is what transformers.js feeds and reads. optimum-onnx, which made the folders on the Hub,
requires transformers < 4.58 and does not install beside the pinned transformers 5.23.

- encoder (``feature-extraction``): ``onnx/model.onnx``, ``input_ids``, ``attention_mask``,
  ``token_type_ids`` int64 [batch_size, sequence_length] -> ``last_hidden_state`` [batch_size,
  sequence_length, hidden]; the pipeline pools it.
- decoder (``text-generation``): ``onnx/model.onnx`` with a growing KV cache: ``input_ids``,
  ``attention_mask`` [1, total_sequence_length], ``position_ids`` int64 and per layer
  ``past_key_values.N.key`` / ``.value`` float32 [1, kv_heads, past_sequence_length, head_dim]
  -> ``logits`` [1, sequence_length, vocab] (every row: the graph has no ``num_logits_to_keep``)
  and ``present.N.key`` / ``.value``, the past with the new rows appended. Llama's ``score`` pass
  (every row's logits) over the cache: the KvWrite op appends, the attention reads the appended
  cache under ``attention_mask`` and causality (onnx_decoder.causal_bias). transformers.js starts
  a generation with a past of length 0.

Exports are cached by content (onnx_export.cached_export).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from ..ort import onnx_export
from ..ort.onnx_decoder import causal_bias
from ..ort.torch_ops import caches, pass_module

FORMAT = 1
"""Bumped when an exported graph changes for the same model (names, inputs, options)."""
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ENCODER_OUTPUT = "last_hidden_state"
DECODER_INPUTS = ("input_ids", "attention_mask", "position_ids")
LOGITS = "logits"


def _head(kind: str) -> dict[str, Any]:
    return {"tag": f"tjs-{kind}", "format": FORMAT, "opset": onnx_export.OPSET}


def _encoder(model: Any) -> bytes:
    """BERT's ``forward`` pass up to the last hidden state (the pipeline pools)."""
    import torch

    from ...architectures.ops import Pool

    cfg = model.config
    p = model.architecture.graph(cfg, batch=1, seq=1).passes["forward"]
    p = dataclasses.replace(p, ops=tuple(op for op in p.ops if not isinstance(op, Pool)))
    module = pass_module(model.module(), p, cfg.hidden // cfg.heads, [f"pass.{n}" for n in ENCODER_INPUTS], ["hidden"])
    batch = torch.export.Dim("batch_size", min=1, max=4096)
    seq = torch.export.Dim("sequence_length", min=2, max=cfg.max_positions)
    example = [torch.ones(2, 16, dtype=torch.long) for _ in ENCODER_INPUTS]
    return onnx_export.export(module, example, ENCODER_INPUTS, [ENCODER_OUTPUT],
                              [{0: batch, 1: seq} for _ in ENCODER_INPUTS])


def past_names(layers: int) -> list[str]:
    return onnx_export.layer_names("past_key_values", layers)


def present_names(layers: int) -> list[str]:
    return onnx_export.layer_names("present", layers)


def _decoder(model: Any) -> bytes:
    """Llama's ``score`` pass over a growing cache (the module doc)."""
    import torch

    cfg = model.config
    graph = model.architecture.graph(cfg, prompt_len=1, eval_len=1, context=cfg.max_positions)
    p = graph.passes["score"]
    cache = caches(p)
    module = pass_module(model.module(), p, cfg.head_dim, ["ids", "attention_mask", "position_ids", *cache],
                         [LOGITS, *cache], graph.tensors, causal_bias)
    rows, past = 3, 4
    example = [torch.arange(rows)[None] % cfg.vocab, torch.ones(1, past + rows, dtype=torch.long),
               torch.arange(past, past + rows)[None],
               *(torch.zeros(1, cfg.kv_heads, past, cfg.head_dim) for _ in cache)]
    free = torch.export.Dim.DYNAMIC  # named Dims cannot express total = past + sequence
    shapes = [{1: free}, {1: free}, {1: free}, *({2: free} for _ in cache)]
    dims = {"input_ids": [None, "sequence_length"], "position_ids": [None, "sequence_length"],
            "attention_mask": [None, "total_sequence_length"], LOGITS: [None, "sequence_length", None]}
    dims |= {n: [None, None, "past_sequence_length", None] for n in past_names(cfg.layers)}
    dims |= {n: [None, None, "total_sequence_length", None] for n in present_names(cfg.layers)}
    return onnx_export.export(module, example, [*DECODER_INPUTS, *past_names(cfg.layers)],
                              [LOGITS, *present_names(cfg.layers)], shapes, dims,
                              ("sequence_length", "total_sequence_length", "past_sequence_length"))


EXPORTERS = {"encoder": {"model": _encoder}, "decoder": {"model": _decoder}}
"""Workload kind -> the graphs its folder holds and how each is exported."""


@functools.lru_cache(maxsize=4)
def export_fp32(model: Any, kind: str) -> dict[str, Path]:
    """The fp32 graphs of ``model``'s folder for a workload ``kind``, by graph name, cached by
    content; ValueError for a kind transformers.js's folders are not made for here."""
    if kind not in EXPORTERS:
        raise ValueError(f"no transformers.js folder is made for {kind} workloads here")
    out = {}
    for graph, export in EXPORTERS[kind].items():
        head = _head(f"{kind}-{graph}")
        onnx_export.cached_export(model, head, functools.partial(export, model))
        out[graph] = onnx_export.cache_path(model, head)
    return out

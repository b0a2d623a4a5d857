"""Decoder LLMs for ONNX Runtime Web: the architecture's ``prefill`` pass (architectures/<name>/
graph.py) run op by op on the architecture's transformers module with the run's weights (torch_ops.py)
and exported with its KV cache by ``torch.onnx.export`` (dynamo, opset 18), then rewritten per
run so every linear layer holds THE SAME values the harness's own kernels get (onnx_linears.py).
RoPE reads the graph's cos/sin tables (float64, rounded to float32: the tables every engine
reads), held for every position the model has.

Why torch.onnx.export (docs/research/ort_decoder_export.md): Hugging Face's optimum-onnx, which
makes transformers.js's decoder files, requires transformers < 4.58 and fails to import with the
pinned 5.23; onnxruntime-genai's model builder works but needs its own environment (it pulls
another onnxruntime and an undeclared onnx-ir), quantizes with its own rounding and fuses q, k and
v into one projection, so the harness's per-layer bytes would have to be spliced into its fused
nodes. torch.onnx.export is the exporter both of them are built on, and it runs here as is.

The graph has a fixed-length KV cache (static shapes, as ORT's WebNN provider needs them and as
onnxruntime-genai's ``past_present_share_buffer`` runs a cache), one graph for every pass:

- inputs ``input_ids`` int32 [1, sequence], ``position_ids`` int32 [1, sequence],
  ``attention_mask`` int32 [1, past + sequence], ``logit_rows`` int32 [rows] (the rows whose
  logits are wanted: the last for a generation step, every row for scoring), and per layer
  ``past.N.key`` / ``past.N.value`` float32 [1, kv_heads, past, head_dim];
- outputs ``logits`` float32 [1, rows, vocab], ``next_id`` int32 [1, 1] (the greedy id of the last
  row, end of sequence suppressed in the graph) and ``present.N.key`` / ``present.N.value``, the
  cache with the new rows appended and the oldest ``sequence`` rows dropped (same shape as past).

The cache is kept right-aligned: after p tokens its last p rows hold them, the rest is masked by
``attention_mask`` (zeros), and ``position_ids`` carry the positions, so keys are rotated at
their true positions (transformers caches keys after RoPE). A prefill is a pass of the prompt's
rows over an all-masked cache, a decode step a pass of one row; the page fixes the free
dimensions per pass (``DIMS``). Exports are cached by content (onnx_export.py).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ...prepared_caches import per_configuration
from . import onnx_export
from .onnx_linears import RewrittenGraph, qdq_layers, rewrite_graph
from .torch_ops import caches, pass_module, present

OPSET = onnx_export.OPSET
EXPORT_FORMAT = 2
"""Bumped when the exported graph changes for the same inputs (wrapper, names, options)."""
INPUTS = ("input_ids", "position_ids", "attention_mask", "logit_rows")
LOGITS = "logits"
NEXT_ID = "next_id"
DIMS = {"sequence": "rows a pass feeds", "total": "past + sequence", "rows": "rows whose logits come back",
        "past": "positions the KV cache holds"}
"""The graph's free dimensions (ORT's freeDimensionOverrides names)."""


def past_names(layers: int) -> list[str]:
    return onnx_export.layer_names("past", layers)


def present_names(layers: int) -> list[str]:
    return onnx_export.layer_names("present", layers)


def _head(suppress: int) -> dict[str, Any]:
    return {"tag": "decoder", "format": EXPORT_FORMAT, "opset": OPSET, "suppress": suppress}


# ---------------------------------------------------------------------------------------------
# export (float32), cached


def causal_bias(env: dict[str, Any]) -> None:
    """``attention_bias`` from ``attention_mask``: row r (at cache position past + r) sees key j
    where the mask holds 1 and j <= past + r; float32's lowest elsewhere (as transformers' mask)."""
    import torch

    mask = env["attention_mask"]
    rows, total = env["ids"].shape[1], mask.shape[1]
    causal = torch.arange(total)[None, :] <= torch.arange(total - rows, total)[:, None]
    allowed = causal[None, None] & (mask[:, None, None, :] == 1)
    env["attention_bias"] = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)


def _pass_module(model: Any, suppress: int) -> Any:
    """The architecture's ``prefill`` pass (architectures/<name>/graph.py: the last norm keeps the
    rows ``logit_rows`` names, the argmax never picks ``suppress``) on transformers' module
    (torch_ops.py), with the fixed-length cache described above and RoPE tables for every position."""
    cfg = model.config
    graph = model.architecture.graph(cfg, prompt_len=1, eval_len=1, context=cfg.max_positions, eos=suppress)
    p = graph.passes["prefill"]
    inputs = ["ids", "position_ids", "attention_mask", "logit_rows", *caches(p)]
    outputs = [LOGITS, NEXT_ID, *map(present, caches(p))]
    return pass_module(model.module(), p, cfg.head_dim, inputs, outputs, graph.tensors, causal_bias)


def _example(cfg: Any, rows: int, past: int, p: int) -> list[Any]:
    import torch

    ids = torch.arange(rows, dtype=torch.int32)[None] % cfg.vocab
    positions = torch.arange(p, p + rows, dtype=torch.int32)[None]
    mask = torch.cat([torch.zeros(1, past - p, dtype=torch.int32), torch.ones(1, p + rows, dtype=torch.int32)], 1)
    logit_rows = torch.arange(1, rows, dtype=torch.int32)
    return [ids, positions, mask, logit_rows, *(torch.zeros(1, cfg.kv_heads, past, cfg.head_dim)
                                                for _ in range(2 * cfg.layers))]


def _export(model: Any, suppress: int) -> bytes:
    import torch

    cfg = model.config
    free = torch.export.Dim.DYNAMIC  # named Dims cannot express total = past + sequence
    shapes = [{1: free}, {1: free}, {1: free}, {0: free}, *({2: free} for _ in range(2 * cfg.layers))]
    dims = {"input_ids": [None, "sequence"], "position_ids": [None, "sequence"], "attention_mask": [None, "total"],
            "logit_rows": ["rows"], LOGITS: [None, "rows", None]}
    dims |= {name: [None, None, "past", None] for name in past_names(cfg.layers) + present_names(cfg.layers)}
    return onnx_export.export(_pass_module(model, suppress), _example(cfg, rows=3, past=6, p=2),
                              [*INPUTS, *past_names(cfg.layers)], [LOGITS, NEXT_ID, *present_names(cfg.layers)],
                              shapes, dims, DIMS)


def cache_path(model: Any, suppress: int, cache_dir: Path | None = None) -> Path:
    return onnx_export.cache_path(model, _head(suppress), cache_dir)


@functools.lru_cache(maxsize=2)
def export_fp32(model: Any, suppress: int, cache_dir: Path | None = None) -> bytes:
    """The float32 static-cache export of a loaded decoder (models/source.LoadedModel), with
    ``suppress`` (an end-of-sequence id, -1 for none) never chosen by ``next_id``; cached."""
    return onnx_export.cached_export(model, _head(suppress), lambda: _export(model, suppress), cache_dir)


# ---------------------------------------------------------------------------------------------
# the run's weights in the graph


DecoderModel = RewrittenGraph
"""The run's decoder: its one graph, rewritten (onnx_linears.rewrite_graph)."""


def rewrite(fp32: bytes, prepared: Any) -> DecoderModel:
    """The float32 export with every linear layer in the form the run holds it: MatMulNBits from
    unsigned bytes, or with int8 activations the int8 QDQ form with the calibrated parameters
    (onnx_linears.py)."""
    return rewrite_graph("decoder", fp32, prepared.held, qdq_layers(prepared))


def suppressed(prepared: Any) -> int:
    """The end-of-sequence id generation never picks (-1: the tokenizer has none)."""
    eos = prepared.tokens.eos
    return int(eos[0]) if eos else -1


@per_configuration(maxsize=2)
def decoder_model(prepared: Any) -> DecoderModel:
    """The run's ONNX decoder for a workloads.decoder.prepared.PreparedDecoder (prepared unsigned,
    or signed with int8 activations)."""
    return rewrite(export_fp32(prepared.held.model, suppressed(prepared)), prepared)

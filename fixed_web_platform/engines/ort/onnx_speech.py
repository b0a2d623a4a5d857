"""Whisper for ONNX Runtime Web: two graphs, the architecture's ``encoder`` and ``decode`` passes
(architectures/whisper/graph.py) run op by op on transformers' module with the run's weights
(torch_ops.py) and exported by ``torch.onnx.export`` (dynamo, opset 18, as the decoder's:
onnx_decoder.py says why not optimum-onnx), then rewritten per run so every linear layer holds
THE SAME values the harness's own kernels get (onnx_linears.py).

- ``encoder``: ``input_features`` float32 [1, mels, frames] -> ``encoder_out`` [1, positions,
  d_model] and every decoder layer's cross-attention keys and values ``cross.N.key`` /
  ``cross.N.value`` [1, positions, d_model], computed once per clip (static shapes).
- ``decoder``: one step with a fixed-length, right-aligned self-attention cache (as the decoder
  LLM's): inputs ``input_ids`` int32 [1, sequence], ``position_ids`` int32 [1, sequence] (rows of
  the learned position table), ``attention_bias`` float32 [1, 1, sequence, total] (total = past +
  sequence; 0 where a row may look, -1e9 at empty cache rows and later rows: made by the page, so
  the graph has no shape arithmetic a provider would leave to the CPU), ``suppress`` float32
  [vocab] (0, or -inf for ids never chosen: the page passes the first position's and the later
  positions' rule, architectures/whisper/decoding.py), the cross keys and values, and
  ``past.N.key`` / ``past.N.value`` float32 [1, heads, past, head_dim]; outputs ``logits``
  [1, vocab] of the last row, ``next_id`` int32 [1, 1] (its greedy id) and ``present.N.*`` (the
  cache with the new rows in and the oldest dropped, past's shape).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from . import onnx_export
from .onnx_linears import LayerNode, qdq_layers, require_unsigned, rewrite_graph
from .torch_ops import caches, crosses, pass_module, present

OPSET = onnx_export.OPSET
EXPORT_FORMATS = {"encoder": 3, "decoder": 6}
"""Bumped when a graph changes for the same inputs (wrapper, names, options)."""
ENCODER_INPUT = "input_features"
ENCODER_OUT = "encoder_out"
DECODER_INPUTS = ("input_ids", "position_ids", "attention_bias", "suppress")
DIMS = {"sequence": "rows a pass feeds", "total": "past + sequence", "past": "positions the cache holds"}


def cross_names(layers: int) -> list[str]:
    return onnx_export.layer_names("cross", layers)


def past_names(layers: int) -> list[str]:
    return onnx_export.layer_names("past", layers)


def present_names(layers: int) -> list[str]:
    return onnx_export.layer_names("present", layers)


def _encoder_module(model: Any) -> Any:
    """The architecture's ``encoder`` pass (architectures/whisper/graph.py) on transformers'
    module (torch_ops.py): the features in, the encoder's output and the cross keys and values out."""
    cfg = model.config
    graph = model.architecture.graph(cfg)
    crossed = crosses(graph.passes["decode"])
    return pass_module(model.module(), graph.passes["encoder"], cfg.head_dim, ["features"], ["enc", *crossed])


def _decoder_module(model: Any) -> Any:
    """The decoder step: the architecture's ``decode`` pass run on transformers' module
    (torch_ops.py), with the fixed-length cache described above."""
    cfg = model.config
    p = model.architecture.graph(cfg).passes["decode"]
    inputs = ["ids", "position_ids", "attention_bias", "suppress", *crosses(p), *caches(p)]
    return pass_module(model.module(), p, cfg.head_dim, inputs, ["last_logits", "next_id", *map(present, caches(p))])


def _export_encoder(model: Any) -> bytes:
    import torch

    cfg = model.config
    return onnx_export.export(_encoder_module(model), [torch.zeros(1, cfg.mels, cfg.frames)], [ENCODER_INPUT],
                              [ENCODER_OUT, *cross_names(cfg.decoder_layers)])


def _export_decoder(model: Any) -> bytes:
    import torch

    cfg = model.config
    layers, rows, past, p = cfg.decoder_layers, 3, 6, 2
    example = [torch.arange(rows, dtype=torch.int32)[None], torch.arange(p, p + rows, dtype=torch.int32)[None],
               torch.zeros(1, 1, rows, past + rows), torch.zeros(cfg.vocab),
               *(torch.zeros(1, cfg.source_positions, cfg.d_model) for _ in range(2 * layers)),
               *(torch.zeros(1, cfg.heads, past, cfg.head_dim) for _ in range(2 * layers))]
    free = torch.export.Dim.DYNAMIC
    shapes = [{1: free}, {1: free}, {2: free, 3: free}, None, *(None for _ in range(2 * layers)),
              *({2: free} for _ in range(2 * layers))]
    dims: dict[str, list[str | None]] = {"input_ids": [None, "sequence"], "position_ids": [None, "sequence"],
                                         "attention_bias": [None, None, "sequence", "total"]}
    dims |= {name: [None, None, "past", None] for name in past_names(layers) + present_names(layers)}
    return onnx_export.export(_decoder_module(model), example,
                              [*DECODER_INPUTS, *cross_names(layers), *past_names(layers)],
                              ["logits", "next_id", *present_names(layers)], shapes, dims, DIMS)


def _head(tag: str) -> dict[str, Any]:
    return {"tag": f"whisper-{tag}", "format": EXPORT_FORMATS[tag], "opset": OPSET}


@functools.lru_cache(maxsize=2)
def export_fp32(model: Any) -> tuple[bytes, bytes]:
    """The float32 encoder and decoder-step exports of a loaded Whisper (cached by content)."""
    return (onnx_export.cached_export(model, _head("encoder"), lambda: _export_encoder(model)),
            onnx_export.cached_export(model, _head("decoder"), lambda: _export_decoder(model)))


@dataclass(frozen=True)
class SpeechModel:
    encoder: bytes
    decoder: bytes
    layers: tuple[LayerNode, ...]
    """Every linear layer's node, in the plan's order (whichever graph holds it)."""
    weight_bytes: int
    encoder_layers: tuple[str, ...]
    """The layers the encoder graph holds (the others are the decoder step's)."""
    inventories: dict[str, Any]
    """Each graph's inventory (onnx_linears.RewrittenGraph), by graph name."""


@functools.lru_cache(maxsize=2)
def speech_model(prepared: Any) -> SpeechModel:
    """The run's two graphs for a workloads.speech.prepared.PreparedSpeech (prepared unsigned, or
    signed with int8 activations: the int8 QDQ form):
    the encoder holds the encoder's layers and the cross-attention keys and values, the decoder
    step every other layer."""
    from ...models.quantized import HeldModel

    held = prepared.held
    qdq = qdq_layers(prepared)
    if not qdq:
        require_unsigned(held)
    encoder_fp32, decoder_fp32 = export_fp32(held.model)
    in_encoder = [hl for hl in held.layers if hl.name.startswith("model.encoder.")
                  or hl.name.endswith(("encoder_attn.k_proj", "encoder_attn.v_proj"))]
    in_decoder = [hl for hl in held.layers if hl not in in_encoder]
    enc = rewrite_graph("encoder", encoder_fp32, HeldModel(held.model, tuple(in_encoder), held.unsigned), qdq)
    dec = rewrite_graph("decoder", decoder_fp32, HeldModel(held.model, tuple(in_decoder), held.unsigned), qdq)
    by_name = {layer.name: layer for layer in (*enc.layers, *dec.layers)}
    return SpeechModel(enc.data, dec.data, tuple(by_name[hl.name] for hl in held.layers),
                       enc.weight_bytes + dec.weight_bytes, tuple(hl.name for hl in in_encoder),
                       enc.inventories | dec.inventories)

"""Whole encoders for ONNX Runtime Web: the model exported to ONNX once, then rewritten per run
so every linear layer holds THE SAME values the harness's own kernels get.

1. ``export_fp32``: the architecture's forward pass (the encoder, mean pooling over the attention
   mask, L2 normalisation) run on transformers' BertModel with the run's weights (torch_ops.py),
   exported by ``torch.onnx.export`` (dynamo, opset 18) with
   dynamic batch and sequence dimensions (the page fixes them per job with
   ``freeDimensionOverrides``). Inputs ``input_ids``, ``attention_mask``, ``token_type_ids``
   (int64 [batch, sequence]), output ``embeddings`` (float32 [batch, hidden]). Cached by content
   (onnx_export.py), so a sweep exports once.
2. ``encoder_model``: each linear layer's weight MatMul (found as the MatMul feeding the Add of
   that layer's bias, its weight checked against the layer's W^T) is replaced by the run's form
   of it (onnx_linears.py: MatMulNBits for 8/4/2 bits, a float16 MatMul between Casts for 16, the
   exported MatMul for 32). The bias Add stays. ir_version is set explicitly (ORT Web 1.30 reads
   up to 13).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...formats import onnx_inventory
from ...workloads.encoder.prepared import PreparedModel
from . import onnx_export
from .onnx_linears import LayerNode, qdq_layers, replace_linears, require_unsigned, summary
from .torch_ops import MODULE, pass_module

OPSET = onnx_export.OPSET
EXPORT_FORMAT = 2
"""Bumped when the exported graph changes for the same inputs (wrapper, names, options)."""
EXPORT_HEAD = {"tag": "encoder", "format": EXPORT_FORMAT, "opset": OPSET}
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "embeddings"
BATCH_DIM = "batch"
SEQUENCE_DIM = "sequence"
WEIGHT_PREFIX = f"{MODULE}."
"""The exported initializers' prefix (the BertModel is the pass module's ``MODULE`` attribute)."""

__all__ = ["EncoderModel", "LayerNode", "encoder_model", "export_fp32", "rewrite", "summary"]


# ---------------------------------------------------------------------------------------------
# export (float32), cached


def export_key(model: Any) -> str:
    return onnx_export.export_key(model, EXPORT_HEAD)


def cache_path(model: Any, cache_dir: Path | None = None) -> Path:
    return onnx_export.cache_path(model, EXPORT_HEAD, cache_dir)


def _pass_module(model: Any) -> Any:
    """The architecture's ``forward`` pass (architectures/bert/graph.py: the encoder, then mean
    pooling over the mask and L2 normalisation) on transformers' BertModel (torch_ops.py)."""
    cfg = model.config
    p = model.architecture.graph(cfg, batch=1, seq=1).passes["forward"]
    return pass_module(model.module(), p, cfg.hidden // cfg.heads, [f"pass.{name}" for name in INPUT_NAMES], ["pooled"])


def _export(model: Any) -> bytes:
    import torch

    batch = torch.export.Dim(BATCH_DIM, min=1, max=4096)
    seq = torch.export.Dim(SEQUENCE_DIM, min=2, max=model.config.max_positions)
    example = [torch.ones(2, 16, dtype=torch.long) for _ in INPUT_NAMES]
    return onnx_export.export(_pass_module(model), example, INPUT_NAMES, [OUTPUT_NAME],
                              [{0: batch, 1: seq} for _ in INPUT_NAMES])


@functools.lru_cache(maxsize=2)
def export_fp32(model: Any, cache_dir: Path | None = None) -> bytes:
    """The float32 ONNX export of a loaded model (models/source.LoadedModel), cached by content."""
    return onnx_export.cached_export(model, EXPORT_HEAD, lambda: _export(model), cache_dir)


# ---------------------------------------------------------------------------------------------
# the run's weights in the graph


@dataclass(frozen=True)
class EncoderModel:
    data: bytes
    layers: tuple[LayerNode, ...]
    inventories: dict[str, Any]
    """The graph's inventory (formats/onnx_inventory.py), by graph name."""


def _find_weight_matmuls(graph: Any, layers: list[tuple[str, int, int]]) -> dict[str, int]:
    """Layer name -> index of its weight MatMul: the MatMul whose output feeds the Add of the
    layer's bias, with a [k, n] initializer as its second input."""
    inits = {t.name: t for t in graph.initializer}
    producer = {out: i for i, node in enumerate(graph.node) for out in node.output}
    found: dict[str, int] = {}
    for name, k, n in layers:
        bias = f"{WEIGHT_PREFIX}{name}.bias"
        adds = [node for node in graph.node if node.op_type == "Add" and bias in node.input]
        if len(adds) != 1:
            raise ValueError(f"ONNX graph: {len(adds)} Add nodes use {bias}, expected 1")
        other = [x for x in adds[0].input if x != bias]
        index = producer.get(other[0]) if len(other) == 1 else None
        node = graph.node[index] if index is not None else None
        if node is None or node.op_type != "MatMul" or node.input[1] not in inits:
            raise ValueError(f"ONNX graph: the bias Add of {name} is not fed by a weight MatMul")
        dims = tuple(inits[node.input[1]].dims)
        if dims != (k, n):
            raise ValueError(f"ONNX graph: {name}'s MatMul weight is {dims}, expected {(k, n)}")
        found[name] = index
    return found


def rewrite(fp32: bytes, prepared: Any) -> EncoderModel:
    """The float32 export with every linear layer in the form the run holds it (see module doc)."""
    import onnx

    qdq = qdq_layers(prepared)
    if not qdq:
        require_unsigned(prepared.held)
    proto = onnx.load_from_string(fp32)
    found = _find_weight_matmuls(proto.graph, [(hl.name, hl.precision.layer.k, hl.precision.layer.n)
                                               for hl in prepared.held.layers])
    layers = replace_linears(proto, found, prepared.held, qdq, seq_len=int(prepared.batches.input_ids.shape[2]))
    return EncoderModel(proto.SerializeToString(), layers, {"encoder": onnx_inventory.inventory(proto).to_json()})


@functools.lru_cache(maxsize=2)
def encoder_model(prepared: PreparedModel) -> EncoderModel:
    """The run's ONNX model for a workloads.encoder.prepared.PreparedModel (prepared with unsigned=True)."""
    return rewrite(export_fp32(prepared.held.model), prepared)

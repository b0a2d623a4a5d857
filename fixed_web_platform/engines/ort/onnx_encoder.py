"""Whole encoders for ONNX Runtime Web: the model exported to ONNX once, then rewritten per run
so every linear layer holds THE SAME values the harness's own kernels get.

1. ``export_fp32``: transformers' BertModel with the run's weights, plus mean pooling over the
   attention mask and L2 normalisation, exported by ``torch.onnx.export`` (dynamo, opset 18) with
   dynamic batch and sequence dimensions (the page fixes them per job with
   ``freeDimensionOverrides``). Inputs ``input_ids``, ``attention_mask``, ``token_type_ids``
   (int64 [batch, sequence]), output ``embeddings`` (float32 [batch, hidden]). Exports are cached
   by content hash (weights, config, opset, torch and transformers versions) in the git-ignored
   ``.cache/onnx/`` at the project root, written atomically, so a sweep exports once.
2. ``encoder_model``: each linear layer's weight MatMul (found as the MatMul feeding the Add of
   that layer's bias, its weight checked against the layer's W^T) is replaced by the run's form
   of it, built from the harness's bytes for that layer (``prepare_model(..., unsigned=True)``):
   8/4/2 bits: one ``com.microsoft`` ``MatMulNBits`` node (the harness's packed values, scales
   and zero points, turned into MatMulNBits initializers by onnx_matmul.py's helpers);
   16 bits: Cast to float16, a float16 MatMul with the harness's float16 weights, Cast back;
   32 bits: the exported float32 MatMul. The bias Add stays. The weight-bearing node is named
   after its layer (``encoder.layer.0.attention.self.query``) so ORT's placement log says where
   each layer ran. ir_version is set explicitly (ORT Web 1.30 reads up to 13).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...paths import PROJECT_ROOT
from ...workloads.encoder.prepared import PreparedModel
from .onnx_matmul import IR_VERSION, MS_DOMAIN, _pack_rows, _unpack_rows

OPSET = 18
"""The dynamo exporter at opset 18 is known to export BERT encoders here (ORT Web reads it)."""
CACHE_DIR = PROJECT_ROOT / ".cache" / "onnx"
"""Exported float32 models, by content hash (git-ignored)."""
EXPORT_FORMAT = 1
"""Bumped when the exported graph changes for the same inputs (wrapper, names, options)."""
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "embeddings"
BATCH_DIM = "batch"
SEQUENCE_DIM = "sequence"
WEIGHT_PREFIX = "bert."
"""The exported initializers' prefix (the BertModel is the wrapper's ``bert`` attribute)."""


# ---------------------------------------------------------------------------------------------
# export (float32), cached


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def export_key(model: Any) -> str:
    """Content hash of what determines the exported graph: weights, config, opset, versions."""
    h = hashlib.sha256()
    head = {"format": EXPORT_FORMAT, "opset": OPSET, "ir_version": IR_VERSION,
            "config": model.config.to_json(), **_versions()}
    h.update(json.dumps(head, sort_keys=True).encode())
    for name in sorted(model.weights):
        a = np.ascontiguousarray(model.weights[name], dtype="<f4")
        h.update(f"\n{name}:{a.shape}\n".encode())
        h.update(a.data)
    return h.hexdigest()


def _hf_module(model: Any) -> Any:
    """BertModel (eager attention) with the run's weights, pooled and L2-normalised in the graph."""
    import torch

    bert = model.module()

    class SentenceEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=-1, eps=1e-12)

    return SentenceEncoder().eval()


def _export(model: Any) -> bytes:
    import torch

    net = _hf_module(model)
    batch = torch.export.Dim(BATCH_DIM, min=1, max=4096)
    seq = torch.export.Dim(SEQUENCE_DIM, min=2, max=model.config.max_positions)
    dims = {0: batch, 1: seq}
    example = tuple(torch.ones(2, 16, dtype=torch.long) for _ in INPUT_NAMES)
    chatter = io.StringIO()
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "torchvision is not installed" and other export chatter
    with torch.no_grad(), contextlib.redirect_stdout(chatter), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(net, example, dynamo=True, opset_version=OPSET,
                                    input_names=list(INPUT_NAMES), output_names=[OUTPUT_NAME],
                                    dynamic_shapes={name: dims for name in INPUT_NAMES},
                                    optimize=True, verbose=False)
    quiet.setLevel(level)
    proto = program.model_proto
    proto.ir_version = IR_VERSION
    return proto.SerializeToString()


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def cache_path(model: Any, cache_dir: Path | None = None) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model.resolved.name)[:60]
    return (cache_dir or CACHE_DIR) / f"{safe}-{export_key(model)[:24]}.onnx"


@functools.lru_cache(maxsize=2)
def export_fp32(model: Any, cache_dir: Path | None = None) -> bytes:
    """The float32 ONNX export of a loaded model (models/source.LoadedModel), from the cache when
    one with the same content hash exists; a cache file that does not parse is exported anew."""
    import onnx

    path = cache_path(model, cache_dir)
    if path.is_file():
        data = path.read_bytes()
        try:
            onnx.load_from_string(data)
            return data
        except Exception:  # noqa: BLE001 - a damaged cache entry: export again
            pass
    data = _export(model)
    _write_atomically(path, data)
    return data


# ---------------------------------------------------------------------------------------------
# the run's weights in the graph


@dataclass(frozen=True)
class LayerNode:
    """One linear layer's weight-bearing node in the rewritten graph."""

    name: str
    """The layer's name; also the node's name in the graph (and in ORT's placement log)."""
    op: str
    """'MatMulNBits' or 'MatMul'."""
    weight_dtype: str
    """'MatMulNBits8'/'MatMulNBits4'/'MatMulNBits2', 'float16' or 'float32'."""
    weight_bytes: int
    """Bytes of the node's weight initializers (packed weights + scales + zero points)."""
    bits: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "weight_dtype": self.weight_dtype,
                "weight_bytes": self.weight_bytes, "bits": self.bits}


@dataclass(frozen=True)
class EncoderModel:
    data: bytes
    layers: tuple[LayerNode, ...]


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


def _nbits_initializers(held: Any, k: int, n: int, bits: int, block_size: int) -> tuple[np.ndarray, ...]:
    """MatMulNBits' B [n, blocks, blob], scales [n * blocks], zero points [n * ceil(blocks * bits / 8)]
    from the harness's unsigned packed bytes (as onnx_matmul.py does for one node)."""
    t = held.tensors
    blocks = k // block_size
    blob = block_size * bits // 8
    b = np.frombuffer(t["w"], dtype=np.uint8)[: n * blocks * blob].reshape(n, blocks, blob).copy()
    sc = np.frombuffer(t["scales"], dtype="<f4")[: n * blocks].copy()
    zp = _pack_rows(_unpack_rows(t["zero_points"], bits, n, blocks), bits).reshape(-1)
    return b, sc, zp


def rewrite(fp32: bytes, prepared: Any) -> EncoderModel:
    """The float32 export with every linear layer in the form the run holds it (see module doc)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if not prepared.held.unsigned:
        raise ValueError("ONNX models need the harness's unsigned bytes (prepare_model(..., unsigned=True))")
    proto = onnx.load_from_string(fp32)
    graph = proto.graph
    plan = {layer.name: layer for layer in prepared.held.layers}
    found = _find_weight_matmuls(graph, [(hl.name, hl.precision.layer.k, hl.precision.layer.n)
                                         for hl in prepared.held.layers])
    inits = {t.name: t for t in graph.initializer}
    weights = prepared.held.model.weights
    replacement: dict[int, list[Any]] = {}
    new_inits: list[Any] = []
    dropped: set[str] = set()
    facts: list[LayerNode] = []
    uses_ms = False
    for name, index in found.items():
        hl = plan[name]
        layer, bits, block = hl.precision.layer, hl.precision.bits, hl.precision.block_size
        k, n = layer.k, layer.n
        node = graph.node[index]
        a, out, w_name = node.input[0], node.output[0], node.input[1]
        exported = numpy_helper.to_array(inits[w_name])
        if not np.array_equal(exported, weights[f"{name}.weight"].T):
            raise ValueError(f"ONNX graph: the MatMul feeding {name}'s bias does not hold its weight")
        if bits == 32:
            node.name = name
            facts.append(LayerNode(name, "MatMul", "float32", k * n * 4, bits))
            continue
        dropped.add(w_name)
        if bits == 16:
            w16 = np.frombuffer(hl.held.tensors["w"], dtype="<f2")[: n * k].reshape(n, k).T.copy()
            w16_name = f"{name}.weight_t.float16"
            new_inits.append(numpy_helper.from_array(w16, w16_name))
            replacement[index] = [
                helper.make_node("Cast", [a], [f"{name}/input.float16"], to=TensorProto.FLOAT16,
                                 name=f"{name}/cast_in"),
                helper.make_node("MatMul", [f"{name}/input.float16", w16_name], [f"{name}/output.float16"],
                                 name=name),
                helper.make_node("Cast", [f"{name}/output.float16"], [out], to=TensorProto.FLOAT,
                                 name=f"{name}/cast_out"),
            ]
            facts.append(LayerNode(name, "MatMul", "float16", w16.nbytes, bits))
        elif bits in (8, 4, 2):
            if k % block:
                raise ValueError(f"layer {name}: K={k} is not a multiple of the block {block}")
            b, sc, zp = _nbits_initializers(hl.held, k, n, bits, block)
            names = [f"{name}.weight.q{bits}", f"{name}.weight.scales", f"{name}.weight.zero_points"]
            new_inits += [numpy_helper.from_array(arr, nm) for arr, nm in zip((b, sc, zp), names)]
            replacement[index] = [helper.make_node("MatMulNBits", [a, *names], [out], domain=MS_DOMAIN,
                                                   K=k, N=n, bits=bits, block_size=block, name=name)]
            facts.append(LayerNode(name, "MatMulNBits", f"MatMulNBits{bits}", b.nbytes + sc.nbytes + zp.nbytes,
                                   bits))
            uses_ms = True
        else:
            raise ValueError(f"layer {name}: bits {bits} has no ONNX form here")
    nodes = []
    for i, node in enumerate(graph.node):
        nodes.extend(replacement.get(i, [node]))
    del graph.node[:]
    graph.node.extend(nodes)
    still_used = {x for node in graph.node for x in node.input}
    kept = [t for t in graph.initializer if t.name not in dropped or t.name in still_used]
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    if uses_ms and not any(o.domain == MS_DOMAIN for o in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    proto.ir_version = IR_VERSION
    order = {hl.name: i for i, hl in enumerate(prepared.held.layers)}
    facts.sort(key=lambda f: order[f.name])
    return EncoderModel(proto.SerializeToString(), tuple(facts))


@functools.lru_cache(maxsize=2)
def encoder_model(prepared: PreparedModel) -> EncoderModel:
    """The run's ONNX model for a workloads.encoder.prepared.PreparedModel (prepared with unsigned=True)."""
    return rewrite(export_fp32(prepared.held.model), prepared)


def summary(layers: tuple[LayerNode, ...]) -> str:
    """'36 x MatMulNBits4' / '24 x MatMulNBits8, 12 x MatMulNBits4'."""
    counts = Counter(f.weight_dtype for f in layers)
    return ", ".join(f"{c} x {d}" for d, c in counts.items())

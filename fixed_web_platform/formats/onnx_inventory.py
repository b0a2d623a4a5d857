"""What an ONNX file holds, read from its nodes and initializers, not from its name: every node
that holds weights, by kind and bits, and the weight bytes by precision. A file whose name
promises a precision (transformers.js's ``model_q4.onnx``, a build called "int4") that most of its
weight matmuls do not hold is flagged (``promise``): microsoft/onnxruntime-genai#2095 found an
"int4" build with 192 of its 249 ``MatMulNBits`` at 8 bits.

A node holds weights when its weight input (``WEIGHT_INPUT``) is a constant (an initializer or a
``Constant`` node's output), or a constant passed through ``Cast``, ``Transpose``, ``Reshape`` or
``Unsqueeze`` (a float16 weight cast to float32 is a float16 weight). Kinds:

| kind                          | bits                    | weight-matmul |
|-------------------------------|-------------------------|---------------|
| ``MatMulNBits``               | its ``bits`` (default 4) | yes           |
| ``MatMulBnb4``                | 4 (``nf4`` or ``fp4``)  | yes           |
| ``MatMulInteger``             | its weight's type (8)   | yes           |
| ``DequantizeLinear`` (QDQ)    | its weight's type       | yes if it feeds a MatMul or Gemm |
| ``MatMul``, ``Gemm``          | its weight's type       | yes           |
| ``GatherBlockQuantized``      | its ``bits`` (default 4) | no (an embedding) |
| ``Gather``, ``Conv``, others  | its weight's type       | no            |

``DynamicQuantizeLinear`` holds no weight; it is counted (it makes the int8 activations
``MatMulInteger`` takes: transformers.js's ``q8``). Bytes are from the tensors' shapes and types,
so a file with external data is read without loading it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEIGHT_INPUT = {"MatMulNBits": 1, "MatMulBnb4": 1, "MatMulInteger": 1, "MatMul": 1, "Gemm": 1, "Conv": 1,
                "ConvTranspose": 1, "ConvInteger": 1, "DequantizeLinear": 0, "GatherBlockQuantized": 0, "Gather": 0}
"""The nodes that hold weights, and which input is the weight (the others' constants, such as
scales, zero points and a Gemm's bias, count with it)."""
PASS_THROUGH = ("Cast", "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Identity")
"""Ops a weight passes through on its way to the node that uses it."""
WEIGHT_MATMULS = ("MatMulNBits", "MatMulBnb4", "MatMulInteger", "MatMul", "Gemm")
COUNTED = ("DynamicQuantizeLinear",)
"""Nodes without weights that say how a file computes."""
BITS_BY_TYPE = {"float32": 32, "float16": 16, "bfloat16": 16, "float64": 64, "int8": 8, "uint8": 8,
                "int4": 4, "uint4": 4, "int16": 16, "uint16": 16, "int32": 32, "float8e4m3fn": 8, "float8e5m2": 8}
PROMISES = {"fp32": 32, "float32": 32, "fp16": 16, "float16": 16, "q8": 8, "int8": 8, "uint8": 8, "quantized": 8,
            "q4": 4, "q4f16": 4, "int4": 4, "bnb4": 4, "4bit": 4, "q2": 2, "int2": 2, "8bit": 8}
"""Name tokens that promise a precision (transformers.js's file suffixes, the harness's variant
names, common build names), by the bits most weight matmuls should hold."""
MAJORITY = 0.5
"""A promise is broken when fewer than this share of the weight matmuls hold the promised bits."""


@dataclass(frozen=True)
class WeightNode:
    op: str
    bits: int
    precision: str
    """What the weight is held as: a type ('float16', 'int8'), 'int<bits>' for packed codes, 'nf4'."""
    weight_bytes: int
    """Bytes of the node's constant inputs (codes, scales, zero points)."""
    matmul: bool


@dataclass(frozen=True)
class Inventory:
    nodes: tuple[WeightNode, ...]
    counted: tuple[tuple[str, int], ...]
    """Nodes without weights that say how the file computes (``COUNTED``), with their counts."""
    other_bytes: tuple[tuple[str, int], ...]
    """Bytes of constants no weight node holds (norms, biases, tables), by type."""
    largest: tuple[str, int] = ("", 0)
    """The largest single constant (name, bytes): an engine that holds each initializer in one
    buffer (ONNX Runtime's WebGPU provider) needs a buffer this large."""

    def kinds(self) -> Counter[str]:
        """'MatMulNBits/4' -> how many such nodes."""
        return Counter(f"{n.op}/{n.precision}" for n in self.nodes)

    def bytes_by_precision(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for n in self.nodes:
            total[n.precision] += n.weight_bytes
        for precision, size in self.other_bytes:
            total[precision] += size
        return dict(sorted(total.items(), key=lambda kv: -kv[1]))

    def matmul_bits(self) -> Counter[int]:
        """Bits -> how many weight matmuls hold them."""
        return Counter(n.bits for n in self.nodes if n.matmul)

    @property
    def dynamic(self) -> bool:
        """Whether the file quantizes activations at run time (``DynamicQuantizeLinear``)."""
        return any(op == "DynamicQuantizeLinear" for op, _ in self.counted)

    def matmul_precision(self) -> str:
        """What most weight matmuls hold their weights as ('int8', 'int4', 'float16'; '' for none)."""
        held = Counter(n.precision for n in self.nodes if n.matmul)
        return held.most_common(1)[0][0] if held else ""

    def text(self) -> str:
        """One line for a row: 'MatMulNBits/int4 x57, MatMulNBits/int8 x192, MatMul/float32 x1'."""
        kinds = sorted(self.kinds().items(), key=lambda kv: (-kv[1], kv[0]))
        return ", ".join([f"{k} x{n}" for k, n in kinds] + [f"{k} x{n}" for k, n in self.counted])

    def to_json(self) -> dict[str, Any]:
        return {"nodes": dict(sorted(self.kinds().items())), "counted": dict(self.counted),
                "weight_bytes": self.bytes_by_precision(), "largest": list(self.largest),
                "matmul_bits": {str(b): n for b, n in sorted(self.matmul_bits().items())}}


def combined(inventories: Any) -> Inventory:
    """Several files' inventories as one (a model of several graphs)."""
    parts = list(inventories)
    counted: Counter[str] = Counter()
    other: Counter[str] = Counter()
    for inv in parts:
        counted.update(dict(inv.counted))
        other.update(dict(inv.other_bytes))
    return Inventory(tuple(n for inv in parts for n in inv.nodes), tuple(sorted(counted.items())),
                     tuple(sorted(other.items())), max((inv.largest for inv in parts), key=lambda nb: nb[1],
                                                       default=("", 0)))


def largest_constant(docs: Mapping[str, Mapping[str, Any]]) -> tuple[str, int]:
    """The largest constant over graphs' inventories as ``Inventory.to_json`` gives them, by graph
    name: ('graph/constant', bytes), ('', 0) for none."""
    sizes = [(f"{graph}/{doc['largest'][0]}", int(doc["largest"][1])) for graph, doc in docs.items()]
    return max(sizes, key=lambda nb: nb[1], default=("", 0))


def _type_name(data_type: int) -> str:
    """onnx's type name in numpy's words ('float32', 'int8'; 'int4', 'uint4', which numpy lacks)."""
    from onnx import TensorProto, helper

    if data_type in (TensorProto.INT4, TensorProto.UINT4):
        return TensorProto.DataType.Name(data_type).lower()
    return str(helper.tensor_dtype_to_np_dtype(data_type))


def _nbytes(dims: Any, type_name: str) -> int:
    count = 1
    for d in dims:
        count *= int(d)
    if type_name in ("int4", "uint4"):
        return (count + 1) // 2
    import numpy as np

    return count * np.dtype(type_name).itemsize


def _attr(node: Any, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def all_graphs(graph: Any) -> list[Any]:
    """``graph`` and every subgraph its nodes hold (an If's branches, a Loop's body), depth first."""
    out = [graph]
    for node in graph.node:
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                out.extend(all_graphs(sub))
    return out


def inventory(model: Any) -> Inventory:
    """The inventory of an onnx ModelProto (loaded with or without its external data), subgraphs
    included (names are unique across an ONNX model's scopes, so they are read as one graph)."""
    graphs = all_graphs(model.graph)
    all_nodes = [node for g in graphs for node in g.node]
    constants: dict[str, tuple[str, int]] = {}  # name -> (type, bytes)
    for t in (t for g in graphs for t in g.initializer):
        kind = _type_name(t.data_type)
        constants[t.name] = (kind, _nbytes(t.dims, kind))
    for node in all_nodes:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and a.t.dims:
                    kind = _type_name(a.t.data_type)
                    constants[node.output[0]] = (kind, _nbytes(a.t.dims, kind))
    producer = {out: node for node in all_nodes for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in all_nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def source(name: str) -> str | None:
        """The constant ``name`` comes from, through pass-through ops."""
        seen = 0
        while name not in constants and name in producer and producer[name].op_type in PASS_THROUGH and seen < 8:
            name, seen = producer[name].input[0], seen + 1
        return name if name in constants else None

    def feeds_matmul(name: str) -> bool:
        todo, seen = [name], 0
        while todo and seen < 16:
            for node in consumers.get(todo.pop(), []):
                if node.op_type in ("MatMul", "Gemm"):
                    return True
                if node.op_type in PASS_THROUGH:
                    todo.extend(node.output)
            seen += 1
        return False

    used: set[str] = set()
    nodes: list[WeightNode] = []
    counted: Counter[str] = Counter()
    for node in all_nodes:
        if node.op_type in COUNTED:
            counted[node.op_type] += 1
        at = WEIGHT_INPUT.get(node.op_type)
        weight = source(node.input[at]) if at is not None and len(node.input) > at else None
        if weight is None:
            continue
        held = {s for s in (source(name) for name in node.input if name) if s is not None}
        used.update(held)
        kind, size = constants[weight][0], sum(constants[s][1] for s in held)
        if node.op_type in ("MatMulNBits", "GatherBlockQuantized"):
            bits = _attr(node, "bits", 4)
            nodes.append(WeightNode(node.op_type, bits, f"int{bits}", size, node.op_type == "MatMulNBits"))
        elif node.op_type == "MatMulBnb4":
            nodes.append(WeightNode(node.op_type, 4, "fp4" if _attr(node, "quant_type", 1) == 0 else "nf4", size, True))
        else:
            qdq = node.op_type == "DequantizeLinear"
            matmul = feeds_matmul(node.output[0]) if qdq else node.op_type in WEIGHT_MATMULS
            nodes.append(WeightNode(node.op_type, BITS_BY_TYPE.get(kind, 0), kind, size, matmul))
    other: Counter[str] = Counter()
    for name, (kind, size) in constants.items():
        if name not in used:
            other[kind] += size
    largest = max(((name, size) for name, (_, size) in constants.items()), key=lambda nb: nb[1], default=("", 0))
    return Inventory(tuple(nodes), tuple(sorted(counted.items())), tuple(sorted(other.items())), largest)


def read(path: Path) -> Inventory:
    """The inventory of the ONNX file at ``path`` (external data is not loaded)."""
    import onnx

    return inventory(onnx.load(str(path), load_external_data=False))


def of_bytes(data: bytes) -> Inventory:
    """The inventory of a serialized model (the harness's own exports)."""
    import onnx

    return inventory(onnx.load_from_string(data))


def promised_bits(file_name: str) -> tuple[str, int] | None:
    """The precision a file's name promises: (the token, bits), or None. The last token that
    names one wins ('model_q4f16.onnx' -> ('q4f16', 4); 'model.onnx' -> None)."""
    tokens = re.split(r"[-_.\s]+", Path(file_name).name.lower())
    found = [(t, PROMISES[t]) for t in tokens if t in PROMISES]
    return found[-1] if found else None


def promise(file_name: str, inv: Inventory) -> str:
    """'' when the file holds what its name promises (or promises nothing); else one line: what it
    promises and what its weight matmuls hold."""
    promised = promised_bits(file_name)
    bits = inv.matmul_bits()
    total = sum(bits.values())
    if promised is None or total == 0:
        return ""
    token, want = promised
    if bits[want] >= MAJORITY * total:
        return ""
    held = ", ".join(f"{n} at {b} bits" for b, n in sorted(bits.items(), key=lambda kv: -kv[1]))
    return f"named '{token}' ({want}-bit) but {bits[want]} of {total} weight matmuls hold {want} bits ({held})"

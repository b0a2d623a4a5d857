"""The run's linear layers in an exported ONNX graph: each layer's float32 weight MatMul (found by
the builder that exported the graph: onnx_encoder.py by its bias, the others by value with
``find_weight_matmuls``) is replaced by the form
the run holds it in, built from the harness's bytes for that layer (prepared with
``unsigned=True``):

- 8/4/2 bits: one ``com.microsoft`` ``MatMulNBits`` node (the harness's packed values, scales and
  zero points turned into MatMulNBits initializers by onnx_matmul.py's helpers);
- 16 bits: Cast to float16, a float16 MatMul with the harness's float16 weights, Cast back;
- 32 bits: the exported float32 MatMul;
- int8 activations (``qdq``: the layer's calibrated input and output parameters, 8-bit
  per-channel weights prepared signed): the int8 QDQ form of onnx_matmul.qdq_linear_nodes, x
  flattened to [rows, K] for its Gemm and the result put back to [..., N]; output channels int8
  cannot hold (``OutputQuant.float_channels``) are a float Gemm apart, gathered back in place,
  as the harness's WebNN graph does.

The weight-bearing node is named after its layer (``encoder.layer.0.attention.self.query``,
``model.layers.0.self_attn.q_proj``) so ORT's placement log says where each layer ran.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...architectures.int8 import PER_TOKEN_MIN_PEAK
from ...formats import onnx_inventory
from ...formats.matmul_nbits import nbits_initializers
from .onnx_matmul import (
    IR_VERSION,
    MS_DOMAIN,
    dequantized_weight,
    per_channel_int8,
    qdq_linear_nodes,
)

QDQ_WEIGHTS = "QDQ8"
"""``LayerNode.weight_dtype`` of a layer in the int8 QDQ form (int8 weights and int8 inputs)."""


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


def require_unsigned(held: Any) -> None:
    """MatMulNBits holds unsigned values and zero points: the harness's bytes prepared unsigned."""
    if not held.unsigned:
        raise ValueError("ONNX models need the harness's unsigned bytes (prepared with unsigned=True)")


def qdq_nodes(name: str, a: str, out: str, held_layer: Any, k: int, n: int, act: Any, out_quant: Any,
              seq_len: int) -> tuple[list[Any], list[Any], int]:
    """Layer ``name``'s int8 QDQ replacement of ``out = a @ W^T`` (a: [batch, seq_len, K], or [1, any, K]
    for ``seq_len`` 0); returns (nodes, initializers, weight bytes). ``act``: calibration.ActivationQuant, ``out_quant``:
    calibration.OutputQuant (or None: the output stays float)."""
    from onnx import helper, numpy_helper

    t = held_layer.tensors
    w8, sc = per_channel_int8(t["w"], t["scales"], t["zero_points"], n, k)
    p = f"{name}/qdq"
    inits = [numpy_helper.from_array(np.array([-1, k], dtype=np.int64), f"{p}/rows_k")]
    nodes = [helper.make_node("Reshape", [a, f"{p}/rows_k"], [f"{p}/x2d"], name=f"{p}/x2d")]
    floats = tuple(out_quant.float_channels) if out_quant else ()
    outq = (out_quant.scale, out_quant.zero_point) if out_quant else None
    actq = (act.scale, act.zero_point)
    x2d, y2d = f"{p}/x2d", f"{p}/y2d"
    if act.per_token:  # x / its rows' peaks through int8, the product times them (architectures/int8.py)
        x2d, y2d = f"{p}/x2d_per_token", f"{p}/y2d_per_token"
        inits += [numpy_helper.from_array(np.array([1], dtype=np.int64), f"{p}/last_axis"),
                  numpy_helper.from_array(np.array([PER_TOKEN_MIN_PEAK], dtype=np.float32), f"{p}/min_peak")]
        nodes += [helper.make_node("Abs", [f"{p}/x2d"], [f"{p}/x_abs"], name=f"{p}/x_abs"),
                  helper.make_node("ReduceMax", [f"{p}/x_abs", f"{p}/last_axis"], [f"{p}/row_peak"], keepdims=1,
                                   name=f"{p}/row_peak"),
                  helper.make_node("Max", [f"{p}/row_peak", f"{p}/min_peak"], [f"{p}/peak"], name=f"{p}/peak"),
                  helper.make_node("Div", [f"{p}/x2d", f"{p}/peak"], [x2d], name=f"{p}/x_per_token")]
    if floats:
        keep = np.array([c for c in range(n) if c not in set(floats)])
        apart = np.array(floats)
        main, more = qdq_linear_nodes(p, x2d, f"{p}/y_int8_channels", name, k=k, n=len(keep),
                                      w_int8=w8[keep], w_scales=sc[keep], act=actq, out=outq)
        position = np.empty(n, dtype=np.int64)
        position[np.concatenate([keep, apart])] = np.arange(n)
        w_node, w_inits = dequantized_weight(f"{p}/apart/w", w8[apart], sc[apart])
        inits += more + w_inits + [numpy_helper.from_array(position, f"{p}/order")]
        nodes += main + [
            w_node,
            helper.make_node("Gemm", [f"{p}/x_dq", w_node.output[0]], [f"{p}/y_float_channels"], transB=1,
                             name=f"{name}/float_channels"),
            helper.make_node("Concat", [f"{p}/y_int8_channels", f"{p}/y_float_channels"], [f"{p}/y_split"], axis=1,
                             name=f"{p}/concat"),
            helper.make_node("Gather", [f"{p}/y_split", f"{p}/order"], [y2d], axis=1, name=f"{p}/order"),
        ]
    else:
        main, more = qdq_linear_nodes(p, x2d, y2d, name, k=k, n=n, w_int8=w8, w_scales=sc, act=actq, out=outq)
        nodes += main
        inits += more
    if act.per_token:
        nodes.append(helper.make_node("Mul", [y2d, f"{p}/peak"], [f"{p}/y2d"], name=f"{p}/y_per_token"))
    # back to [batch, sequence, N] (a constant shape: ORT's WebNN provider takes static shapes);
    # seq_len 0: a batch of one and a free sequence (a decoder's one graph for every pass)
    shape = [-1, seq_len, n] if seq_len else [1, -1, n]
    inits.append(numpy_helper.from_array(np.array(shape, dtype=np.int64), f"{p}/out_shape"))
    nodes.append(helper.make_node("Reshape", [f"{p}/y2d", f"{p}/out_shape"], [out], name=f"{p}/y"))
    return nodes, inits, w8.nbytes + sc.nbytes + n


def _held_form(hl: Any, a: str, out: str, qdq: tuple[Any, Any] | None, seq_len: int
               ) -> tuple[list[Any], list[Any], LayerNode]:
    """The nodes and initializers that compute ``out`` = ``a`` @ W^T from one held layer's bytes
    (``hl``: models/quantized.HeldLayer at 16, 8, 4 or 2 bits; ``qdq``: its int8 QDQ form's
    (input ActivationQuant, OutputQuant or None)), and what the layer holds."""
    from onnx import TensorProto, helper, numpy_helper

    layer, bits, block = hl.precision.layer, hl.precision.bits, hl.precision.block
    name, k, n = layer.name, layer.k, layer.n
    if qdq is not None:
        if bits != 8 or block != k:
            raise ValueError(f"layer {name}: the int8 QDQ form needs 8-bit per-channel weights")
        nodes, inits, nbytes = qdq_nodes(name, a, out, hl.held, k, n, *qdq, seq_len=seq_len)
        return nodes, inits, LayerNode(name, "Gemm", QDQ_WEIGHTS, nbytes, bits)
    if bits == 16:
        w16 = np.frombuffer(hl.held.tensors["w"], dtype="<f2")[: n * k].reshape(n, k).T.copy()
        w16_name = f"{name}.weight_t.float16"
        nodes = [
            helper.make_node("Cast", [a], [f"{name}/input.float16"], to=TensorProto.FLOAT16, name=f"{name}/cast_in"),
            helper.make_node("MatMul", [f"{name}/input.float16", w16_name], [f"{name}/output.float16"], name=name),
            helper.make_node("Cast", [f"{name}/output.float16"], [out], to=TensorProto.FLOAT, name=f"{name}/cast_out"),
        ]
        return nodes, [numpy_helper.from_array(w16, w16_name)], LayerNode(name, "MatMul", "float16", w16.nbytes, bits)
    if bits in (8, 4, 2):
        if k % block:
            raise ValueError(f"layer {name}: K={k} is not a multiple of the block {block}")
        b, sc, zp = nbits_initializers(hl.held, k, n, bits, block)
        names = [f"{name}.weight.q{bits}", f"{name}.weight.scales", f"{name}.weight.zero_points"]
        node = helper.make_node("MatMulNBits", [a, *names], [out], domain=MS_DOMAIN, K=k, N=n, bits=bits,
                                block_size=block, name=name)
        return ([node], [numpy_helper.from_array(arr, nm) for arr, nm in zip((b, sc, zp), names)],
                LayerNode(name, "MatMulNBits", f"MatMulNBits{bits}", b.nbytes + sc.nbytes + zp.nbytes, bits))
    raise ValueError(f"layer {name}: bits {bits} has no ONNX form here")


def replace_linears(proto: Any, found: dict[str, int], held: Any,
                    qdq: dict[str, tuple[Any, Any]] | None = None, seq_len: int = 0) -> tuple[LayerNode, ...]:
    """Rewrite ``proto`` (an onnx ModelProto, in place) so each layer of ``held`` (a
    models/quantized.HeldModel with unsigned bytes, or signed ones with ``qdq``) is in its run's
    form; ``found``: layer name -> index of its float32 weight MatMul in ``proto.graph.node``
    (second input: an initializer holding W^T, checked here); ``qdq``: layer name -> (input
    ActivationQuant, OutputQuant or None) of the layers in the int8 QDQ form, whose inputs are
    [batch, ``seq_len``, K]. Returns the
    layers' nodes in the held model's order."""
    from onnx import helper, numpy_helper

    qdq = qdq or {}
    if not qdq:
        require_unsigned(held)
    graph = proto.graph
    plan = {layer.name: layer for layer in held.layers}
    inits = {t.name: t for t in graph.initializer}
    weights = held.model.weights
    replacement: dict[int, list[Any]] = {}
    new_inits: list[Any] = []
    dropped: set[str] = set()
    facts: list[LayerNode] = []
    uses_ms = False
    for name, index in found.items():
        hl = plan[name]
        layer, bits = hl.precision.layer, hl.precision.bits
        node = graph.node[index]
        a, out, w_name = node.input[0], node.output[0], node.input[1]
        if w_name not in inits or not np.array_equal(numpy_helper.to_array(inits[w_name]),
                                                     weights[f"{name}.weight"].T):
            raise ValueError(f"ONNX graph: the MatMul found for {name} does not hold its weight")
        if bits == 32:
            node.name = name
            facts.append(LayerNode(name, "MatMul", "float32", layer.k * layer.n * 4, bits))
            continue
        dropped.add(w_name)
        replacement[index], more, fact = _held_form(hl, a, out, qdq.get(name), seq_len)
        new_inits += more
        facts.append(fact)
        uses_ms = uses_ms or fact.op == "MatMulNBits"
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
    order = {hl.name: i for i, hl in enumerate(held.layers)}
    facts.sort(key=lambda f: order[f.name])
    return tuple(facts)


def one_or_mixed(values: Iterable[str]) -> str:
    """A row cell for the layers' formats or dtypes: 'MatMulNBits4', or
    'mixed:MatMulNBits4+MatMulNBits8' when the layers differ."""
    kinds = sorted(set(values))
    return kinds[0] if len(kinds) == 1 else "mixed:" + "+".join(kinds)


def held_fields(nodes: Iterable[LayerNode], held: Iterable[Any]) -> dict[str, str]:
    """The EngineJob fields of what a rewritten model holds (the generate and transcribe loops'):
    its nodes' formats, and the held layers' (precision/held.py) weight, scale and zero-point types."""
    held = list(held)
    quantized = [h for h in held if h.block_size]
    return {"weight_format": one_or_mixed(node.weight_dtype for node in nodes),
            "weight_dtype": one_or_mixed(h.weight_dtype for h in held),
            "scale_dtype": "float32" if quantized else "",
            "zero_point_dtype": one_or_mixed(h.zero_point_dtype for h in quantized) if quantized else ""}


def summary(layers: tuple[LayerNode, ...]) -> str:
    """'36 x MatMulNBits4' / '24 x MatMulNBits8, 12 x MatMulNBits4'."""
    counts = Counter(f.weight_dtype for f in layers)
    return ", ".join(f"{c} x {d}" for d, c in counts.items())


def _digest(a: np.ndarray) -> tuple[tuple[int, ...], str]:
    a = np.ascontiguousarray(a, dtype="<f4")
    return a.shape, hashlib.sha256(a.data).hexdigest()


def find_weight_matmuls(graph: Any, held: Any) -> dict[str, int]:
    """Layer name -> index of its weight MatMul: the MatMul whose second input is an initializer
    equal to the layer's W^T. Layers with equal weights (the exporter keeps one initializer for
    them) take those MatMuls in graph order, which is forward order."""
    from onnx import numpy_helper

    inits = {t.name: t for t in graph.initializer}
    by_value: dict[tuple[tuple[int, ...], str], list[int]] = {}
    shapes = {(hl.precision.layer.k, hl.precision.layer.n) for hl in held.layers}
    for i, node in enumerate(graph.node):
        if node.op_type == "MatMul" and node.input[1] in inits and tuple(inits[node.input[1]].dims) in shapes:
            by_value.setdefault(_digest(numpy_helper.to_array(inits[node.input[1]])), []).append(i)
    found: dict[str, int] = {}
    for hl in held.layers:
        nodes = by_value.get(_digest(held.model.weights[f"{hl.name}.weight"].T))
        if not nodes:
            raise ValueError(f"ONNX graph: no MatMul holds {hl.name}'s weight")
        found[hl.name] = nodes.pop(0)
    return found


@dataclass(frozen=True)
class RewrittenGraph:
    name: str
    """The graph's name in the row's samples ('decoder', 'encoder')."""
    data: bytes
    layers: tuple[LayerNode, ...]
    weight_bytes: int
    """Bytes of every initializer: what a session holds of the graph."""
    inventory: dict[str, Any]
    """What the graph holds, read from its nodes (formats/onnx_inventory.py): the row's samples keep it."""

    @property
    def inventories(self) -> dict[str, Any]:
        return {self.name: self.inventory}


def qdq_layers(prepared: Any) -> dict[str, tuple[Any, Any]]:
    """Layer name -> (input, output) int8 parameters of the layers with int8 activations (an
    ``act_bits`` 8 preparation: ``act_quant``, ``out_quant``): those are written in the int8 QDQ form."""
    acts = prepared.act_quant or ()
    outs = prepared.out_quant or (None,) * len(acts)
    return {p.layer.name: (a, o) for p, a, o in zip(prepared.plan, acts, outs) if a is not None}


def rewrite_graph(name: str, data: bytes, held: Any, qdq: dict[str, tuple[Any, Any]] | None = None) -> RewrittenGraph:
    """An export with each of ``held``'s layers (found by value: ``find_weight_matmuls``) in the
    form the run holds it (``qdq``: the layers in the int8 QDQ form, their inputs [1, any, K]), its
    initializer bytes and its inventory, from the one parse."""
    import onnx
    from onnx import helper

    if not qdq:
        require_unsigned(held)
    proto = onnx.load_from_string(data)
    layers = replace_linears(proto, find_weight_matmuls(proto.graph, held), held, qdq)
    weight_bytes = sum(helper.tensor_dtype_to_np_dtype(t.data_type).itemsize * math.prod(t.dims)
                       for t in proto.graph.initializer)
    return RewrittenGraph(name, proto.SerializeToString(), layers, weight_bytes,
                          onnx_inventory.inventory(proto).to_json())

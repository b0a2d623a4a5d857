"""What the onnx kind reads of a user's ONNX file: where it is (a file, or a folder holding one),
its content hash, its input and output signatures, and the nodes that hold weights.

Only onnx's own reader is used; nothing here runs the graph (reference.py does, with onnxruntime).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures.base import LinearLayer
from ...formats.onnx_inventory import all_graphs

ONNX_SUFFIX = ".onnx"
WEIGHT_OPS = ("MatMul", "Gemm", "Conv", "ConvTranspose")
"""Nodes whose second input, a constant, is the weight a precision applies to (layers.csv)."""


class OnnxFileError(ValueError):
    """An ONNX file that cannot be used (one line for the user)."""


@dataclass(frozen=True)
class TensorSig:
    """A graph input or output: its name, element type (numpy's name) and dimensions, each an int
    or the name of a symbolic dimension ('' for a dynamic dimension without a name)."""

    name: str
    dtype: str
    dims: tuple[int | str, ...] | None
    """None when the graph gives no shape (outputs of stripped graphs)."""

    def text(self, dims: dict[str, int] | None = None) -> str:
        """'x float32[1,3,d0,d1]' (symbols replaced by ``dims`` where given)."""
        if self.dims is None:
            return f"{self.name} {self.dtype}[?]"
        shown = [str(dims.get(d, d) if dims and isinstance(d, str) else d) if d != "" else "?" for d in self.dims]
        return f"{self.name} {self.dtype}[{','.join(shown)}]"


def is_onnx_model(model: str) -> bool:
    """Whether ``--model`` names an ONNX file (or a folder holding ONNX files and no config.json)."""
    path = Path(model).expanduser()
    if model.endswith(ONNX_SUFFIX):
        return True
    return path.is_dir() and not (path / "config.json").is_file() and any(path.glob(f"*{ONNX_SUFFIX}"))


def locate(model: str) -> Path:
    """The ONNX file ``model`` names: the file, or the one .onnx file in a folder."""
    path = Path(model).expanduser()
    if not path.exists():
        raise OnnxFileError(f"model path {model} does not exist")
    if path.is_dir():
        found = sorted(path.glob(f"*{ONNX_SUFFIX}"))
        if len(found) != 1:
            raise OnnxFileError(f"model folder {model} holds {len(found)} .onnx files; name one")
        path = found[0]
    return path.resolve()


def external_data(path: Path) -> tuple[str, ...]:
    """The files beside ``path`` that hold its external data (``onnx.save(...,
    save_as_external_data=True)``, Optimum's models over 2 GB): each location once, as the file
    names it. OnnxFileError for a location that leaves the file's folder or is missing."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - load() says what is wrong with the file itself
        return ()
    locations: dict[str, None] = {}
    for graph in all_graphs(model.graph):
        tensors = list(graph.initializer) + [a.t for n in graph.node for a in n.attribute if a.HasField("t")]
        for tensor in tensors:
            if uses_external_data(tensor):
                locations[ExternalDataInfo(tensor).location] = None
    folder = path.parent.resolve()
    for location in locations:
        target = (folder / location).resolve()
        if folder not in target.parents:
            raise OnnxFileError(f"{path.name} names external data {location!r} outside its folder")
        if not target.is_file():
            raise OnnxFileError(f"{path.name} keeps its weights in {location}, which is not beside it in {folder}")
    return tuple(locations)


def sha256(path: Path) -> str:
    """The content hash of the file and of its external data files (external_data), in order."""
    h = hashlib.sha256()
    for file in (path, *(path.parent / location for location in external_data(path))):
        with file.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):  # noqa: B023 - used within the loop
                h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=4)
def load(path: Path, digest: str) -> Any:
    """The parsed model (onnx.ModelProto), once per content; OnnxFileError for a file that is not
    ONNX. ``digest`` keys the cache, so a file changed on disk is read anew."""
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf's and onnx's errors alike
        raise OnnxFileError(f"{path} is not an ONNX model ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:200] if str(exc) else 'unreadable'})") from None
    if not model.graph.node or not model.graph.output:
        raise OnnxFileError(f"{path} is not an ONNX model with a graph (no nodes or no outputs)")
    return model


def _sig(value: Any) -> TensorSig:
    from onnx import helper

    t = value.type.tensor_type
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)).name
    except Exception:  # noqa: BLE001 - an element type numpy has no name for
        dtype = f"onnx-type-{t.elem_type}"
    dims = None
    if t.HasField("shape"):
        dims = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim)
    return TensorSig(value.name, dtype, dims)


def inputs(model: Any) -> tuple[TensorSig, ...]:
    """The graph's real inputs (an initializer listed as an input, as old exporters did, is not one)."""
    initializers = {i.name for i in model.graph.initializer}
    return tuple(_sig(v) for v in model.graph.input if v.name not in initializers)


def outputs(model: Any) -> tuple[TensorSig, ...]:
    return tuple(_sig(v) for v in model.graph.output)


def opset(model: Any) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def initializer_bytes(model: Any) -> int:
    """Bytes of every constant the graph holds (initializers and Constant nodes' tensors)."""
    from onnx import numpy_helper

    total = sum(numpy_helper.to_array(i).nbytes for i in model.graph.initializer)
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    total += numpy_helper.to_array(attr.t).nbytes
    return int(total)


def node_name(node: Any, index: int) -> str:
    """A node's name, or '<op>_<index>' for an unnamed one (ORT's log names nodes the same way
    only when they have names, so unnamed nodes' placement is not read)."""
    return node.name or f"{node.op_type}_{index}"


def weight_layers(model: Any) -> tuple[LinearLayer, ...]:
    """Every MatMul, Gemm and Conv whose weight is a constant, in graph order, as a layer: its
    node name, its op (the layer's kind), K (inputs summed per output value) and N (outputs)."""
    from onnx import numpy_helper

    shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    shapes[node.output[0]] = tuple(numpy_helper.to_array(attr.t).shape)
    layers = []
    for i, node in enumerate(model.graph.node):
        if node.op_type not in WEIGHT_OPS or len(node.input) < 2 or node.input[1] not in shapes:
            continue
        w = shapes[node.input[1]]
        if node.op_type in ("MatMul", "Gemm") and len(w) == 2:
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            k, n = (w[1], w[0]) if trans_b else (w[0], w[1])
        elif node.op_type == "Conv" and len(w) >= 3:
            k, n = int(np.prod(w[1:])), w[0]
        elif node.op_type == "ConvTranspose" and len(w) >= 3:
            k, n = int(np.prod((w[0], *w[2:]))), w[1]
        else:
            continue
        layers.append(LinearLayer(node_name(node, i), node.op_type, int(k), int(n)))
    return tuple(layers)


def repaired(model: Any, computed: dict[str, tuple[int, ...]]) -> tuple[Any, str]:
    """``model`` with every output shape it declares that contradicts what onnxruntime computes
    (another rank, or another fixed size) cleared, and what was cleared ('' when nothing was: the
    model itself is returned). Only the declaration changes, not the computation: ONNX Runtime Web
    refuses a graph whose declared output shapes contradict inference ("Mismatch between number of
    inferred and declared dimensions"), where onnxruntime in Python only warns."""
    import copy

    wrong = []
    for out in model.graph.output:
        t = out.type.tensor_type
        if out.name not in computed or not t.HasField("shape"):
            continue
        declared = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        shape = computed[out.name]
        if len(declared) != len(shape) or any(d is not None and d != s for d, s in zip(declared, shape)):
            wrong.append((out.name, declared, shape))
    if not wrong:
        return model, ""
    fixed = copy.deepcopy(model)
    names = {name for name, _, _ in wrong}
    for out in fixed.graph.output:
        if out.name in names:
            out.type.tensor_type.ClearField("shape")
    said = ", ".join(f"{name} declared {['?' if d is None else d for d in declared]}, computed {list(shape)}"
                     for name, declared, shape in wrong)
    return fixed, f"cleared output shapes the file declares against what onnxruntime computes ({said})"

"""Exporting a model's PyTorch module to ONNX once per content: what the whole-model ONNX
builders (onnx_encoder.py, onnx_decoder.py, onnx_speech.py) share.

Exports are cached by content hash (what the graph is exported from: the builder's own tag and
format number, the opset, the weights, the config, the torch and transformers versions) in the
git-ignored ``.cache/onnx/`` at the project root, written atomically, so a sweep exports a
model once; a cache file that does not parse is exported anew. ``quiet`` keeps the exporter's
chatter ("torchvision is not installed", progress lines) out of the run's output.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...files import prune, used, write_bytes_atomically
from ...paths import ONNX_CACHE_DIR
from .onnx_matmul import IR_VERSION

OPSET = 18
"""The dynamo exporter at opset 18 exports these models here, and ORT Web reads it."""
CACHE_DIR = ONNX_CACHE_DIR
"""Exported float32 models, by content hash (git-ignored)."""


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def export_key(model: Any, head: Mapping[str, Any]) -> str:
    """Content hash of what determines an exported graph: ``head`` (the builder's tag, format and
    opset), the weights, the config and the exporter's versions."""
    h = hashlib.sha256()
    doc = {**head, "ir_version": IR_VERSION, "config": model.config.to_json(), **_versions()}
    h.update(json.dumps(doc, sort_keys=True).encode())
    for name in sorted(model.weights):
        a = np.ascontiguousarray(model.weights[name], dtype="<f4")
        h.update(f"\n{name}:{a.shape}\n".encode())
        h.update(a.data)
    return h.hexdigest()


def cache_path(model: Any, head: Mapping[str, Any], cache_dir: Path | None = None) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model.resolved.name)[:60]
    tag = str(head.get("tag", "model"))
    return (cache_dir or CACHE_DIR) / f"{safe}-{tag}-{export_key(model, head)[:24]}.onnx"


def cached_export(model: Any, head: Mapping[str, Any], export: Callable[[], bytes],
                  cache_dir: Path | None = None) -> bytes:
    """The cached export of ``model`` under ``head``, or ``export()`` written to the cache (whole:
    written to a temporary file and renamed, so a file in the cache is a finished export and is
    not parsed again on a hit)."""
    path = cache_path(model, head, cache_dir)
    if path.is_file():
        return used(path).read_bytes()
    data = export()
    write_bytes_atomically(path, data)
    prune(cache_dir or CACHE_DIR, keep=path)
    return data


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No gradients, and the exporter's chatter and warnings kept out of the run's output."""
    import torch

    chatter = io.StringIO()
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), contextlib.redirect_stdout(chatter), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def layer_names(prefix: str, layers: int) -> list[str]:
    """A graph's per-layer cache inputs or outputs: ``<prefix>.<i>.key`` and ``.value``."""
    return [f"{prefix}.{i}.{part}" for i in range(layers) for part in ("key", "value")]


def name_dims(proto: Any, by_input: Mapping[str, Sequence[str | None]], wanted: Iterable[str]) -> None:
    """Give the exporter's symbolic dimensions (s12, s70, ...) names: ``by_input`` names each
    graph input's or output's dimensions (None: leave it); every name in ``wanted`` must be found."""
    renamed: dict[str, str] = {}
    for vi in list(proto.graph.input) + list(proto.graph.output):
        for dim, want in zip(vi.type.tensor_type.shape.dim, by_input.get(vi.name, [])):
            if want and dim.dim_param:
                if renamed.setdefault(dim.dim_param, want) != want:
                    raise ValueError(f"ONNX export: dimension {dim.dim_param} is both {renamed[dim.dim_param]} "
                                     f"and {want}")
    for vi in list(proto.graph.input) + list(proto.graph.output) + list(proto.graph.value_info):
        for dim in vi.type.tensor_type.shape.dim:
            if dim.dim_param in renamed:
                dim.dim_param = renamed[dim.dim_param]
    missing = set(wanted) - set(renamed.values())
    if missing:
        raise ValueError(f"ONNX export: no free dimension for {sorted(missing)} (the exporter fixed them)")


def export(module: Any, example: Sequence[Any], input_names: Sequence[str], output_names: Sequence[str],
           shapes: Sequence[Any] | None = None, dims: Mapping[str, Sequence[str | None]] | None = None,
           dim_docs: Iterable[str] = ()) -> bytes:
    """``torch.onnx.export`` (dynamo, opset ``OPSET``, optimised) of a module taking ``*tensors``
    (torch_ops.pass_module): ``shapes`` are the example tensors' free dimensions (torch.export's
    per-tensor form), ``dims`` then names them (``name_dims``; every name in ``dim_docs`` must be
    found). Returns the model's bytes with ``IR_VERSION``."""
    import torch

    with quiet():
        program = torch.onnx.export(module, tuple(example), dynamo=True, opset_version=OPSET,
                                    input_names=list(input_names), output_names=list(output_names),
                                    dynamic_shapes={"tensors": tuple(shapes)} if shapes is not None else None,
                                    optimize=True, verbose=False)
    proto = program.model_proto
    if dims:
        name_dims(proto, dims, dim_docs)
    proto.ir_version = IR_VERSION
    return proto.SerializeToString()

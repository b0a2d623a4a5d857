"""Workload kinds (plug-ins, see base.py), registered here by name: what a plan file's ``kind``
means, which columns rows carry, and how rows of each kind are identified."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import source
from .base import Column, Prepared, TensorSpec, Workload, WorkloadKind
from .decoder import DECODER, DecoderWorkload
from .encoder import ENCODER, EncoderWorkload
from .matmul import DEFAULT_WORKLOADS, MATMUL, MatmulWorkload, parse_shape
from .onnx_file import ONNX_FILE, OnnxFileWorkload, is_onnx_model
from .speech import SPEECH, SpeechWorkload

KINDS: tuple[WorkloadKind, ...] = (
    MATMUL,
    ENCODER,
    DECODER,
    ONNX_FILE,
    SPEECH,
)
DEFAULT_KIND = MATMUL.name
"""The kind of a row or plan entry that names none (plan files before v3, results before schema 8)."""


def kind_named(name: str) -> WorkloadKind:
    """A kind by its name (or an older name plan files carry); ValueError otherwise."""
    for kind in KINDS:
        if name == kind.name or name in kind.aliases:
            return kind
    raise ValueError(f"unknown workload kind {name!r}; known: {', '.join(k.name for k in KINDS)}")


def workload_from_json(doc: Mapping[str, Any]) -> Workload:
    return kind_named(str(doc.get("kind", DEFAULT_KIND))).from_json(doc)


def model_workloads(model: str, options: Mapping[str, Any]) -> tuple[Workload, ...]:
    """The workloads that run ``model``: its architecture (architectures/) names the kind, and the
    kind reads the options it takes (``random_weights``, ``random_weights_hint`` and its own). An
    ONNX file (or a folder holding one and no config.json) is the onnx kind's, whatever its graph;
    its ``dtype`` option names the file's variants (other models' dtypes are engines', plan.py)."""
    if is_onnx_model(model):
        return ONNX_FILE.model_workloads(model, options)
    resolved = source.resolve(model, bool(options.get("random_weights")),
                              options.get("random_weights_hint") or source.RANDOM_WEIGHTS_FLAG)
    architecture, _ = source.architecture(resolved)
    return kind_named(architecture.kind).model_workloads(model, options)


def kind_columns() -> list[Column]:
    """Every kind's columns, each name once, in registry order."""
    seen: dict[str, Column] = {}
    for kind in KINDS:
        for column in kind.columns:
            seen.setdefault(column.name, column)
    return list(seen.values())


__all__ = ["DEFAULT_KIND", "DEFAULT_WORKLOADS", "KINDS", "ONNX_FILE", "Column", "DecoderWorkload", "EncoderWorkload",
           "MatmulWorkload", "OnnxFileWorkload", "Prepared", "SpeechWorkload", "TensorSpec",
           "Workload", "WorkloadKind", "kind_columns", "kind_named", "model_workloads", "parse_shape",
           "workload_from_json"]

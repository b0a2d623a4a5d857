"""Workloads: what runs in the page. The registry maps a plan file's ``kind`` to its class."""

from __future__ import annotations

from typing import Any

from .base import Workload
from .matmul import DEFAULT_WORKLOADS, MatmulWorkload, parse_shape
from .model import ModelWorkload

WORKLOAD_KINDS: dict[str, Any] = {
    MatmulWorkload.kind: MatmulWorkload,
    ModelWorkload.kind: ModelWorkload,
}


def workload_from_json(doc: dict[str, Any]) -> Workload:
    kind = doc.get("kind", MatmulWorkload.kind)  # plan files before v3 held matmuls only
    cls = WORKLOAD_KINDS.get(kind)
    if cls is None:
        raise ValueError(f"unknown workload kind {kind!r}")
    return cls.from_json(doc)


__all__ = ["DEFAULT_WORKLOADS", "MatmulWorkload", "ModelWorkload", "WORKLOAD_KINDS", "Workload", "parse_shape",
           "workload_from_json"]

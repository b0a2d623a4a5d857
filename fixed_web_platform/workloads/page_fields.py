"""Checks of the numbers a model page reports in its kind's own reply field, shared by the kinds
that generate (decoder) and transcribe (speech): times, byte counts, device memory by part, and
the row's memory figures drawn from it. A value that is not what it claims is a PageDataError
naming the field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import PageDataError

MAX_STEPS = 4096
MAX_MS = 3_600_000.0
MAX_BYTES = 1 << 40
MEMORY_PARTS = ("weights", "kv_cache", "scratch")
"""Device memory as a page splits it: the weights as held, the KV cache (and cross keys and
values), everything else it allocated."""


def ms(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_MS:
        raise PageDataError(f"{where} is not a time in milliseconds: {value!r:.40}")
    return float(value)


def memory(doc: Mapping[str, Any], field: str) -> dict[str, int]:
    """``doc["memory"]``, each part a byte count."""
    parts = doc.get("memory")
    if not isinstance(parts, dict):
        raise PageDataError(f"{field}.memory is missing")
    out = {}
    for part in MEMORY_PARTS:
        value = parts.get(part)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BYTES:
            raise PageDataError(f"{field}.memory.{part} is not a byte count: {value!r:.40}")
        out[part] = value
    return out


def memory_figures(parts: Mapping[str, int]) -> dict[str, int]:
    """The row's device-memory columns (model_columns.DEVICE_MEMORY) from a checked ``memory``."""
    return {"device_weight_bytes": parts["weights"], "kv_cache_bytes": parts["kv_cache"],
            "scratch_bytes": parts["scratch"]}

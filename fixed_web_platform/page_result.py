"""Parse what the page posts. It is data from a browser, so every field is checked, not trusted."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_REASON_CHARS = 2000
PAGE_STATUSES = ("ok", "unsupported", "failed")


class PageDataError(ValueError):
    """The page posted something that does not have the agreed shape."""


@dataclass(frozen=True)
class PageResult:
    status: str
    reason: str = ""
    stage: str = ""
    """Where a failed page stopped (WebNN: tensor fetch, graph building, build, dispatch)."""
    shader: str = ""
    compute_dtype: str = ""
    """What the page says it computed in; informational (Python decides the tolerance)."""
    weight_buffer_bytes: int | None = None
    """WebGPU: bytes of the weight buffer the shader had bound."""
    weight_operand_dtype: str = ""
    """WebNN: dataType of the graph operand that held the stored weights."""
    timestamp_query: bool = False
    compile_ms: float | None = None
    cold_ms: float | None = None
    wall_ms: tuple[float, ...] = ()
    gpu_ms: tuple[float, ...] | None = None
    gpu_buffer_bytes: int | None = None
    js_heap_bytes: int | None = None
    js_heap_source: str = ""
    """Where js_heap_bytes came from, or why there is none."""
    probe: dict[str, Any] = field(default_factory=dict)


def _number(value: Any, name: str) -> float:
    try:
        finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        raise PageDataError(f"{name} is not a finite number: {value!r:.80}")
    if value < 0:
        raise PageDataError(f"{name} is negative: {value!r}")
    return float(value)


def _samples(value: Any, name: str, at_most: int, exactly: int | None = None) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise PageDataError(f"{name} is not a list")
    if exactly is not None and len(value) != exactly:
        raise PageDataError(f"{name} has {len(value)} samples, expected {exactly}")
    if not 1 <= len(value) <= at_most:
        raise PageDataError(f"{name} has {len(value)} samples; between 1 and {at_most} are allowed")
    return tuple(_number(v, f"{name}[{i}]") for i, v in enumerate(value))


def _js_heap(value: Any) -> tuple[int | None, str]:
    if not isinstance(value, dict):
        return None, "not reported"
    raw = value.get("bytes")
    note = _text(value.get("note"))
    if raw is None:
        return None, f"unavailable: {note}" if note else "unavailable"
    return int(_number(raw, "js_heap.bytes")), _text(value.get("source"))[:80]


def _text(value: Any) -> str:
    return str(value)[:MAX_REASON_CHARS] if value is not None else ""


def parse_page_result(payload: Any, max_iterations: int) -> PageResult:
    """Check a posted result; timed runs have 1..max_iterations samples (fewer than the minimum
    asked is allowed here and marked by the runner)."""
    if not isinstance(payload, dict):
        raise PageDataError("result is not a JSON object")
    status = payload.get("status")
    if status not in PAGE_STATUSES:
        raise PageDataError(f"unknown status {status!r:.40}")
    probe = payload.get("probe") if isinstance(payload.get("probe"), dict) else {}
    if status != "ok":
        return PageResult(status=status, reason=_text(payload.get("reason")) or "(no message)",
                          stage=_text(payload.get("stage"))[:40], probe=probe)
    compute_dtype = payload.get("compute_dtype")
    if compute_dtype not in ("f32", "f16"):
        raise PageDataError(f"unknown compute_dtype {compute_dtype!r:.40}")
    weight_buffer = payload.get("weight_buffer_bytes")
    operand_dtype = payload.get("weight_operand_dtype")
    if weight_buffer is None and not isinstance(operand_dtype, str):
        raise PageDataError("the page reported neither weight_buffer_bytes nor weight_operand_dtype")
    gpu = payload.get("gpu_ms")
    gpu_buffer = payload.get("gpu_buffer_bytes")
    wall = _samples(payload.get("wall_ms"), "wall_ms", max_iterations)
    heap_bytes, heap_source = _js_heap(payload.get("js_heap"))
    return PageResult(
        status=status,
        shader=_text(payload.get("shader")),
        compute_dtype=compute_dtype,
        weight_buffer_bytes=None if weight_buffer is None else int(_number(weight_buffer, "weight_buffer_bytes")),
        weight_operand_dtype=operand_dtype[:20] if isinstance(operand_dtype, str) else "",
        timestamp_query=payload.get("timestamp_query") is True,
        compile_ms=_number(payload.get("compile_ms"), "compile_ms"),
        cold_ms=_number(payload.get("cold_ms"), "cold_ms"),
        wall_ms=wall,
        gpu_ms=None if gpu is None else _samples(gpu, "gpu_ms", max_iterations, exactly=len(wall)),
        gpu_buffer_bytes=None if gpu_buffer is None else int(_number(gpu_buffer, "gpu_buffer_bytes")),
        js_heap_bytes=heap_bytes,
        js_heap_source=heap_source,
        probe=probe,
    )


def parse_output(data: bytes | None, m: int, n: int) -> np.ndarray:
    expected = m * n * 4
    if data is None:
        raise PageDataError("the page posted no output tensor")
    if len(data) != expected:
        raise PageDataError(f"output has {len(data)} bytes, expected {expected} ({m}x{n} float32)")
    return np.frombuffer(data, dtype="<f4").reshape(m, n)

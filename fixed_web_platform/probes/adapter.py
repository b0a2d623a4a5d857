"""The one place a WebGPU adapter's label and limits are read from what the page's probe reported."""

from __future__ import annotations

import math
from typing import Any

FALLBACK_MARK = " (fallback)"
"""How a label ends when the browser says the adapter is a fallback one (software: SwiftShader,
lavapipe, WARP), the mark the report looks for."""


def adapter_label(probe: Any, *, mark_fallback: bool = True) -> str:
    """'vendor/architecture/device (fallback)' from a page probe (or its ``webgpu`` part); empty
    when there is no adapter, '(not disclosed)' when the browser hides its identity."""
    gpu = probe.get("webgpu", probe) if isinstance(probe, dict) else None
    if not isinstance(gpu, dict) or not gpu.get("available"):
        return ""
    adapter = gpu.get("adapter") if isinstance(gpu.get("adapter"), dict) else {}
    label = "/".join(str(adapter[k]) for k in ("vendor", "architecture", "device") if adapter.get(k))
    label = label or "(not disclosed)"
    return f"{label}{FALLBACK_MARK}" if mark_fallback and adapter.get("isFallbackAdapter") else label


def adapter_limits(probe: Any) -> dict[str, int]:
    """The adapter's limits a page probe reports (``webgpu.limits``), each a positive whole number
    of the page's (anything else left out: data from the page is parsed); {} without an adapter."""
    gpu = probe.get("webgpu", probe) if isinstance(probe, dict) else None
    limits = gpu.get("limits") if isinstance(gpu, dict) and gpu.get("available") else None
    if not isinstance(limits, dict):
        return {}
    return {str(k): int(v) for k, v in limits.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 and v == int(v)}

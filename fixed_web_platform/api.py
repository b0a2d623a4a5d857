"""Importable async API for notebooks and asyncio code: the same sweep as the CLI, rows as dicts.

    rows = await run_real_webnn_test(browser="chrome", bits=[8, 4], experimental_precision=True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .plan import build_plan, parse_shape
from .progress import PlainProgress
from .results import ResultWriter, new_results_dir
from .runner import SweepOptions, run_sweep
from .specs import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_WORKLOADS,
    BrowserName,
    Platform,
    PrecisionMode,
    TimingConfig,
)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


async def run_real_test(
    platforms: Sequence[Platform],
    *,
    model: str | None = None,
    browser: str | Sequence[str] = "chrome",
    bits: int | Sequence[int] = 4,
    experimental_precision: bool = False,
    mixed_precision: bool = False,
    shapes: Sequence[str] | None = None,
    webnn_device: str = "cpu",
    block_size: int = DEFAULT_BLOCK_SIZE,
    repetitions: int = 1,
    timing: TimingConfig = TimingConfig(),
    output_dir: str | Path | None = None,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Plan, run in real browsers and return one plain dict per run (also written to disk)."""
    if model is not None:
        raise NotImplementedError("model runs are not supported yet; use the built-in matmul workloads")
    if mixed_precision:
        raise NotImplementedError("mixed precision is not supported yet")
    browsers = [BrowserName(str(b).lower()) for b in _as_list(browser)]
    workloads = [parse_shape(s) for s in shapes] if shapes else list(DEFAULT_WORKLOADS)
    plan = build_plan(
        browsers, platforms, workloads, _as_list(bits), repetitions=repetitions,
        block_size=block_size,
        precision_mode=PrecisionMode.EXPERIMENTAL if experimental_precision else PrecisionMode.STANDARD,
        webnn_device=webnn_device,
    )
    label = "-".join(p.value for p in platforms)
    writer = ResultWriter(Path(output_dir) if output_dir else new_results_dir(f"api-{label}"))
    options = SweepOptions(timing=timing, progress=PlainProgress() if progress else None)
    rows = await run_sweep(plan, writer, options)
    return [dataclasses.asdict(r) for r in rows]


async def run_real_webnn_test(**kwargs: Any) -> list[dict[str, Any]]:
    """WebNN runs (MLGraph with dequantizeLinear + matmul); see ``run_real_test`` for arguments."""
    return await run_real_test([Platform.WEBNN], **kwargs)


async def run_real_webgpu_test(**kwargs: Any) -> list[dict[str, Any]]:
    """WebGPU runs (WGSL kernels on packed weights); see ``run_real_test`` for arguments."""
    return await run_real_test([Platform.WEBGPU], **kwargs)

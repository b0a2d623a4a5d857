"""Wait for the browser to be at rest before a page loads, so one run's leftovers (ONNX Runtime's
wasm worker threads spinning after their page is done, a GPU process still flushing) are not
timed as the next run's work. On a 2-core machine a spinning thread halves a software adapter.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import psutil

QUIET_CPU_PERCENT = 20.0
"""The browser's whole process tree below this share of one core counts as at rest."""
QUIET_SAMPLE_S = 0.2
QUIET_MAX_WAIT_S = 10.0


@dataclass(frozen=True)
class Quiet:
    waited_s: float
    cpu_percent: float | None
    """The tree's CPU use (percent of one core) over the last sample; None without a pid."""

    @property
    def settled(self) -> bool:
        return self.cpu_percent is None or self.cpu_percent < QUIET_CPU_PERCENT


def _tree_cpu_seconds(pid: int) -> float | None:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


async def wait_until_quiet(pid: int | None, max_wait_s: float = QUIET_MAX_WAIT_S) -> Quiet:
    """Sample the tree's CPU time until one interval is under QUIET_CPU_PERCENT (or give up)."""
    if pid is None:
        return Quiet(0.0, None)
    start = time.monotonic()
    percent: float | None = None
    before = await asyncio.to_thread(_tree_cpu_seconds, pid)
    while before is not None:
        await asyncio.sleep(QUIET_SAMPLE_S)
        after = await asyncio.to_thread(_tree_cpu_seconds, pid)
        if after is None:
            break
        percent = max(0.0, after - before) / QUIET_SAMPLE_S * 100.0
        if percent < QUIET_CPU_PERCENT or time.monotonic() - start >= max_wait_s:
            break
        before = after
    return Quiet(time.monotonic() - start, percent)

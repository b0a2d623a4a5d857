"""Browser process-tree memory, sampled with psutil while a run executes.

The driver knows the browser's main process id; renderer, GPU and utility processes are its
descendants. RSS is summed over the tree; USS and PSS too where the OS provides them (Linux).

RSS is cheap to read (``/proc/PID/statm``) and is sampled every ``SAMPLE_INTERVAL_S``. USS and PSS
come from ``/proc/PID/smaps_rollup``, for which the kernel walks every mapping of the process.
Read every 0.1 s, they cost 144 s of CPU over a 1,540 s test run (py-spy), taken on these 2-core
machines from the browser being measured. So a full sample waits until the sampler's share of one
core stays under ``FULL_SAMPLE_SHARE``; the baseline and the end of the run are always full.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import psutil

SAMPLE_INTERVAL_S = 0.1
FULL_SAMPLE_SHARE = 0.02
"""USS/PSS samples take at most this share of one core: the next one waits 1/share times as long
as the last one took."""


@dataclass(frozen=True)
class TreeMemory:
    rss: int
    uss: int | None
    pss: int | None
    processes: int


def tree_memory(pid: int, full: bool = True) -> TreeMemory | None:
    """One snapshot of the process tree rooted at ``pid``; None when it is gone. ``full=False``
    reads RSS alone (uss and pss None)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    rss, uss, pss, counted = 0, 0, 0, 0
    for proc in procs:
        try:
            info = proc.memory_full_info() if full else proc.memory_info()
        except psutil.AccessDenied:
            full = False
            try:
                rss += proc.memory_info().rss
                counted += 1
            except psutil.Error:
                pass
            continue
        except psutil.Error:
            continue
        rss += info.rss
        uss += getattr(info, "uss", 0)
        if hasattr(info, "pss"):
            pss += info.pss
        else:
            full = False
        counted += 1
    if counted == 0:
        return None
    return TreeMemory(rss=rss, uss=uss if full else None, pss=pss if full else None, processes=counted)


@dataclass(frozen=True)
class MemoryFigures:
    baseline_rss: int | None
    peak_rss: int | None
    peak_uss: int | None
    peak_pss: int | None
    processes: int | None

    @classmethod
    def over_pages(cls, pages: list[MemoryFigures]) -> MemoryFigures:
        """One run's figures from its page loads: the first page's baseline, the highest peaks."""

        def peak(values: list[int | None]) -> int | None:
            return max((v for v in values if v is not None), default=None)

        return cls(
            baseline_rss=pages[0].baseline_rss if pages else None,
            peak_rss=peak([p.peak_rss for p in pages]),
            peak_uss=peak([p.peak_uss for p in pages]),
            peak_pss=peak([p.peak_pss for p in pages]),
            processes=peak([p.processes for p in pages]),
        )

    @property
    def delta_rss(self) -> int | None:
        if self.baseline_rss is None or self.peak_rss is None:
            return None
        return self.peak_rss - self.baseline_rss


class TreeSampler:
    """Samples in a worker thread every SAMPLE_INTERVAL_S while the run executes.

    ``mark_baseline()`` records the browser at rest (called before the run's page loads); the
    peak covers everything after it.
    """

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._baseline: TreeMemory | None = None
        self._peak: dict[str, int] = {}
        self._processes: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._baseline_set = False

    async def _sample_once(self, full: bool = True) -> TreeMemory | None:
        return await asyncio.to_thread(tree_memory, self.pid, full) if self.pid is not None else None

    async def _loop(self) -> None:
        next_full = 0.0
        while True:
            started = time.monotonic()
            full = started >= next_full
            snap = await self._sample_once(full)
            if full:
                next_full = started + (time.monotonic() - started) / FULL_SAMPLE_SHARE
            if snap is not None and self._baseline_set:
                self._note(snap)
            await asyncio.sleep(SAMPLE_INTERVAL_S)

    def _note(self, snap: TreeMemory) -> None:
        for key in ("rss", "uss", "pss"):
            value = getattr(snap, key)
            if value is not None:
                self._peak[key] = max(self._peak.get(key, 0), value)
        self._processes = max(self._processes or 0, snap.processes)

    async def mark_baseline(self) -> None:
        snap = await self._sample_once()
        self._baseline = snap
        self._baseline_set = True
        if snap is not None:
            self._note(snap)

    def start(self) -> None:
        if self.pid is not None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> MemoryFigures:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._baseline_set:
            snap = await self._sample_once()  # the end of the run counts toward the peak
            if snap is not None:
                self._note(snap)
        return MemoryFigures(
            baseline_rss=self._baseline.rss if self._baseline else None,
            peak_rss=self._peak.get("rss"),
            peak_uss=self._peak.get("uss"),
            peak_pss=self._peak.get("pss"),
            processes=self._processes,
        )

"""The memory sampler keeps its own cost small: RSS every SAMPLE_INTERVAL_S, the costly USS/PSS
read (smaps_rollup) only while its share of one core stays under FULL_SAMPLE_SHARE. Sampling
USS every 0.1 s took a tenth of a core from the browser it measured."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from fixed_web_platform.probes import memory
from fixed_web_platform.probes.memory import TreeMemory, TreeSampler


def test_costly_reads_stay_under_their_share_and_rss_peaks_are_still_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    cost_s = 0.02

    def fake(pid: int, full: bool = True) -> TreeMemory:
        calls.append(full)
        if full:
            time.sleep(cost_s)  # the kernel walking every mapping
            return TreeMemory(rss=100, uss=50 + len(calls), pss=60, processes=3)
        return TreeMemory(rss=100 + 10 * len(calls), uss=None, pss=None, processes=3)

    monkeypatch.setattr(memory, "tree_memory", fake)

    async def run() -> memory.MemoryFigures:
        sampler = TreeSampler(pid=1)
        await sampler.mark_baseline()
        sampler.start()
        await asyncio.sleep(1.5)
        return await sampler.stop()

    figures = asyncio.run(run())
    cheap, full = calls.count(False), calls.count(True)
    # baseline + end + loop: at most 1.5 s / (cost / share) = 1.5 full reads in the loop, so <= 4
    assert full <= 4, calls
    assert cheap >= 8, calls  # RSS every 0.1 s
    assert figures.peak_rss >= 100 + 10 * 8  # a cheap sample's RSS counts toward the peak
    assert figures.peak_uss is not None and figures.peak_pss == 60


def test_a_real_process_tree_reads_rss_alone_or_everything() -> None:
    cheap, full = memory.tree_memory(os.getpid(), full=False), memory.tree_memory(os.getpid())
    assert cheap is not None and full is not None
    assert cheap.rss > 0 and cheap.uss is None and cheap.pss is None
    assert full.rss > 0 and (full.uss is None or 0 < full.uss <= full.rss * 2)

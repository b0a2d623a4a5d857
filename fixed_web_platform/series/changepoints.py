"""Where a series' level changes: ruptures' PELT, keeping only the cuts that are real.

One rule for the two series the harness judges: nights of a history (analysis/history.py) and
the iterations of a page load (series/steady.py). PELT (l2 cost) with a penalty of
PENALTY * s^2 * log(n), s the noise (estimated from successive differences unless the caller
knows better), then each cut is kept only where the level moved by more than ``min_effect`` and
the move, in units of that noise, is beyond chance at ``alpha`` over the n - 1 places a cut could
be made (Bonferroni), so noise is never drawn as a step.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

SD_FLOOR = 0.01
"""Smallest standard deviation (of log latency) assumed: 1%."""
PENALTY = 4.0
"""PELT's penalty per change point, in units of s^2 * log(n)."""


def change_points(values: Sequence[float], min_effect: float, alpha: float, *, noise: float | None = None,
                  min_size: int = 2, jump: int = 1) -> list[int]:
    """Indices where a new level starts (see _change_points). ``noise`` overrides the estimate
    from successive differences (a series whose neighbours are correlated needs its own, as
    series/steady.py's iterations do); ``min_size`` and ``jump`` are PELT's."""
    return list(_change_points(tuple(float(v) for v in values), min_effect, alpha, noise, min_size, jump))


@functools.lru_cache(maxsize=8192)
def _change_points(values: tuple[float, ...], min_effect: float, alpha: float, noise: float | None = None,
                   min_size: int = 2, jump: int = 1) -> tuple[int, ...]:
    """Indices where a new level starts: ruptures' PELT (l2 cost, at least 2 nights a segment,
    penalty PENALTY * s^2 * log n with s the noise from successive differences), keeping the
    points where the level moved by more than ``min_effect`` and the move between the segments on
    either side, in units of that noise, is beyond chance at ``alpha`` over the n - 1 places a
    cut could be made (so noise is never drawn as a step)."""
    import ruptures
    from scipy import stats as scipy_stats

    a = np.asarray(values, dtype=np.float64)
    if a.size < 4:
        return ()
    sd = _noise(a) if noise is None else max(noise, SD_FLOOR)
    ends = ruptures.Pelt(model="l2", min_size=min_size, jump=jump).fit(a.reshape(-1, 1)).predict(
        pen=PENALTY * sd * sd * math.log(a.size))
    bounds = [0, *ends]
    kept: list[int] = []
    for i in range(1, len(bounds) - 1):  # each cut against every night since the last one kept
        before, after = a[(kept[-1] if kept else 0):bounds[i]], a[bounds[i]:bounds[i + 1]]
        moved = after - float(np.median(before))
        if not _level_moved(moved, math.log1p(min_effect)):
            continue
        z = abs(float(after.mean() - before.mean())) / (sd * math.sqrt(1 / after.size + 1 / before.size))
        if 2 * float(scipy_stats.norm.sf(z)) * (a.size - 1) < alpha:  # Bonferroni: n - 1 places to cut
            kept.append(int(bounds[i]))
    return tuple(kept)


def _level_moved(moved: np.ndarray, floor: float) -> bool:
    """Did a segment move beyond ``floor`` as a level, not by one outlier? A short segment (up to
    3 nights) needs every night beyond it on one side, a longer one its median."""
    if moved.size <= 3:
        return bool((moved > floor).all() or (moved < -floor).all())
    return abs(float(np.median(moved))) > floor


def _noise(a: np.ndarray) -> float:
    """The night-to-night noise of a series from its successive differences (median absolute
    deviation, scaled to a standard deviation): a step moves one difference, not the estimate."""
    d = np.diff(a)
    return max(float(np.median(np.abs(d - np.median(d)))) * 1.4826 / math.sqrt(2), SD_FLOOR)

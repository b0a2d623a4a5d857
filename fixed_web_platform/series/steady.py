"""Did a page load's series of iterations reach a steady state, and from where?

The classes of Barrett et al., "Virtual Machine Warmup Blows Hot and Cold" (OOPSLA 2017;
softdevteam/warmup_stats), on one page load's iterations after the cold one
(docs/concepts/steady-state.md):

1. Fewer than MIN_SERIES iterations: too short, nothing judged.
2. Longer series are judged as the means of MAX_POINTS consecutive batches (a 0.5 ms kernel gives
   thousands of iterations; a batch also spans a coarse clock's ticks).
3. Outliers (a sample further than OUTLIER_K robust deviations from its neighbourhood's median,
   on the log scale) are left out of the change-point search, not out of the figures.
4. Change points: ruptures' PELT on the log times, with the filter the history judge uses for
   nights (series/changepoints.py): a
   cut is kept only where the level moved by at least EQUIVALENT (5%, the page's own tolerance,
   so two levels closer than that are one) and beyond chance at ALPHA (Bonferroni over the places
   a cut could be made). ALPHA is smaller than the nights' because iterations are autocorrelated
   (a slow spell lasts several iterations), which the noise estimate does not see.
5. The last segment is the steady state if it covers at least STEADY_SHARE of the series' time
   and MIN_STEADY iterations, and has no trend of its own: a straight line through it (log time
   against seconds) that moves the level by EQUIVALENT or more over its span, beyond chance at
   ALPHA, is a drift PELT cut into steps too short to test. Otherwise no steady state (a drift,
   a cycle, a late step). With a steady state: flat if every earlier segment is within
   EQUIVALENT of it, warm-up if every earlier one that is not was slower, slowdown if any was
   faster.

The floor (iterations the page ran before judging, ``--warmup`` / ``--warmup-time``) never counts
as steady: the steady segment starts at the floor at the earliest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..vocabulary import SteadyClass
from .changepoints import change_points

MIN_SERIES = 10
"""A series of fewer iterations is too short to judge."""
MIN_STEADY = 5
"""The steady segment needs at least this many iterations."""
MAX_POINTS = 200
"""Longer series are judged as this many batch means."""
EQUIVALENT = 0.05
"""Levels closer than this (relative) are one: the page's stop tolerance."""
ALPHA = 0.001
"""A cut must be beyond chance at this level (calibrated: tests/test_steady.py's Monte Carlo)."""
OUTLIER_K = 5.0
"""A sample further than this many robust deviations from its neighbourhood is an outlier."""
STEADY_SHARE = 0.25
"""The steady segment must cover at least this share of the series' time."""
SETTLED = frozenset({SteadyClass.FLAT, SteadyClass.WARMUP, SteadyClass.SLOWDOWN})
"""Classes with a steady segment to take figures from."""


@dataclass(frozen=True)
class Verdict:
    """One page load's series, judged."""

    steady_class: SteadyClass
    steady_start: int
    """The first iteration the figures come from: the steady segment's, or the floor's end where
    there is none to find (too short, no steady state)."""
    change_points: tuple[int, ...] = ()
    """Iterations where a new level starts."""
    outliers: int = 0
    warmup_s: float | None = None
    """Seconds from the first warm iteration to the steady segment's first."""
    level_ms: float | None = None
    """The steady segment's median."""

    @property
    def settled(self) -> bool:
        return self.steady_class in SETTLED

    def to_json(self) -> dict[str, Any]:
        return {"class": self.steady_class.value, "steady_start": self.steady_start,
                "change_points": list(self.change_points), "outliers": self.outliers,
                "warmup_s": self.warmup_s, "level_ms": self.level_ms}


def classify(ms: Sequence[float], start_ms: Sequence[float] | None = None, floor: int = 0) -> Verdict:
    """Judge one page load's iterations (after the cold one); ``start_ms`` their start offsets
    (None: time is counted by iterations), ``floor`` how many the page ran before judging."""
    x = np.maximum(np.asarray(ms, dtype=np.float64), 1e-6)
    n = x.size
    floor = min(max(floor, 0), n)
    starts = np.asarray(start_ms, dtype=np.float64) if start_ms is not None and len(start_ms) == n \
        else np.cumsum(np.concatenate([[0.0], x[:-1]]))
    if n < MIN_SERIES:
        return Verdict(SteadyClass.TOO_SHORT, steady_start=floor)
    batch = math.ceil(n / MAX_POINTS)
    first = np.arange(0, n, batch)  # each batch's first iteration
    y = np.log(np.add.reduceat(x, first) / np.diff(np.append(first, n)))
    keep = ~_outliers(y)
    clean = y[keep]
    search = {"min_size": max(MIN_STEADY, clean.size // 40), "jump": max(1, clean.size // 40)}  # PELT is O((n/jump)^2)
    found = change_points(clean, EQUIVALENT, ALPHA, noise=_noise(clean, **search), **search)
    cuts = [int(first[np.flatnonzero(keep)[c]]) for c in found]
    bounds = [0, *cuts, n]
    levels = [float(np.median(x[a:b])) for a, b in zip(bounds, bounds[1:])]
    last = bounds[-2]
    end_ms = starts[-1] + x[-1]
    steady_start = max(last, floor)
    covers = end_ms - starts[last]  # the level's own span, floor or not
    common = dict(change_points=tuple(cuts), outliers=int((~keep).sum()))
    tail = keep & (first >= steady_start)  # the steady segment's batches, outliers left out
    if n - steady_start < MIN_STEADY or covers < STEADY_SHARE * end_ms or _drifts(y[tail], starts[first[tail]]):
        return Verdict(SteadyClass.NO_STEADY, steady_start=floor, **common)
    level = levels[-1]
    apart = [v for v in levels[:-1] if abs(v / level - 1) >= EQUIVALENT]
    if not apart:
        steady_class, steady_start = SteadyClass.FLAT, floor
    elif all(v > level for v in apart):
        steady_class = SteadyClass.WARMUP
    else:
        steady_class = SteadyClass.SLOWDOWN
    return Verdict(steady_class, steady_start=steady_start, warmup_s=float(starts[steady_start]) / 1000.0,
                   level_ms=float(np.median(x[steady_start:])), **common)


def _drifts(y: np.ndarray, t: np.ndarray) -> bool:
    """Does the line through ``y`` (log times) against ``t`` (their starts) move the level by
    EQUIVALENT or more over its span, beyond chance at ALPHA (the slope's t test, its standard
    error inflated for the residuals' lag-1 correlation as _noise does)?"""
    from scipy.stats import t as student

    n = y.size
    if n < MIN_STEADY or np.ptp(t) <= 0:
        return False
    slope, intercept = np.polyfit(t, y, 1)
    resid = y - (slope * t + intercept)
    r = _lag1(resid)
    se = math.sqrt(float((resid ** 2).sum()) / (n - 2) / float(((t - t.mean()) ** 2).sum()) * (1 + r) / (1 - r))
    beyond_chance = se == 0 or abs(slope) / se > student.isf(ALPHA / 2, n - 2)
    return abs(slope) * float(np.ptp(t)) >= math.log1p(EQUIVALENT) and beyond_chance


def _lag1(resid: np.ndarray) -> float:
    """Residuals' lag-1 autocorrelation, within [0, 0.9]."""
    r = float(np.corrcoef(resid[:-1], resid[1:])[0, 1]) if resid.size > 3 and resid.std() > 0 else 0.0
    return min(max(r if math.isfinite(r) else 0.0, 0.0), 0.9)


def _noise(y: np.ndarray, min_size: int, jump: int) -> float:
    """The spread of one iteration's log time, inflated for the correlation of neighbours (a
    slow spell lasts several iterations) so a segment mean's spread is not underestimated:
    sd * sqrt((1 + r) / (1 - r)), sd and r (lag-1 autocorrelation) of the residuals about a
    first segmentation that takes every level change beyond chance as if neighbours were
    independent (it over-segments, so no real level change is left in the residuals)."""
    rough = change_points(y, 0.0, 0.05, noise=_mad(np.diff(y)) / math.sqrt(2), min_size=min_size, jump=jump)
    bounds = [0, *rough, y.size]
    resid = np.concatenate([y[a:b] - np.median(y[a:b]) for a, b in zip(bounds, bounds[1:])])
    sd = float(resid.std())  # not a robust spread: spells of slow iterations are this noise too
    r = _lag1(resid)
    return sd * math.sqrt((1 + r) / (1 - r))


def _mad(d: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(d - np.median(d))))


def _local_median(y: np.ndarray, window: int) -> np.ndarray:
    pad = window // 2
    return np.median(np.lib.stride_tricks.sliding_window_view(np.pad(y, pad, mode="edge"), window), axis=1)


def _outliers(y: np.ndarray) -> np.ndarray:
    """Samples far from their neighbourhood's median (log scale; a step moves the median with
    it within half a window, so a level change is not an outlier)."""
    resid = y - _local_median(y, min(21, max(5, (y.size // 10) | 1)))
    spread = max(1.4826 * float(np.median(np.abs(resid - np.median(resid)))), 0.005)
    return np.abs(resid) > OUTLIER_K * spread


def tally(verdicts: Sequence[Verdict]) -> str:
    """The classes of a run's page loads, e.g. 'warm-up x2, flat x1' (most common first)."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.steady_class.value] = counts.get(v.steady_class.value, 0) + 1
    return ", ".join(f"{name} x{count}" for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def run_class(verdicts: Sequence[Verdict]) -> SteadyClass:
    """The class a row shows: no steady state if any page load had none; else too short if any
    was; else the most common of the settled classes (warm-up before flat on a tie: it says more)."""
    classes = [v.steady_class for v in verdicts]
    for worst in (SteadyClass.NO_STEADY, SteadyClass.TOO_SHORT):
        if worst in classes:
            return worst
    order = (SteadyClass.SLOWDOWN, SteadyClass.WARMUP, SteadyClass.FLAT)
    return max(order, key=lambda c: (classes.count(c), -order.index(c)))

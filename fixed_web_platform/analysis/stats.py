"""Statistics on raw timing samples, computed in Python (the page only measures)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

UNSTABLE_CV = 0.10
UNSTABLE_MAX_OVER_MEDIAN = 2.0


@dataclass(frozen=True)
class SampleStats:
    n: int
    median: float
    p10: float
    p90: float
    mean: float
    stdev: float
    iqr: float
    max: float
    cv: float
    """Coefficient of variation (stdev / mean); NaN with fewer than two samples."""

    @property
    def instability(self) -> str:
        """Why these samples should not be trusted as one number ('' when they can be)."""
        reasons = []
        if self.cv > UNSTABLE_CV:  # NaN compares false: one sample is not called unstable
            reasons.append(f"CV {self.cv:.1%} > {UNSTABLE_CV:.0%}")
        if self.median > 0 and self.max > UNSTABLE_MAX_OVER_MEDIAN * self.median:
            reasons.append(f"slowest sample {self.max / self.median:.1f}x the median")
        return "; ".join(reasons)


def summarize(samples: Sequence[float]) -> SampleStats:
    if len(samples) == 0:
        raise ValueError("no samples to summarize")
    a = np.asarray(samples, dtype=np.float64)
    mean = float(a.mean())
    stdev = float(a.std(ddof=1)) if a.size > 1 else math.nan
    q25, q75 = np.percentile(a, [25, 75])
    return SampleStats(
        n=int(a.size),
        median=float(np.median(a)),
        p10=float(np.percentile(a, 10)),
        p90=float(np.percentile(a, 90)),
        mean=mean,
        stdev=stdev,
        iqr=float(q75 - q25),
        max=float(a.max()),
        cv=stdev / mean if mean > 0 and a.size > 1 else math.nan,
    )


# ---------------------------------------------------------------------------------------------
# Page loads as the unit: a hierarchical bootstrap (resample page loads, then samples within each)

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 1123
"""Fixed, so the same folders always give the same interval and verdict."""
_CHUNK_VALUES = 2_000_000
"""Drawn values held at once (memory bound of one bootstrap chunk)."""


def _padded(pages: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    if not pages or any(len(p) == 0 for p in pages):
        raise ValueError("every page load needs at least one sample")
    lengths = np.array([len(p) for p in pages])
    values = np.full((len(pages), int(lengths.max())), np.nan)
    for i, page in enumerate(pages):
        values[i, :len(page)] = page
    return values, lengths


def bootstrap_medians(pages: Sequence[Sequence[float]], resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Medians of ``resamples`` hierarchical resamples: page loads drawn with replacement, then
    each drawn page's samples drawn with replacement (as many as it has), pooled."""
    values, lengths = _padded(pages)
    n_pages, width = values.shape
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    step = max(1, _CHUNK_VALUES // (n_pages * width))
    columns = np.arange(width)
    for start in range(0, resamples, step):
        size = min(step, resamples - start)
        pick = rng.integers(0, n_pages, size=(size, n_pages))
        lens = lengths[pick][..., None]
        pos = (rng.random((size, n_pages, width)) * lens).astype(np.int64)
        drawn = values[pick[..., None], pos]
        drawn[columns >= lens] = np.nan  # a page contributes its own number of samples
        out[start:start + size] = np.nanmedian(drawn.reshape(size, -1), axis=1)
    return out


def pooled_median(pages: Sequence[Sequence[float]]) -> float:
    return float(np.median(np.concatenate([np.asarray(p, dtype=np.float64) for p in pages])))


@dataclass(frozen=True)
class RatioInterval:
    """current / baseline ratio of pooled medians, with its hierarchical-bootstrap interval."""

    ratio: float
    low: float
    high: float
    level: float


def median_ratio_interval(baseline: Sequence[Sequence[float]], current: Sequence[Sequence[float]],
                          level: float) -> RatioInterval:
    """Percentile interval of median(current) / median(baseline), both sides resampled page
    loads first, then samples (so the page-to-page spread is part of the interval)."""
    b = bootstrap_medians(baseline, seed=BOOTSTRAP_SEED)
    c = bootstrap_medians(current, seed=BOOTSTRAP_SEED + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = c / b
    tail = (1 - level) / 2 * 100
    low, high = np.nanpercentile(ratios, [tail, 100 - tail])
    base_median = pooled_median(baseline)
    ratio = pooled_median(current) / base_median if base_median > 0 else math.nan
    return RatioInterval(ratio=ratio, low=float(low), high=float(high), level=level)


def median_interval(pages: Sequence[Sequence[float]], level: float = 0.95) -> tuple[float, float]:
    """Hierarchical-bootstrap interval of the pooled median (a single page: within-page only)."""
    medians = bootstrap_medians(pages)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)

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
# Independent units (repetitions, or page loads): each unit's median is one observation

def pooled_median(units: Sequence[Sequence[float]]) -> float:
    return float(np.median(np.concatenate([np.asarray(u, dtype=np.float64) for u in units])))


def _log_medians(units: Sequence[Sequence[float]]) -> np.ndarray:
    if not units or any(len(u) == 0 for u in units):
        raise ValueError("every unit needs at least one sample")
    medians = np.array([np.median(np.asarray(u, dtype=np.float64)) for u in units])
    if (medians <= 0).any():
        raise ValueError("unit medians must be positive to compare ratios")
    return np.log(medians)


@dataclass(frozen=True)
class RatioInterval:
    """current / baseline: the ratio of pooled medians (the figure shown) and the interval of
    the ratio of typical latencies from the units' medians."""

    ratio: float
    low: float
    high: float
    level: float


def welch_ratio_interval(baseline: Sequence[Sequence[float]], current: Sequence[Sequence[float]],
                         level: float) -> RatioInterval:
    """Welch's t on the logarithms of the units' medians (each unit one observation, so a handful
    of units gets the wide interval a handful deserves): ``exp(mean difference +- t * se)``.
    Needs at least two units a side."""
    from scipy import stats as scipy_stats

    b, c = _log_medians(baseline), _log_medians(current)
    if b.size < 2 or c.size < 2:
        raise ValueError("an interval needs at least two units a side")
    vb, vc = b.var(ddof=1) / b.size, c.var(ddof=1) / c.size
    se = math.sqrt(vb + vc)
    diff = float(c.mean() - b.mean())
    if se == 0:
        low = high = math.exp(diff)
    else:
        df = (vb + vc) ** 2 / (vb ** 2 / (b.size - 1) + vc ** 2 / (c.size - 1))
        t = float(scipy_stats.t.ppf(0.5 + level / 2, df))
        low, high = math.exp(diff - t * se), math.exp(diff + t * se)
    ratio = pooled_median(current) / pooled_median(baseline)
    return RatioInterval(ratio=ratio, low=low, high=high, level=level)


def median_interval(units: Sequence[Sequence[float]], level: float = 0.95) -> tuple[float, float]:
    """Interval of the typical latency from the units' medians (Student's t on their logarithms:
    the spread between units is in it). Needs at least two units."""
    from scipy import stats as scipy_stats

    logs = _log_medians(units)
    if logs.size < 2:
        raise ValueError("an interval needs at least two units")
    se = float(logs.std(ddof=1)) / math.sqrt(logs.size)
    t = float(scipy_stats.t.ppf(0.5 + level / 2, logs.size - 1))
    return math.exp(logs.mean() - t * se), math.exp(logs.mean() + t * se)

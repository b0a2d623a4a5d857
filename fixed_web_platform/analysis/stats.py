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

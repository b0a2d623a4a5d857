"""Statistics on raw timing samples, computed in Python (the page only measures)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SampleStats:
    n: int
    median: float
    p10: float
    p90: float
    mean: float
    stdev: float
    cv: float
    """Coefficient of variation (stdev / mean); NaN with fewer than two samples."""


def summarize(samples: Sequence[float]) -> SampleStats:
    if len(samples) == 0:
        raise ValueError("no samples to summarize")
    a = np.asarray(samples, dtype=np.float64)
    mean = float(a.mean())
    stdev = float(a.std(ddof=1)) if a.size > 1 else math.nan
    return SampleStats(
        n=int(a.size),
        median=float(np.median(a)),
        p10=float(np.percentile(a, 10)),
        p90=float(np.percentile(a, 90)),
        mean=mean,
        stdev=stdev,
        cv=stdev / mean if mean > 0 and a.size > 1 else math.nan,
    )

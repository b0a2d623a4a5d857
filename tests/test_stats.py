"""Unit tests for fixed_web_platform.series.stats: summarize and the intervals over units."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from fixed_web_platform.series.stats import summarize


def test_known_samples_unsorted() -> None:
    s = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert s.n == 5
    assert s.median == 3.0
    # numpy's default (linear) percentile on sorted [1..5]: position 0.1*4 = 0.4 and 0.9*4 = 3.6.
    assert s.p10 == pytest.approx(1.4)
    assert s.p90 == pytest.approx(4.6)
    assert s.mean == pytest.approx(3.0)
    assert s.stdev == pytest.approx(statistics.stdev([1, 2, 3, 4, 5]))  # sample stdev (n - 1)
    assert s.cv == pytest.approx(statistics.stdev([1, 2, 3, 4, 5]) / 3.0)


def test_known_samples_even_count() -> None:
    samples = [float(v) for v in range(10, 0, -1)]  # 10 .. 1
    s = summarize(samples)
    assert s.median == 5.5
    assert s.p10 == pytest.approx(1.9)
    assert s.p90 == pytest.approx(9.1)
    assert s.cv == pytest.approx(statistics.stdev(samples) / statistics.mean(samples))


def test_identical_samples_have_zero_spread() -> None:
    s = summarize([2.5, 2.5, 2.5])
    assert (s.median, s.p10, s.p90, s.stdev, s.cv) == (2.5, 2.5, 2.5, 0.0, 0.0)


def test_single_sample() -> None:
    s = summarize([7.25])
    assert s.n == 1
    assert s.median == s.p10 == s.p90 == s.mean == 7.25
    assert math.isnan(s.stdev)
    assert math.isnan(s.cv)


def test_zero_mean_has_nan_cv() -> None:
    assert math.isnan(summarize([0.0, 0.0]).cv)


@pytest.mark.parametrize("empty", [[], ()])
def test_empty_raises(empty: list[float]) -> None:
    with pytest.raises(ValueError, match="no samples"):
        summarize(empty)


# ------------------------------------------------------------------ page loads as the unit


def test_page_samples_split_by_page_and_drop_non_finite() -> None:
    from fixed_web_platform.results.reader import page_samples

    record = {"timing_source": "gpu-timestamp", "gpu_ms": [1.0, None, 2.0, 3.0, float("inf")],
              "wall_ms": [9.0] * 5, "samples_per_page": [2, 2, 1]}
    assert page_samples(record) == [[1.0], [2.0, 3.0]]  # the third page had only inf
    record["samples_per_page"] = [2, 2]  # counts that do not add up: one page
    assert page_samples(record) == [[1.0, 2.0, 3.0]]
    assert page_samples({"timing_source": "wall-clock", "wall_ms": [4.0, 5.0]}) == [[4.0, 5.0]]


def test_intervals_come_from_the_units_not_the_iterations() -> None:
    from fixed_web_platform.series.stats import median_interval, welch_ratio_interval

    rng = np.random.default_rng(0)
    tight = [list(10 * (1 + 0.001 * rng.standard_normal(50))) for _ in range(5)]
    levels = (9.0, 10.0, 11.0, 12.0, 8.0)
    spread = [list(level * (1 + 0.001 * rng.standard_normal(50))) for level in levels]
    lo_t, hi_t = median_interval(tight)
    lo_s, hi_s = median_interval(spread)
    assert hi_t - lo_t < 0.05 and hi_s - lo_s > 2.0  # units apart widen the interval
    # 500 samples either way: only the units count (five observations, t with 4 df)
    many = [list(level * (1 + 0.001 * rng.standard_normal(500))) for level in levels]
    assert median_interval(many) == pytest.approx((lo_s, hi_s), rel=0.01)
    same = welch_ratio_interval(spread, spread, 0.99)
    assert same.ratio == 1.0 and same.low < 1 < same.high
    slower = welch_ratio_interval(tight, [[2 * x for x in p] for p in tight], 0.99)
    assert slower.ratio == pytest.approx(2.0, rel=1e-3) and slower.low > 1.9
    with pytest.raises(ValueError):
        welch_ratio_interval(tight[:1], tight, 0.99)

"""Unit tests for fixed_web_platform.analysis.stats.summarize."""

from __future__ import annotations

import math
import statistics

import pytest

from fixed_web_platform.analysis.stats import summarize


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

"""Calibration observers on known distributions."""

from __future__ import annotations

import numpy as np
import pytest

from fixed_web_platform.precision import quant
from fixed_web_platform.precision.observers import (
    MSE,
    MinMax,
    MovingAverageMinMax,
    Percentile,
    fake_quantize,
    make_observer,
)


def _normal(n: int = 20_000, c: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, c))


def test_a_planted_outlier_moves_minmax_but_not_percentile() -> None:
    x = _normal()
    planted = x.copy()
    planted[123, 0] = 500.0
    mm, mm_out = MinMax(), MinMax()
    pc, pc_out = Percentile(percentile=99.9), Percentile(percentile=99.9)
    for obs, data in ((mm, x), (mm_out, planted), (pc, x), (pc_out, planted)):
        obs.observe(data)
    assert mm_out.range()[1][0] == 500.0 and mm.range()[1][0] < 6
    assert pc_out.range()[1][0] == pytest.approx(pc.range()[1][0], rel=1e-3)
    assert 2.5 < pc.range()[1][0] < 3.7  # the 99.9th percentile of a standard normal is 3.09


def test_mse_range_lies_inside_minmax_and_quantizes_better() -> None:
    x = _normal()
    x[7, 0] = 40.0  # one outlier: MinMax stretches, MSE clips it
    mm, mse = MinMax(), MSE(bits=8)
    mm.observe(x)
    mse.observe(x)
    (lo, hi), (mlo, mhi) = mse.range(), mm.range()
    assert (lo >= mlo).all() and (hi <= mhi).all() and hi[0] < 40
    errors = []
    for obs in (mm, mse):
        scale, zp = obs.qparams(8)
        errors.append(((fake_quantize(x, scale, zp, 8) - x) ** 2).mean())
    assert errors[1] < errors[0]


def test_moving_average_folds_each_batch_in() -> None:
    obs = MovingAverageMinMax(averaging_constant=0.25)
    obs.observe(np.array([[-1.0], [1.0]]))
    obs.observe(np.array([[-9.0], [5.0]]))
    lo, hi = obs.range()
    assert lo[0] == pytest.approx(0.75 * -1 + 0.25 * -9) and hi[0] == pytest.approx(0.75 + 1.25)
    with pytest.raises(ValueError):
        MovingAverageMinMax(averaging_constant=0)


def test_per_channel_ranges_and_the_weights_rule() -> None:
    x = _normal(1000, 4) * np.array([1.0, 2.0, 4.0, 8.0])
    per_channel = MinMax(per_channel=True)
    per_channel.observe(x.reshape(10, 100, 4))  # [..., C]: the last axis is the channel
    lo, hi = per_channel.range()
    assert lo.shape == hi.shape == (4,)
    assert np.allclose(hi, x.max(axis=0))
    # per tensor, MinMax's parameters are exactly those choose_qparams gives the same values
    tensor = MinMax()
    tensor.observe(x)
    scale, zp = tensor.qparams(8)
    ref = quant.choose_qparams(x, 8, granularity="per_tensor")
    assert scale.reshape(-1)[0] == ref.scale.reshape(-1)[0] and zp.reshape(-1)[0] == ref.zero_point.reshape(-1)[0]


def test_unknown_observer_and_empty_observer() -> None:
    with pytest.raises(ValueError, match="observer"):
        make_observer("kl")
    with pytest.raises(ValueError, match="no values"):
        MinMax().range()

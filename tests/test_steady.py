"""Steady state found from the data (series/steady.py, analysis/measurement.judge_series), on
series whose truth is known: synthetic ones with a realistic spread and correlation, and shapes
recorded from real pages."""

from __future__ import annotations

import numpy as np
import pytest

from fixed_web_platform.analysis.measurement import judge_series, steady_fields, steady_notes
from fixed_web_platform.page_protocol import PageReply
from fixed_web_platform.series.steady import SteadyClass, classify, run_class, tally


def noise(rng: np.random.Generator, n: int, cv: float, phi: float = 0.5) -> np.ndarray:
    """Multiplicative noise: log-normal with AR(1) correlation phi (a slow spell lasts a while)."""
    z = np.zeros(n)
    e = rng.normal(0.0, np.sqrt(1 - phi ** 2), n)
    for i in range(n):
        z[i] = (phi * z[i - 1] if i else rng.normal()) + e[i]
    return np.exp(cv * z)


def starts(ms: np.ndarray) -> list[float]:
    return list(np.concatenate([[0.0], np.cumsum(ms)[:-1]]))


def test_a_4x_drop_after_3_s_is_a_warm_up_measured_at_the_fast_level():
    rng = np.random.default_rng(0)
    ms = np.concatenate([np.full(375, 8.0), np.full(1600, 2.0)]) * noise(rng, 1975, 0.05)
    v = classify(ms, starts(ms))
    assert v.steady_class is SteadyClass.WARMUP
    assert v.level_ms == pytest.approx(2.0, rel=0.05)
    assert v.warmup_s == pytest.approx(3.0, abs=0.2)  # cuts fall on PELT's jump (1/40 of the series)
    assert 350 <= v.steady_start <= 400


@pytest.mark.parametrize("shape", ["drift", "cycles", "sine", "late step"])
def test_what_never_settles_is_no_steady_state(shape):
    rng = np.random.default_rng(1)
    n = 600
    i = np.arange(n)
    level = {
        "drift": np.linspace(1.0, 2.0, n),
        "cycles": 1 + 0.3 * (i // (n // 8) % 2),
        "sine": 1 + 0.3 * np.sin(i / n * 2 * np.pi * 3),
        "late step": np.where(i < 0.9 * n, 1.0, 1.5),
    }[shape]
    ms = level * noise(rng, n, 0.03)
    v = classify(ms, starts(ms))
    assert v.steady_class is SteadyClass.NO_STEADY, v
    assert v.level_ms is None and v.steady_start == 0  # the figures: everything after the floor


def test_a_smooth_drift_in_time_is_no_steady_state_however_pelt_cuts_it():
    """The scheduled drift page's shape (web/engines/schedule.js, recorded in both browsers): each
    iteration 0.5 ms x (1 + 20 t), hardly any noise, for 9 s. PELT cuts it into steps a few dozen
    iterations long; the last covers over a quarter of the time (the slow iterations) and must
    still not pass as a steady level: its own trend moves it 30%."""
    rng = np.random.default_rng(4)
    ms, t = [], 0.0
    while t < 9000:
        ms.append(0.5 * (1 + 20 * t / 1000) * float(np.exp(rng.normal(0, 0.002))))
        t += ms[-1] + 0.1
    v = classify(ms, starts(np.asarray(ms) + 0.1))
    assert v.steady_class is SteadyClass.NO_STEADY, v
    assert len(v.change_points) > 3


def test_spiky_flat_noise_is_flat_with_its_spikes_left_out_of_the_search():
    rng = np.random.default_rng(2)
    ms = noise(rng, 600, 0.03)
    spikes = rng.choice(600, 12, replace=False)
    ms[spikes] *= rng.uniform(3, 10, 12)
    v = classify(ms, starts(ms))
    assert v.steady_class is SteadyClass.FLAT
    assert v.outliers >= 10
    assert v.level_ms == pytest.approx(1.0, rel=0.03)


def test_a_slower_last_level_is_a_slowdown():
    rng = np.random.default_rng(3)
    ms = np.where(np.arange(600) < 200, 1.0, 1.4) * noise(rng, 600, 0.03)
    v = classify(ms, starts(ms))
    assert v.steady_class is SteadyClass.SLOWDOWN
    assert v.level_ms == pytest.approx(1.4, rel=0.03)


def test_the_floor_never_counts_as_steady_and_a_handful_is_too_short():
    ms = np.ones(100)
    assert classify(ms, floor=30).steady_start == 30
    short = classify(np.ones(6), floor=1)
    assert short.steady_class is SteadyClass.TOO_SHORT and short.steady_start == 1


def test_a_coarse_clock_series_is_flat():
    """Firefox's WebGPU wall clock: every iteration one ~100 ms tick."""
    rng = np.random.default_rng(4)
    assert classify(100 + rng.normal(0, 0.5, 60)).steady_class is SteadyClass.FLAT


def test_recorded_bimodal_gpu_series_is_flat():
    """Firefox/lavapipe GPU timestamps of a 128x768x768 matmul (a real page load): spells of
    ~40 ms among ~21 ms, a few iterations each. Stationary, so flat (its spread is the CV's business)."""
    gpu = [33.7, 32.9, 20.4, 23.6, 21.6, 29.5, 20.4, 23.1, 21.9, 24.8, 25.4, 22.6, 20.1, 39.0, 44.7, 29.1,
           38.4, 35.6, 33.3, 20.7, 33.2, 19.0, 20.3, 22.3, 20.6, 20.2, 20.6, 22.3, 40.1, 33.6, 36.0, 44.0,
           26.5, 40.2, 24.3, 23.3, 19.2, 40.6, 26.4]
    assert classify(gpu).steady_class is SteadyClass.FLAT


def test_false_no_steady_state_on_flat_series_is_at_most_5_percent():
    """Monte Carlo: flat series with realistic spread (CV 3-15%), AR(1) correlation 0.5 and, in
    half of them, 2% spikes of 2-6x; 40 series per setting, at most 5% false over all and 10% in
    any one setting (the calibration sweep behind ALPHA ran 200 per setting up to 1,000
    iterations: at most 3%)."""
    rng = np.random.default_rng(5)
    false_by_setting = {}
    for n in (12, 40, 150):
        for cv in (0.03, 0.08, 0.15):
            false = 0
            for _ in range(40):
                ms = noise(rng, n, cv)
                if rng.random() < 0.5:
                    at = rng.choice(n, max(1, n // 50), replace=False)
                    ms[at] *= rng.uniform(2, 6, at.size)
                false += classify(ms).steady_class is SteadyClass.NO_STEADY
            false_by_setting[n, cv] = false
    assert sum(false_by_setting.values()) <= 0.05 * 40 * len(false_by_setting), false_by_setting
    assert max(false_by_setting.values()) <= 4, false_by_setting


def page(wall, gpu=None, floor=0, stop="steady") -> PageReply:
    wall = tuple(float(x) for x in wall)
    return PageReply(status="ok", wall_ms=wall, start_ms=tuple(starts(np.asarray(wall))),
                     floor_iterations=floor, stop_reason=stop,
                     gpu_ms=None if gpu is None else tuple(float(x) for x in gpu))


def test_figures_come_from_the_steady_segment_and_gpu_timestamps_cover_the_last_iterations():
    rng = np.random.default_rng(6)
    wall = np.concatenate([np.full(300, 8.0), np.full(1200, 2.0)]) * noise(rng, 1500, 0.03)
    gpu = wall[-200:] * 0.9  # the ring kept the last 200
    (s,), source = judge_series([page(wall, gpu, floor=3)])
    assert source == "gpu-timestamp"
    assert s.gpu_offset == 1300 and s.start == 1300  # the steady segment starts earlier: GPU limits it
    assert len(s.wall) == len(s.gpu) == 200
    assert s.wall_verdict.steady_class is SteadyClass.WARMUP
    (w,), source = judge_series([page(wall, floor=3)])
    assert source == "wall-clock" and 280 <= w.start <= 320 and np.median(w.wall) == pytest.approx(2.0, rel=0.03)
    fields = steady_fields([w])
    assert fields["steady_class"] == "warm-up" and fields["stop_reason"] == "steady"
    assert fields["warmup_iterations"] == w.start and fields["warmup_s"] == pytest.approx(2.4, abs=0.1)
    assert fields["first_warm_ratio"] == pytest.approx(4.0, rel=0.1)


def test_a_page_without_a_steady_state_gives_its_figures_after_the_floor_and_says_so():
    drift = np.linspace(1, 3, 400)
    (s,), _ = judge_series([page(drift, floor=10)])
    assert s.verdict.steady_class is SteadyClass.NO_STEADY and s.start == 10
    assert "no steady state" in steady_notes([s])[0]


def test_a_run_shows_its_worst_page_and_tallies_them():
    flat, nss, short = (classify(np.ones(50)), classify(np.linspace(1, 3, 400)), classify(np.ones(5)))
    assert run_class([flat, nss]) is SteadyClass.NO_STEADY
    assert run_class([flat, short]) is SteadyClass.TOO_SHORT
    assert tally([flat, flat, nss]) == "flat x2, no steady state x1"


def _generations(rng: np.random.Generator, rates: list[float], steps: int = 31) -> tuple[list[list[float]], list[float]]:
    """Generations whose decode steps grow with context (10 -> 20 ms, 3% noise), each scaled by
    its rate; and their start offsets (one after the other, 50 ms of prefill each)."""
    gens = [list(np.linspace(10, 20, steps) * r * noise(rng, steps, 0.03)) for r in rates]
    starts = list(np.cumsum([0.0] + [50.0 + sum(g) for g in gens[:-1]]))
    return gens, starts


def test_decode_steps_are_judged_across_generations_after_their_growth_with_context():
    """Decode steps grow with context by design (a straight line is no drift); a jump is not."""
    from fixed_web_platform.series.steps import judge_steps

    rng = np.random.default_rng(7)
    judged = judge_steps(*_generations(rng, [1.0] * 10))
    assert judged.verdict.steady_class is SteadyClass.FLAT and judged.first == 0
    jump = [list(np.r_[np.linspace(10, 12, 25), np.full(6, 30.0)] * noise(rng, 31, 0.03))]
    assert judge_steps(jump, [0.0]).verdict.steady_class is SteadyClass.SLOWDOWN  # the last 6 steps: 40% of the time
    assert judge_steps([[1.0, 2.0, 3.0]], [0.0]).verdict.steady_class is SteadyClass.TOO_SHORT
    assert judge_steps([[], []], [0.0, 1.0]) is None


def test_a_slow_first_generation_is_a_warm_up_the_figures_leave_out():
    """The first generation's steps 40% slower: a warm-up, and decode tokens/s comes from the
    generations after it (a line per generation, as before, saw each generation flat)."""
    from fixed_web_platform.workloads.base import PageIterations
    from fixed_web_platform.workloads.decoder import timing

    rng = np.random.default_rng(11)
    gens, starts = _generations(rng, [1.4] + [1.0] * 11)
    doc = {"upload_ms": 1.0, "first_forward_ms": 1.0, "kv_cache_on_device": True,
           "memory": {"weights": 1, "kv_cache": 1, "scratch": 1},
           "generations": [{"ttft_ms": 50.0, "token_ms": g} for g in gens]}
    figures = timing.speed_figures(16, [PageIterations({"decoder": doc}, tuple(starts), 0)])
    assert figures["decode_steady_class"] == "warm-up"
    steady = [len(g) / sum(g) * 1000 for g in gens[1:]]
    assert figures["decode_tokens_per_s"] == pytest.approx(float(np.median(steady)))
    assert figures["decode_tokens_per_s"] > 1.2 * len(gens[0]) / sum(gens[0]) * 1000
    assert figures["ttft_steady_class"] == "flat" and figures["ttft_ms"] == 50.0


def test_a_drift_across_generations_has_no_steady_state():
    """Each generation 4% slower than the one before (12 of them: 1.5x over the page): no
    steady state, though every generation alone is flat."""
    from fixed_web_platform.series.steps import judge_steps

    rng = np.random.default_rng(5)
    judged = judge_steps(*_generations(rng, list(1.04 ** np.arange(12))))
    assert judged.verdict.steady_class is SteadyClass.NO_STEADY and judged.first == 0


def test_time_to_first_token_has_its_own_series():
    """Five slow prefills (a segment needs MIN_STEADY), then ten at 50 ms: the TTFT series'
    warm-up, and ttft_ms from after it; fewer than 10 generations: too short."""
    from fixed_web_platform.series.steps import judge_per_iteration

    rng = np.random.default_rng(3)
    ttft = list(80 * noise(rng, 5, 0.02)) + list(50 * noise(rng, 10, 0.02))
    judged = judge_per_iteration(ttft, list(np.arange(15) * 500.0))
    assert judged.verdict.steady_class is SteadyClass.WARMUP and judged.first == 5
    assert judge_per_iteration(ttft[:5], [0.0, 1.0, 2.0, 3.0, 4.0]).verdict.steady_class is SteadyClass.TOO_SHORT
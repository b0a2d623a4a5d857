"""web/timing.js's stop rule under node with a fake clock (fast tier: no browser).

tests/js/timing_harness.mjs imports web/timing.js and runs ``timeIterations(spec, once, clock)``
with a clock that only ``once`` moves: ``once(i, slot)`` advances the fake time by the
iteration's scheduled milliseconds (a JS expression ``(i, t) => ms`` given here; ``i`` is null
for the cold iteration, ``t`` the fake time at the call, 0 at the start) and returns them. So a
20 s series takes milliseconds of real time. The reply (JSON on stdout) is the result plus every
``(i, slot)`` that ``once`` got and the fake time at the end.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "js" / "timing_harness.mjs"
TIMING_URL = (ROOT / "web" / "timing.js").as_uri()

BASE = dict(warmup=1, warmup_min_ms=0, min_iterations=10, min_time_ms=0, max_iterations=200, budget_ms=60000,
            steady=True, steady_cap_ms=20000, steady_tolerance=0.05, batch_ms=0, record_cap=20000)
"""The spec the tests vary: steady mode, nothing but one warm-up iteration in the floor."""

FLAT = "(i) => i === null ? 50 : 1 + 0.02 * Math.sin(i)"
"""1 ms an iteration with small deterministic jitter (a 50 ms cold iteration)."""


class Timing:
    """One node process running tests/js/timing_harness.mjs, a job a line (module-scoped: node
    starts once, not once a test)."""

    def __init__(self, node: str) -> None:
        self.proc = subprocess.Popen([node, str(HARNESS), TIMING_URL], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def call(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            pytest.fail(f"node exited {self.proc.returncode}: {self.proc.stderr.read() if self.proc.stderr else ''}")
        reply = json.loads(line)
        assert "error" not in reply, reply["error"]
        return reply

    def run(self, series: str, batchable: bool = True, **spec: Any) -> dict[str, Any]:
        """timeIterations on BASE updated with ``spec``, under the fake clock."""
        return self.call({"op": "run", "spec": {**BASE, **spec}, "series": series, "batchable": batchable})

    def steady_window(self, ratio: float, half: int = 10, floor: int = 0, **spec: Any) -> bool:
        """steadyWindow on a series made so that its window is exactly 2 x ``half`` iterations,
        ``half`` of 1 ms then ``half`` of ``ratio`` ms: one long first iteration ends at exactly
        half the elapsed time."""
        wall = [half * (1 + ratio)] + [1.0] * half + [ratio] * half
        start = [0.0]
        for ms in wall[:-1]:
            start.append(start[-1] + ms)
        return self.call({"op": "window", "wallMs": wall, "startMs": start, "floor": floor,
                          "elapsed": start[-1] + wall[-1], "spec": {**BASE, **spec}})["steady"]

    def assert_stopped_at_first_chance(self, r: dict[str, Any], **spec: Any) -> None:
        """The page stopped no earlier than the rule first held on the series, and at most one
        check later (checks come every 5% of the iterations: a check sorts the window)."""
        first = self.call({"op": "firstSteady", "wallMs": r["wallMs"], "startMs": r["startMs"],
                           "floor": r["floorIterations"], "spec": {**BASE, **spec}})["n"]
        assert first is not None
        assert first <= len(r["wallMs"]) <= first + math.ceil(0.05 * first)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def timing() -> Iterator[Timing]:
    node = "/usr/bin/node" if Path("/usr/bin/node").exists() else shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    harness = Timing(node)
    yield harness
    harness.close()


def elapsed(r: dict[str, Any]) -> float:
    """Fake milliseconds from the first warm iteration's start to the last one's end."""
    return r["startMs"][-1] + r["wallMs"][-1] if r["wallMs"] else 0.0


def window(r: dict[str, Any]) -> list[float]:
    """The trailing window the rule judged at the stop: from the latest start at or before half
    the elapsed time (web/timing.js's steadyWindow), to the end."""
    half = elapsed(r) / 2
    w = max(k for k, s in enumerate(r["startMs"]) if s <= half)
    return r["wallMs"][w:]


# --- the order of once's calls ------------------------------------------------------------------

def test_once_gets_the_cold_iteration_then_indices_and_ring_slots(timing: Timing) -> None:
    r = timing.run(FLAT, max_iterations=7)
    n = len(r["wallMs"])
    assert n > 2 * 7  # the ring wrapped around at least twice
    assert r["calls"][0] == [None, None]
    assert r["calls"][1:] == [[i, i % 7] for i in range(n)]
    assert r["coldMs"] == 50
    # Every recorded start is the fake time since the first warm iteration's start.
    assert r["startMs"][0] == 0
    for k in range(1, n):
        assert r["startMs"][k] == pytest.approx(r["startMs"][k - 1] + r["wallMs"][k - 1])
    assert r["endTime"] == pytest.approx(50 + elapsed(r))


# --- 1. slow, then 4x faster --------------------------------------------------------------------

STEP_AT = 375  # 375 iterations of 8 ms: the slow phase lasts 3 s
STEP = f"(i) => i === null ? 50 : i < {STEP_AT} ? 8 : 2"


def test_flat_slow_phase_is_steady_when_nothing_holds_the_page(timing: Timing) -> None:
    """8 ms for 3 s, then 2 ms, with the default spec: a flat 8 ms phase IS steady by
    any rule that only sees the past, so with warmup_min_ms 0 and min_time_ms 0 the page stops
    after 4 x min_iterations iterations (312 ms), long before the step at 3 s. Nothing in the
    series so far hints at a later speed-up; warmup_min_ms (--warmup-time, for Chromium's wasm
    tier-up after seconds) is the protocol's answer, tested next."""
    r = timing.run(STEP)
    assert r["stopReason"] == "steady"
    assert len(r["wallMs"]) == 2 * BASE["min_iterations"] - 1 < STEP_AT
    assert set(r["wallMs"]) == {8}


def test_floor_spanning_the_slow_phase_makes_the_page_wait_for_the_fast_phase(timing: Timing) -> None:
    r = timing.run(STEP, warmup_min_ms=3000)
    assert r["stopReason"] == "steady"
    assert r["floorIterations"] == STEP_AT
    # The window starts after the floor and covers half the elapsed time (floor included), so
    # the page runs at least as long after the floor as in it.
    assert elapsed(r) >= 2 * 3000
    assert set(window(r)) == {2}
    assert statistics.median(r["wallMs"][len(r["wallMs"]) // 2:]) == 2


@pytest.mark.parametrize("power", [0.2, 0.3, 0.5])
def test_warm_up_then_step_does_not_stop_before_the_fast_phase(timing: Timing, power: float) -> None:
    """A slow phase that is still warming up (8 ms x (t / 3 s)^-power: from 20-80 ms down to
    8 ms) for 3 s, then 2 ms, with the default spec (no floor to speak of). The rule must not
    call any part of the ramp steady, and must stop once the fast level dominates the trailing
    window: a rule judging only the latest 2 x min_iterations iterations would stop on the ramp
    (it moves by 2% or less over 20 iterations)."""
    r = timing.run(f"(i, t) => i === null ? 50 : t < 3050 ? 8 * (Math.max(t - 50, 30) / 3000) ** -{power} : 2")
    ms = r["wallMs"]
    first_fast = ms.index(2)
    assert r["stopReason"] == "steady"
    assert len(ms) > first_fast + 2 * BASE["min_iterations"]
    assert r["startMs"][first_fast] >= 3000 and elapsed(r) > 3000
    assert ms[-2 * BASE["min_iterations"]:] == [2] * (2 * BASE["min_iterations"])
    assert statistics.median(ms[len(ms) // 2:]) == 2
    # The rule's own view: both halves of the judged window have the fast median (the window
    # may still begin with some slow iterations: medians see through fewer than half).
    win = window(r)
    half = len(win) // 2
    assert statistics.median(win[:half]) == statistics.median(win[-half:]) == 2
    timing.assert_stopped_at_first_chance(r)


# --- 2. a flat series stops soon ----------------------------------------------------------------

@pytest.mark.parametrize(("min_iterations", "warmup", "warmup_min_ms"), [(10, 1, 0), (50, 5, 0), (10, 1, 200)])
def test_flat_series_stops_steady_soon(timing: Timing, min_iterations: int, warmup: int, warmup_min_ms: float) -> None:
    r = timing.run(FLAT, min_iterations=min_iterations, warmup=warmup, warmup_min_ms=warmup_min_ms)
    n, floor = len(r["wallMs"]), r["floorIterations"]
    assert r["stopReason"] == "steady"
    assert n - floor >= min_iterations
    # The least the rule needs at ~1 ms an iteration: a window of min_iterations iterations
    # starting at or before half the elapsed time (so about twice that many in all), starting
    # after the floor (so at least twice the floor).
    needed = max(2 * min_iterations - 2, 2 * floor)
    assert n >= needed
    assert elapsed(r) <= 3 * needed * 1.02
    timing.assert_stopped_at_first_chance(r, min_iterations=min_iterations, warmup=warmup,
                                          warmup_min_ms=warmup_min_ms)


@pytest.mark.parametrize("min_time_ms", [500, 2000])
def test_steady_mode_needs_min_time_after_the_floor(timing: Timing, min_time_ms: float) -> None:
    r = timing.run(FLAT, min_time_ms=min_time_ms, warmup=5)
    after_ms = elapsed(r) - r["startMs"][r["floorIterations"]]
    assert r["stopReason"] == "steady"
    assert min_time_ms <= after_ms <= 1.2 * min_time_ms  # checks come every 5% of the iterations
    timing.assert_stopped_at_first_chance(r, min_time_ms=min_time_ms, warmup=5)


# --- 3. a series that never settles -------------------------------------------------------------

@pytest.mark.parametrize("series", [
    "(i) => i === null ? 50 : 1.05 ** i",    # 5% slower every iteration
    "(i) => i === null ? 50 : 1 + 0.5 * i",  # 0.5 ms slower every iteration
])
@pytest.mark.parametrize("cap_ms", [5000, 20000])
def test_never_settling_series_stops_at_the_cap(timing: Timing, series: str, cap_ms: float) -> None:
    r = timing.run(series, steady_cap_ms=cap_ms)
    assert r["stopReason"] == "cap"
    # At the first check past the cap: the last iteration started before it and ended after.
    assert r["startMs"][-1] < cap_ms <= elapsed(r)


# --- 4. the floor, longer than max_iterations -----------------------------------------------------

def test_floor_longer_than_max_iterations_and_the_gpu_ring(timing: Timing) -> None:
    r = timing.run("(i) => i === null ? 50 : 0.5", warmup_min_ms=2000)
    n, ring = len(r["wallMs"]), BASE["max_iterations"]
    assert r["floorIterations"] == 4000  # 2 s of 0.5 ms iterations
    assert r["stopReason"] == "steady"  # not max-iterations: that is counts mode's
    assert n >= 2 * 4000  # the window after the floor covers half the elapsed time
    assert r["gpuOrder"] == [(n - ring + k) % ring for k in range(ring)]
    assert r["gpuOrder"][-1] == (n - 1) % ring
    assert r["calls"][1:] == [[i, i % ring] for i in range(n)]


# --- 5. counts mode ----------------------------------------------------------------------------

@pytest.mark.parametrize(("warmup", "warmup_min_ms", "min_time_ms", "reason", "after"), [
    (3, 0, 0, "counts", 10),                   # min_iterations
    (1, 50, 0, "counts", 10),                  # after a 50-iteration floor
    (1, 0, 100, "counts", 100),                # min_time_ms: 100 iterations of 1 ms
    (1, 0, 1e9, "max-iterations", 200),
    (1, 50, 1e9, "max-iterations", 200),       # max_iterations counts after the floor
])
def test_counts_mode(timing: Timing, warmup: int, warmup_min_ms: float, min_time_ms: float, reason: str,
                     after: int) -> None:
    # 1 ms an iteration for 150 iterations (so the floor and min_time_ms are counts of them), then
    # a drift that never settles: counts mode does not look at the values (nor at steady_cap_ms).
    r = timing.run("(i) => i === null ? 5 : i < 150 ? 1 : 1 + 0.01 * (i - 149)",
                   steady=False, warmup=warmup, warmup_min_ms=warmup_min_ms, min_time_ms=min_time_ms,
                   steady_cap_ms=10)
    floor = max(warmup, warmup_min_ms)
    assert r["stopReason"] == reason
    assert r["floorIterations"] == floor
    assert len(r["wallMs"]) == floor + after


# --- 6. budget and record cap ------------------------------------------------------------------

@pytest.mark.parametrize(("cold_ms", "budget_ms", "warmup_min_ms", "n"), [
    (5, 15, 0, 10),        # the budget counts the cold iteration
    (50, 30, 0, 1),        # spent on the cold iteration: one warm iteration all the same
])
def test_budget(timing: Timing, cold_ms: float, budget_ms: float, warmup_min_ms: float, n: int) -> None:
    r = timing.run(f"(i) => i === null ? {cold_ms} : 1", budget_ms=budget_ms, warmup_min_ms=warmup_min_ms)
    assert r["stopReason"] == "budget"
    assert len(r["wallMs"]) == n
    assert r["floorIterations"] == 1


def test_the_floor_never_eats_the_budget(timing: Timing) -> None:
    """A floor asked to run longer than the page's budget ends at a third of it: the samples
    after it have the rest (the ORT wasm floor of 8 s once left a fast file's page none)."""
    r = timing.run("(i) => i === null ? 5 : 1", budget_ms=1200, warmup_min_ms=2000)
    assert r["floorIterations"] == 400
    assert r["stopReason"] == "steady" and len(r["wallMs"]) - 500 >= BASE["min_iterations"]


@pytest.mark.parametrize(("warmup", "steady", "floor"), [(1, True, 1), (100, True, 5), (1, False, 1)])
def test_record_cap(timing: Timing, warmup: int, steady: bool, floor: int) -> None:
    """The page stops at the record cap; a floor longer than a third of it ends there."""
    r = timing.run(FLAT, record_cap=15, warmup=warmup, steady=steady, min_time_ms=0 if steady else 1e9)
    assert r["stopReason"] == "record-cap"
    assert len(r["wallMs"]) == 15
    assert r["floorIterations"] == floor


# --- 6b. work too fast for the clock, and slow work at the cap ---------------------------------

def test_microsecond_work_is_timed_in_batches(timing: Timing) -> None:
    """1/32 ms a run: the first sample (one run) spans less than half of sample_min_ms (1 ms), so
    every later one is the mean of the 32 runs that span it, timed around the batch; a runner that
    records per iteration is not batched."""
    r = timing.run("(i) => i === null ? 5 : 1 / 32", sample_min_ms=1)
    assert r["iterationsPerSample"] == 32
    assert all(w == pytest.approx(1 / 32) for w in r["wallMs"])
    assert len(r["calls"]) == 1 + 1 + 32 * (len(r["wallMs"]) - 1)
    assert r["stopReason"] == "steady"
    single = timing.run("(i) => i === null ? 5 : 1 / 32", sample_min_ms=1, batchable=False)
    assert single["iterationsPerSample"] == 1 and len(single["calls"]) == 1 + len(single["wallMs"])
    slow = timing.run("(i) => i === null ? 5 : 2", sample_min_ms=1)
    assert slow["iterationsPerSample"] == 1
    # a slow start (0.25 ms runs for the first 8) does not fix the batch small: it grows again
    warming = timing.run("(i) => i === null ? 5 : i < 8 ? 0.25 : 1 / 64", sample_min_ms=1)
    assert warming["iterationsPerSample"] >= 32 and min(warming["wallMs"]) == pytest.approx(1 / 64)


def test_the_cap_waits_for_the_least_samples(timing: Timing) -> None:
    """Iterations of 4 s under a 10 s cap: the page runs on past the cap until it has
    least_samples after its floor (the budget would still stop it)."""
    r = timing.run("(i) => i === null ? 5 : 4000", steady_cap_ms=10000, least_samples=3, budget_ms=60000)
    assert r["stopReason"] == "cap" and len(r["wallMs"]) - r["floorIterations"] == 3
    assert elapsed(r) > 10000


# --- 7. a coarse clock (Firefox: 100 ms ticks) --------------------------------------------------

def test_iterations_of_one_tick_are_steady(timing: Timing) -> None:
    r = timing.run("(i) => i === null ? 100 : 100 + 0.5 * Math.sin(i)")
    assert r["stopReason"] == "steady"
    assert elapsed(r) < BASE["steady_cap_ms"] / 4


ALTERNATING = "(i) => i === null ? 100 : i % 2 ? 100 : 0.1"
"""~50 ms iterations read on a 100 ms clock: 0.1, 100, 0.1, 100, ..."""
TICKS_30MS = "(i) => i === null ? 100 : 100 * (Math.floor((i + 1) * 0.3) - Math.floor(i * 0.3))"
"""30 ms iterations read on a 100 ms clock: 0, 0, 0, 100, 0, 0, 100, ... (0 ms mostly)."""


def test_alternating_ticks_without_batches(timing: Timing) -> None:
    """What the rule as written does with batch_ms 0 on the alternating series: it stops
    'steady', but by the parity of the halves. The first check with a long enough window
    (n = 39) has halves of 10 iterations, five of each reading, and the median of an even
    count averages the middle two: 50.05 ms in both halves. With odd halves each median is
    its half's majority reading, and the rule waits for a check where they agree."""
    r = timing.run(ALTERNATING)
    assert r["stopReason"] == "steady"
    win = window(r)
    half = len(win) // 2
    assert statistics.median(win[:half]) == pytest.approx(statistics.median(win[-half:]), rel=0.05)


def test_alternating_ticks_are_judged_on_batches(timing: Timing) -> None:
    unbatched = timing.run(ALTERNATING)
    r = timing.run(ALTERNATING, batch_ms=250)
    assert r["stopReason"] == "steady"
    # Each half needs 3 batches of >= 250 ms, so the window >= 1500 ms, half the elapsed time
    # (less one iteration): later than per-iteration judging.
    assert elapsed(r) >= 2 * 1500 - 2 * 100
    assert len(r["wallMs"]) > len(unbatched["wallMs"])


@pytest.mark.parametrize(("batch_ms", "reason"), [(0, "cap"), (250, "steady")])
def test_30ms_iterations_on_a_100ms_clock(timing: Timing, batch_ms: float, reason: str) -> None:
    """Read one at a time the iterations are mostly 0 ms: every half's median is 0 and the rule
    never calls that steady (it needs a positive level), so the page runs to the cap. Judged on
    batches of >= 250 ms the means are ~30 ms in both halves: steady in a few seconds."""
    r = timing.run(TICKS_30MS, batch_ms=batch_ms)
    assert r["stopReason"] == reason
    if reason == "steady":
        assert elapsed(r) < BASE["steady_cap_ms"] / 4


# --- 8. steadyWindow ----------------------------------------------------------------------------

@pytest.mark.parametrize(("ratio", "steady"), [
    (1.10, False), (0.90, False), (1.03, True), (0.97, True), (1.0, True),
    (1.049, True), (1.051, False),  # either side of steady_tolerance (5%)
])
def test_steady_window_halves(timing: Timing, ratio: float, steady: bool) -> None:
    assert timing.steady_window(ratio) is steady


def test_steady_window_tolerance_is_the_spec_s(timing: Timing) -> None:
    assert timing.steady_window(1.10, steady_tolerance=0.12) is True
    assert timing.steady_window(1.03, steady_tolerance=0.02) is False


def test_steady_window_needs_enough_iterations_after_the_floor(timing: Timing) -> None:
    assert timing.steady_window(1.0, half=10, min_iterations=20) is True
    assert timing.steady_window(1.0, half=9, min_iterations=20) is False  # 18 < min_iterations
    assert timing.steady_window(1.0, floor=1) is True
    assert timing.steady_window(1.0, floor=2) is False  # the window would start inside the floor

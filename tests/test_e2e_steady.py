"""The steady-state protocol end to end in real browsers: a scheduled page (web/engines/schedule.js)
slow for 3 s then 4x faster is measured at its fast level and classed warm-up (its flat slow
plateau is what a floor is for: the rule alone would stop on it, docs/concepts/steady-state.md);
a drifting page is flagged as never steady, at the cap. The page's stop rule (web/timing.js) and Python's classification
(series/steady.py) meet a series whose truth is known."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from conftest import require_browser

from fixed_web_platform.analysis.measurement import judge_series
from fixed_web_platform.browsers.sessions import launch
from fixed_web_platform.harness.page import visit_page
from fixed_web_platform.harness.runner import SweepOptions, resolve_browser
from fixed_web_platform.harness.server import JobServer
from fixed_web_platform.page_protocol import JobSpec, parse_page_reply
from fixed_web_platform.run_spec import TimingConfig
from fixed_web_platform.series.steady import SteadyClass
from fixed_web_platform.vocabulary import BrowserName, Outcome

pytestmark = [pytest.mark.browser,
              pytest.mark.alone(why="a busy machine shifts the pages' levels: the series' truth is no longer known")]
TIMING = TimingConfig(warmup=1, min_iterations=10, min_time_s=0, steady=True, steady_cap_s=9, timeout_s=60)
FLOOR = dataclasses.replace(TIMING, warmup_min_s=3.0)
STEP = {"schedule": "step", "slow_ms": 8.0, "fast_ms": 2.0, "switch_ms": 3000.0}
DRIFT = {"schedule": "drift", "base_ms": 0.5, "growth_per_s": 20.0}  # slower in proportion to time: no window is ever flat


async def _visit_all(browser: BrowserName, jobs: list[tuple[dict, TimingConfig]]) -> list:
    session = await asyncio.to_thread(launch, resolve_browser(browser, SweepOptions()))
    try:
        async with JobServer() as server:
            replies = []
            for options, timing in jobs:
                spec = JobSpec(runner="schedule", engine="schedule", platform="wasm", timing=timing, options=options)
                visit = await visit_page(server, session, spec, {}, timing.timeout_s)
                assert visit.outcome is Outcome.OK, visit.reason
                replies.append(parse_page_reply(visit.payload))
            return replies
    finally:
        await asyncio.to_thread(session.close)


@pytest.mark.parametrize("browser", [BrowserName.CHROME, BrowserName.FIREFOX])
def test_a_warm_up_is_measured_at_its_fast_level_and_a_drift_is_flagged(browser):
    require_browser(browser)
    step, drift = asyncio.run(_visit_all(browser, [(STEP, FLOOR), (DRIFT, TIMING)]))

    assert step.stop_reason == "steady"
    # The window covers half the elapsed time and holds (nearly) only fast samples: the page stops
    # near twice the switch. "Nearly": the halves' medians tolerate a few slow samples at the window's
    # start, so the window may begin a few slow samples (8 ms each) before the switch.
    ended_ms = step.start_ms[-1] + step.wall_ms[-1]
    assert step.floor_iterations > 0 and ended_ms > 2 * (STEP["switch_ms"] - 5 * STEP["slow_ms"])
    (judged,), _ = judge_series([step])
    assert judged.verdict.steady_class is SteadyClass.WARMUP, judged.verdict
    assert judged.verdict.level_ms == pytest.approx(STEP["fast_ms"], rel=0.05)
    assert judged.verdict.warmup_s == pytest.approx(STEP["switch_ms"] / 1000, abs=0.3)
    assert min(judged.wall) > STEP["fast_ms"] * 0.9 and sorted(judged.wall)[len(judged.wall) // 2] < 2.1

    assert drift.stop_reason == "cap"
    assert drift.start_ms[-1] >= TIMING.steady_cap_s * 1000 * 0.9
    (judged,), _ = judge_series([drift])
    assert judged.verdict.steady_class is SteadyClass.NO_STEADY, judged.verdict

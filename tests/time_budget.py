"""The suite's time budget (docs/testing.md): each test's time, its fixtures' set-up included, is
held against a per-test budget, and the run ends with its wall time and its slowest tests.

- A test whose set-up plus call takes longer than ``--test-budget`` seconds (240 by default: the
  slowest unmarked test takes 100-120 s on an idle 2-core machine here, alone or beside
  the other test worker, the rest is slack for a loaded machine) fails, unless it is marked ``@pytest.mark.budget(seconds, why="...")``: a larger
  budget of its own and the reason it must be that long. A module- or session-scoped fixture's set-up counts
  against the first test that asks for it, which is where pytest spends it.
- A test that failed for its own reason keeps that failure; the budget only turns a pass into a
  failure.
- ``--test-budget 0`` switches the check off (for profiling under a debugger, say).
- With test workers (tests/workers.py) the summary also gives each worker's summed test time:
  two sums close to the wall time say the workers were balanced.

Loaded by tests/conftest.py (``pytest_plugins``)."""

from __future__ import annotations

import time

import pytest

DEFAULT_BUDGET_S = 240.0
SLOWEST_SHOWN = 10
_spent = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--test-budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                     help=f"fail a test whose set-up + call take longer (default {DEFAULT_BUDGET_S:g}; 0: no check) "
                          "unless it is marked budget(seconds, why=...)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "budget(seconds, why): this test may take up to SECONDS (set-up "
                                       "included) instead of the suite's per-test budget; WHY says why it must")
    config.pluginmanager.register(Clock(), "time_budget_clock")


def budget_of(item: pytest.Item) -> float | None:
    """The seconds this test may take: its own budget mark, else the suite's (None: a mark that
    does not give a positive number of seconds and a reason)."""
    mark = item.get_closest_marker("budget")
    if mark is None:
        return item.config.getoption("--test-budget")
    seconds = mark.kwargs.get("seconds", mark.args[0] if mark.args else None)
    why = mark.kwargs.get("why", mark.args[1] if len(mark.args) > 1 else "")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0 or not str(why).strip():
        return None
    return float(seconds)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    """A pass over budget becomes a failure."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    spent = item.stash.get(_spent, 0.0) + call.duration
    item.stash[_spent] = spent
    if report.when != "call" or not report.passed:
        return
    budget = budget_of(item)
    if budget is None:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: budget() takes a positive number of seconds and why=\"...\""
    elif budget and spent > budget:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} took {spent:.0f} s (set-up included), over its budget of {budget:g} s: "
                           "make it cheaper, or mark it @pytest.mark.budget(seconds, why=...) saying why it must "
                           "take that long (docs/testing.md)")


class Clock:
    """Every test's time over its phases, and the summary at the end."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.times: dict[str, float] = {}
        self.per_worker: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.times[report.nodeid] = self.times.get(report.nodeid, 0.0) + report.duration
        worker = getattr(getattr(report, "node", None), "gateway", None)  # pytest-xdist's worker
        if worker is not None:
            self.per_worker[worker.id] = self.per_worker.get(worker.id, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        if not self.times:
            return
        wall = time.monotonic() - self.started
        busy = ", ".join(f"{w} {t:.0f} s" for w, t in sorted(self.per_worker.items()))
        terminalreporter.write_sep("=", f"time: {wall:.0f} s wall, {len(self.times)} tests"
                                        + (f" (tests' time per worker: {busy})" if busy else "")
                                        + f"; the {SLOWEST_SHOWN} slowest (set-up, call and teardown)")
        for nodeid, spent in sorted(self.times.items(), key=lambda kv: -kv[1])[:SLOWEST_SHOWN]:
            terminalreporter.write_line(f"{spent:8.1f} s  {nodeid}")

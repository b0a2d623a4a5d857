"""The suite's time guard (tests/time_budget.py): a test over the per-test budget fails, its
fixtures' set-up counted with it, unless it is marked with a budget and a reason; the run ends
with its wall time and slowest tests."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import time
import pytest

@pytest.fixture(scope="module")
def slow_set_up():
    time.sleep(0.4)

def test_slow_in_its_fixture(slow_set_up):
    pass

def test_slow_fixture_already_paid(slow_set_up):
    pass

def test_slow_in_its_call():
    time.sleep(0.4)

@pytest.mark.budget(30, why="it must read the whole model")
def test_marked_with_a_reason():
    time.sleep(0.4)

@pytest.mark.budget(30)
def test_marked_without_a_reason():
    pass

def test_failing_for_its_own_reason():
    time.sleep(0.4)
    assert 1 == 2, "its own reason"
"""


def test_over_budget_fails_unless_marked_with_a_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "time_budget", "--test-budget", "0.3")
    outcomes = {r.nodeid.split("::")[-1]: r.outcome for r in result.reprec.getreports("pytest_runtest_logreport")
                if r.when == "call"}
    assert outcomes == {
        "test_slow_in_its_fixture": "failed",  # the module fixture's set-up is charged here
        "test_slow_fixture_already_paid": "passed",
        "test_slow_in_its_call": "failed",
        "test_marked_with_a_reason": "passed",
        "test_marked_without_a_reason": "failed",
        "test_failing_for_its_own_reason": "failed",
    }
    result.stdout.fnmatch_lines(["*test_slow_in_its_fixture took 0 s (set-up included), over its budget of 0.3 s*",
                                 "*test_marked_without_a_reason: budget() takes a positive number of seconds*",
                                 "*its own reason*"])
    result.stdout.fnmatch_lines(["*time: * s wall, 6 tests; the 10 slowest*", "*s  test_suite.py::*"])


def test_a_zero_budget_switches_the_check_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest("-p", "time_budget", "--test-budget", "0").assert_outcomes(passed=4, failed=2)

"""The suite's two workers (tests/workers.py): a test marked ``alone`` runs while no test runs on
the other worker, and one worker's tests never wait for each other."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITE = '''
import time, pytest

def _span(name):
    start = time.monotonic()
    time.sleep(0.4)
    with open("spans.txt", "a") as f:
        f.write(f"{name} {start} {time.monotonic()}\\n")

@pytest.mark.parametrize("i", range(4))
def test_busy(i):
    _span(f"busy{i}")

@pytest.mark.alone(why="checks the lock")
def test_alone():
    _span("alone")
'''


def test_an_alone_test_overlaps_no_other_test(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # where workers.py is
    pytester.makeconftest("pytest_plugins = ['workers']")
    pytester.makepyfile(test_other=SUITE.replace("alone", "other").replace("@pytest.mark.other", "#"),
                        test_lone=SUITE)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=10)
    spans = {}
    for line in (pytester.path / "spans.txt").read_text().splitlines():
        name, start, end = line.split()
        spans.setdefault(name, []).append((float(start), float(end)))
    (alone,) = spans.pop("alone")
    others = [s for ss in spans.values() for s in ss]
    assert len(others) == 9  # busy0-3 twice and test_other, which is not marked
    assert all(end <= alone[0] or start >= alone[1] for start, end in others), (alone, sorted(others))
    # and the two workers did run side by side otherwise
    assert any(a[0] < b[1] and b[0] < a[1] for a in others for b in others if a != b)

"""The suite on two workers (pytest-xdist: ``-n 2 --dist loadgroup`` in pyproject.toml's addopts;
docs/testing.md): which tests share a worker, which run alone, and in what order they are handed
out. Loaded first by tests/conftest.py as a plug-in.

- A module's tests stay together on one worker, so its module-scoped fixtures (a browser sweep,
  an export) run once; the modules that read one of shared_sweeps.py's session sweeps share one
  group, so that sweep runs once too.
- A test marked ``alone(why=...)`` runs while no test runs on the other worker: a test whose
  truth a busy machine changes (a page's timing series judged steady or not). Every other test
  holds a shared lock while it runs, an ``alone`` test an exclusive one, behind a turnstile so the
  other worker cannot keep it waiting with test after test (``_turn``). The wait is not part of
  the test's time.
- Under workers, modules with browser tests are handed out first, then the unit tests, and the
  modules of ``alone`` tests last: the long end-to-end modules start early, the short unit modules
  even out the two workers' ends, and an ``alone`` test waits for no more than a unit test
  (xdist hands out groups in collection order with ``--no-loadscope-reorder``).
- Each worker's numpy (OpenBLAS) and PyTorch (OpenMP) use one thread (``THREAD_VARIABLES``):
  two workers on two cores, each with two threads that spin while they wait, would take CPU from
  the other worker's browser. This module loads before any that imports numpy.

Without workers (``-n 0``) none of this applies: the marks do nothing, the order is pytest's own
and the libraries pick their thread counts themselves."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
WORKER = "PYTEST_XDIST_WORKER" in os.environ
if WORKER:
    for variable in THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")

SHARED_GROUPS = {"minilm_chrome": "shared-minilm", "minilm_firefox": "shared-minilm"}
"""shared_sweeps.py's session fixtures and the group of every module that asks for one."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "alone(why): with test workers, run while no test runs on another "
                                       "worker; WHY says what a busy machine would change")


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks into the tests' ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    for item in items:
        module = _module(item)
        shared = next((SHARED_GROUPS[f] for f in getattr(item, "fixturenames", ()) if f in SHARED_GROUPS), None)
        if shared:
            groups[module] = shared  # one test asking for a shared sweep takes its whole module along
        else:
            groups.setdefault(module, module)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[_module(item)]))
    if WORKER:
        alone = {groups[_module(i)] for i in items if i.get_closest_marker("alone")}
        browser = {groups[_module(i)] for i in items if i.get_closest_marker("browser")}
        items.sort(key=lambda i: (groups[_module(i)] in alone, groups[_module(i)] not in browser))


@contextlib.contextmanager
def _turn(alone: bool, folder: Path) -> Iterator[None]:
    """Hold the running lock, shared (or exclusive for an ``alone`` test), taken through the
    turnstile: an ``alone`` test keeps the turnstile until it ends, so no new test starts on
    another worker while it waits for the running one and while it runs."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "turnstile").open("a") as gate, (folder / "running").open("a") as running:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(running, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        yield  # the files' closing releases both locks


def lock_folder() -> Path:
    """Where this run's workers meet: one folder per test run (xdist's run id)."""
    return Path(tempfile.gettempdir()) / f"pytest-workers-{os.environ.get('PYTEST_XDIST_TESTRUNUID', 'none')}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ANN201
    if not WORKER:
        yield
        return
    with _turn(item.get_closest_marker("alone") is not None, lock_folder()):
        yield

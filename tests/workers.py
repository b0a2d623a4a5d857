"""The suite on two workers (pytest-xdist: ``-n 2 --dist loadgroup`` in pyproject.toml's addopts;
docs/testing.md): which tests share a worker and in what order they are handed out. Loaded by
tests/conftest.py as a plug-in.

- A module's tests stay together on one worker, so its module-scoped fixtures (a browser sweep,
  an export) run once; the modules that read one of shared_sweeps.py's session sweeps share one
  group, so that sweep runs once too.
- Under workers, modules with browser tests are handed out first and the unit tests last: the
  long end-to-end modules start early and the short unit modules even out the two workers' ends
  (xdist hands out groups in collection order with ``--no-loadscope-reorder``).

- Each worker's numpy (OpenBLAS) and PyTorch (OpenMP) use one thread (``THREAD_VARIABLES``):
  two workers on two cores, each with two threads that spin while they wait, would take CPU from
  the other worker's browser. Loaded before any module that imports numpy.

Without workers (``-n 0``) none of this applies: the marks do nothing, the order is pytest's own
and the libraries pick their thread counts themselves."""

from __future__ import annotations

import os

import pytest

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
WORKER = "PYTEST_XDIST_WORKER" in os.environ
if WORKER:
    for variable in THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")

SHARED_GROUPS = {"minilm_chrome": "shared-minilm", "minilm_firefox": "shared-minilm"}
"""shared_sweeps.py's session fixtures and the group of every module that asks for one."""


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks into the tests' ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    for item in items:
        module = _module(item)
        shared = next((SHARED_GROUPS[f] for f in getattr(item, "fixturenames", ()) if f in SHARED_GROUPS), None)
        if shared or module not in groups:
            groups[module] = shared or groups.get(module, module)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[_module(item)]))
    if WORKER:
        browser = {groups[_module(i)] for i in items if i.get_closest_marker("browser")}
        items.sort(key=lambda i: groups[_module(i)] not in browser)  # stable: pytest's order otherwise

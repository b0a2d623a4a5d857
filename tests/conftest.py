"""Shared fixtures. End-to-end tests start real browsers; they fail (not skip) when one is
missing, because scripts/setup.sh installs them and CI runs it first."""

from __future__ import annotations

import os

# PyTorch's vectorized CPU kernels round differently in their last bits on AVX-512 and AVX2 CPUs;
# the golden jobs (tests/test_golden_jobs.py) hold bytes PyTorch computes (calibrated activation
# scales), so the tests pin the AVX2 kernels, which every x86-64 test machine has. Even so, an AMD and
# an Intel CPU sum some scales to float32 values one bit apart: the golden files compare numbers at
# float32's precision (tests/golden.py). Set before any test module imports torch.
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")

import asyncio  # noqa: E402
from pathlib import Path

import pytest

from fixed_web_platform.browsers import BrowserUnavailable, resolve
from fixed_web_platform.vocabulary import BrowserName

pytest_plugins = ["workers", "time_budget", "shared_sweeps"]  # workers first: it sets thread counts before numpy loads


def require_browser(name: BrowserName) -> None:
    try:
        resolve(name)
    except BrowserUnavailable as exc:
        pytest.fail(f"{exc} (run scripts/setup.sh first)")


def run(coro):  # noqa: ANN001, ANN201 - tiny helper for sync tests
    return asyncio.run(coro)


class NoBrowser:
    """What job-building tests answer an engine that asks the browser (engines/base.BrowserFacts):
    no WebNN context, an adapter without limits."""

    async def webnn_context(self, device: str) -> dict:
        return {"available": False, "error": "no browser in this test"}

    async def adapter_limits(self) -> dict[str, int]:
        return {}


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    return tmp_path / "results"


def report_reads_well(folders: list[Path], out: Path):  # noqa: ANN201 - list[ReportView]
    """Build the report of these results folders and open it in real Chromium at 1280 and 390 px:
    no sideways page scroll, every image loads, no headline cell breaks a word, the first pick on
    the first screen at 1280 px, and one headline row per ok configuration (asserted here)."""
    import pandas as pd

    from fixed_web_platform.report.render import build_report
    from fixed_web_platform.report.screenshot import PHONE_WIDTH, WIDTH, view_report

    require_browser(BrowserName.CHROME)
    files = build_report(folders, out)
    views = view_report(files.html, out / "screenshot.png", widths=(WIDTH, PHONE_WIDTH), sections=True)
    summary = pd.read_csv(files.summary_csv)
    for view in views:
        assert view.problems() == [], view.problems()
        assert view.headline_rows == len(summary) and view.picks, (view.headline_rows, len(summary))
        assert all(shot.stat().st_size > 5_000 for shot in view.section_shots)
    return views


@pytest.fixture
def no_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if bad input got past validation: no results folder, writer or sweep starts."""
    import fixed_web_platform.sweep as sweep_module

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("validation let the sweep start")

    for name in ("new_results_dir", "ResultWriter", "execute"):
        monkeypatch.setattr(sweep_module, name, refuse)


def held_in_float32(layers, row, floats: set[str], form: str) -> None:  # noqa: ANN001 - a layers.csv frame, a row
    """A fused-form W8A8 row's layers.csv: exactly the ``floats`` layers held in float32 with float
    inputs, every other layer in ``form`` (int8, QDQ8)."""
    held = layers[layers.run_id == row.run_id].set_index("layer")
    held["weight_dtype"] = held.weight_dtype.str.split("@").str[0]  # ORT's say where they ran
    assert set(held.index[held.act_dtype == ""]) == floats
    assert set(held.weight_dtype[list(floats)]) == {"float32"}
    assert set(held.drop(index=list(floats)).weight_dtype) == {form}

"""Shared fixtures. End-to-end tests start real browsers; they fail (not skip) when one is
missing, because scripts/setup.sh installs them and CI runs it first."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fixed_web_platform.browsers import BrowserUnavailable, resolve
from fixed_web_platform.vocabulary import BrowserName


def require_browser(name: BrowserName) -> None:
    try:
        resolve(name)
    except BrowserUnavailable as exc:
        pytest.fail(f"{exc} (run scripts/setup.sh first)")


def run(coro):  # noqa: ANN001, ANN201 - tiny helper for sync tests
    return asyncio.run(coro)


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    return tmp_path / "results"

"""Unit tests for fixed_web_platform.browsers.resolve and the Outcome vocabulary (no launches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixed_web_platform.browsers import (
    PRODUCTS,
    BrowserUnavailable,
    DriverKind,
    resolve,
)
from fixed_web_platform.vocabulary import BrowserName, Outcome


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def empty_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holding only an empty folder, so no driver is found by name."""
    folder = tmp_path / "path-bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def test_every_browser_has_a_product() -> None:
    assert set(PRODUCTS) == set(BrowserName)
    for name, product in PRODUCTS.items():
        assert product.name is name
        assert product.binaries and product.drivers and product.install_hint


def test_explicit_missing_binary_named_in_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-chrome"
    with pytest.raises(BrowserUnavailable) as info:
        resolve(BrowserName.CHROME, binary=str(missing))
    assert str(missing) in str(info.value)
    assert "--browser-binary" in str(info.value)


def test_explicit_binary_that_is_not_executable_is_unavailable(tmp_path: Path) -> None:
    plain = tmp_path / "chrome"
    plain.write_text("not a program")
    plain.chmod(0o644)
    with pytest.raises(BrowserUnavailable, match="no browser binary"):
        resolve(BrowserName.CHROME, binary=str(plain), driver=str(_executable(tmp_path / "drv")))


def test_explicit_missing_driver_named_in_error(tmp_path: Path) -> None:
    binary = _executable(tmp_path / "chrome")
    missing = tmp_path / "no-such-chromedriver"
    with pytest.raises(BrowserUnavailable) as info:
        resolve(BrowserName.CHROME, binary=str(binary), driver=str(missing))
    assert str(missing) in str(info.value)
    assert "chromedriver" in str(info.value)


def test_explicit_binary_and_driver_resolve(tmp_path: Path) -> None:
    binary = _executable(tmp_path / "chrome")
    driver = _executable(tmp_path / "chromedriver")
    resolved = resolve(BrowserName.CHROME, binary=str(binary), driver=str(driver))
    assert (resolved.binary, resolved.driver) == (binary, driver)
    assert resolved.driver_kind is DriverKind.CHROMEDRIVER
    assert resolved.product is PRODUCTS[BrowserName.CHROME]


def test_firefox_without_geckodriver_falls_back_to_marionette(tmp_path: Path, empty_path: Path) -> None:
    binary = _executable(tmp_path / "firefox-esr")
    resolved = resolve(BrowserName.FIREFOX, binary=str(binary))
    assert resolved.driver_kind is DriverKind.MARIONETTE
    assert resolved.driver is None
    assert resolved.binary == binary


def test_firefox_with_geckodriver_on_path_uses_it(tmp_path: Path, empty_path: Path) -> None:
    binary = _executable(tmp_path / "firefox-esr")
    gecko = _executable(empty_path / "geckodriver")
    resolved = resolve(BrowserName.FIREFOX, binary=str(binary))
    assert resolved.driver_kind is DriverKind.GECKODRIVER
    assert resolved.driver == gecko.resolve()


def test_firefox_explicit_missing_driver_does_not_fall_back(tmp_path: Path, empty_path: Path) -> None:
    binary = _executable(tmp_path / "firefox-esr")
    missing = tmp_path / "no-geckodriver"
    with pytest.raises(BrowserUnavailable, match=str(missing)):
        resolve(BrowserName.FIREFOX, binary=str(binary), driver=str(missing))


def test_browser_found_by_name_on_path(tmp_path: Path, empty_path: Path) -> None:
    binary = _executable(empty_path / "microsoft-edge")
    driver = _executable(empty_path / "msedgedriver")
    resolved = resolve(BrowserName.EDGE)
    assert (resolved.binary, resolved.driver) == (binary.resolve(), driver.resolve())
    assert resolved.driver_kind is DriverKind.MSEDGEDRIVER


@pytest.mark.parametrize("outcome", list(Outcome))
def test_outcome_is_failure(outcome: Outcome) -> None:
    failures = {"failed", "timeout", "crash", "invalid", "error", "device-lost"}
    assert outcome.is_failure is (outcome.value in failures)

"""The driver discovery chain: explicit path, this machine, Selenium Manager, webdriver-manager,
then (Firefox) Marionette. Real probes of real scripts and of this machine's browsers; no
browser is launched and nothing is downloaded (steps that need the network skip when offline)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from fixed_web_platform.browsers import (
    PRODUCTS,
    BrowserProduct,
    BrowserUnavailable,
    DriverKind,
    resolve,
)
from fixed_web_platform.browsers.discovery import (
    DRIVER_CHAIN,
    WEBDRIVER_MANAGERS,
    clear_caches,
    major_version,
    network_reachable,
    resolve_product,
)
from fixed_web_platform.browsers.install import WEBNN_CHROMIUM_LAUNCHER
from fixed_web_platform.vocabulary import BrowserName

OFFLINE = not any(network_reachable(host) for _, _, host in WEBDRIVER_MANAGERS.values())
requires_offline = pytest.mark.skipif(not OFFLINE, reason="pins offline behaviour; network is up")


def _script(path: Path, version_line: str = "", log: Path | None = None) -> Path:
    """An executable that prints ``version_line`` (and notes each run in ``log``)."""
    lines = ["#!/bin/sh"]
    if log is not None:
        lines.append(f'echo run >> "{log}"')
    if version_line:
        lines.append(f'echo "{version_line}"')
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


def _fake(kind: DriverKind, binary: Path, *drivers: Path, name: BrowserName = BrowserName.EDGE,
          ) -> BrowserProduct:
    return BrowserProduct(name=name, binaries=(str(binary),), drivers=tuple(map(str, drivers)),
                          driver_kind=kind, install_hint="install the fake")


def test_chain_order_is_data() -> None:
    assert [label for label, _ in DRIVER_CHAIN] == [
        "on this machine", "Selenium Manager", "webdriver-manager"]


@pytest.mark.parametrize("name", [BrowserName.CHROME, BrowserName.FIREFOX])
def test_explicit_missing_driver_is_unavailable_without_fallback(name: BrowserName, tmp_path: Path,
                                                                 ) -> None:
    binary = _script(tmp_path / "browser")
    missing = tmp_path / "no-such-driver"
    with pytest.raises(BrowserUnavailable) as info:
        resolve(name, binary=str(binary), driver=str(missing))
    message = str(info.value)
    assert str(missing) in message and "--driver" in message
    assert "Selenium Manager" not in message  # nothing is tried past an explicit path


def test_chrome_here_uses_a_local_chromedriver_and_notes_a_major_mismatch() -> None:
    resolved = resolve(BrowserName.CHROME)
    assert resolved.driver_kind is DriverKind.CHROMEDRIVER
    assert resolved.driver is not None and resolved.driver.name == "chromedriver"
    browser, driver = major_version(resolved.binary), major_version(resolved.driver)
    assert browser is not None and driver is not None
    if resolved.binary == WEBNN_CHROMIUM_LAUNCHER:
        assert browser == 153 and driver != browser  # the WebNN build is older than Debian's driver
    if driver != browser:
        assert f"major {driver}" in resolved.driver_note
        assert f"browser's {browser}" in resolved.driver_note
        assert "--disable-build-check" in resolved.driver_note
    else:
        assert resolved.driver_note == ""


@requires_offline
def test_firefox_here_falls_back_to_marionette_naming_each_failed_step() -> None:
    clear_caches()
    started = time.monotonic()
    resolved = resolve(BrowserName.FIREFOX)
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"resolving Firefox offline took {elapsed:.1f} s"
    assert resolved.driver_kind is DriverKind.MARIONETTE and resolved.driver is None
    note = resolved.driver_note
    assert note.startswith("no geckodriver: on this machine: none of geckodriver found; ")
    assert "; Selenium Manager: " in note
    assert note.endswith("; webdriver-manager: skipped, no network")
    assert "\n" not in note


@requires_offline
def test_fake_product_mismatch_fails_each_step_in_order(tmp_path: Path) -> None:
    binary = _script(tmp_path / "fake-browser", "Fake 98.0")
    driver = _script(tmp_path / "fakedriver", "FakeDriver 99.0.1")
    with pytest.raises(BrowserUnavailable) as info:
        resolve_product(_fake(DriverKind.MSEDGEDRIVER, binary, driver))
    message = str(info.value)
    assert message.startswith(
        f"edge: no msedgedriver: on this machine: msedgedriver major 99 ({driver}) "
        f"is not the browser's 98 ({binary}); Selenium Manager: ")
    assert message.endswith("; webdriver-manager: skipped, no network; install the fake")
    assert message.index("on this machine") < message.index("Selenium Manager") \
        < message.index("webdriver-manager")
    assert "\n" not in message


def test_fake_product_prefers_the_driver_of_the_browsers_major(tmp_path: Path) -> None:
    binary = _script(tmp_path / "fake-browser", "Fake 98.0")
    other = _script(tmp_path / "driver-99", "FakeDriver 99.0.1")
    same = _script(tmp_path / "driver-98", "FakeDriver 98.0.7")
    resolved = resolve_product(_fake(DriverKind.MSEDGEDRIVER, binary, other, same))
    assert (resolved.driver, resolved.driver_note) == (same, "")


def test_chromedriver_of_another_major_is_taken_with_a_note(tmp_path: Path) -> None:
    binary = _script(tmp_path / "fake-chrome", "Fake 98.0")
    driver = _script(tmp_path / "chromedriver", "ChromeDriver 99.0.1 (abc)")
    resolved = resolve_product(_fake(DriverKind.CHROMEDRIVER, binary, driver,
                                     name=BrowserName.CHROME))
    assert resolved.driver == driver
    assert "major 99" in resolved.driver_note and "browser's 98" in resolved.driver_note


def test_explicit_driver_of_another_major_is_used_with_a_note(tmp_path: Path) -> None:
    binary = _script(tmp_path / "fake-browser", "Fake 98.0")
    driver = _script(tmp_path / "fakedriver", "FakeDriver 99.0.1")
    resolved = resolve_product(_fake(DriverKind.MSEDGEDRIVER, binary), driver=str(driver))
    assert resolved.driver == driver and "major 99" in resolved.driver_note


def test_versions_are_probed_once_per_path(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    binary = _script(tmp_path / "fake-browser", "Fake 98.0", log)
    driver = _script(tmp_path / "fakedriver", "FakeDriver 98.0.1", log)
    product = _fake(DriverKind.MSEDGEDRIVER, binary, driver)
    for _ in range(3):
        assert resolve_product(product).driver == driver
    assert log.read_text().count("run") == 2  # one probe each for the binary and the driver


def test_geckodriver_versions_are_not_compared_with_firefox(tmp_path: Path) -> None:
    binary = _script(tmp_path / "firefox", "Mozilla Firefox 153.7.0esr")
    gecko = _script(tmp_path / "geckodriver", "geckodriver 0.36.0")
    product = PRODUCTS[BrowserName.FIREFOX]
    resolved = resolve_product(BrowserProduct(
        name=product.name, binaries=(str(binary),), drivers=(str(gecko),),
        driver_kind=product.driver_kind, install_hint=product.install_hint,
        fallback_driver_kind=product.fallback_driver_kind))
    assert (resolved.driver, resolved.driver_kind, resolved.driver_note) == (
        gecko, DriverKind.GECKODRIVER, "")


def test_network_check_is_quick_and_false_when_nothing_answers() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    started = time.monotonic()
    assert not network_reachable("127.0.0.1", closed_port)
    assert not network_reachable("no-such-host.invalid")
    assert time.monotonic() - started < 4


@requires_offline
def test_network_check_is_false_here_for_every_driver_host() -> None:
    clear_caches()
    for _, _, host in WEBDRIVER_MANAGERS.values():
        started = time.monotonic()
        assert not network_reachable(host)
        assert time.monotonic() - started < 2


def test_remote_browsers_get_the_local_options_without_a_local_profile() -> None:
    """Through a grid: Chromium's flags, and Firefox through Selenium's Firefox options (its prefs
    and -headless for geckodriver on the node), never Marionette; no profile folder of ours."""
    from pathlib import Path

    from fixed_web_platform.browsers.discovery import ResolvedBrowser
    from fixed_web_platform.browsers.products import PRODUCTS, DriverKind
    from fixed_web_platform.browsers.sessions import remote_options

    chrome = ResolvedBrowser(PRODUCTS[BrowserName.CHROME], None, None, DriverKind.REMOTE,
                             remote_url="http://grid:4444")
    options, args = remote_options(chrome)
    caps = options.to_capabilities()
    assert caps["browserName"] == "chrome"
    assert set(PRODUCTS[BrowserName.CHROME].args) == set(caps["goog:chromeOptions"]["args"]) == set(args)
    assert not any(a.startswith("--user-data-dir") for a in args)
    assert "binary" not in caps["goog:chromeOptions"]  # the node's own browser unless named
    firefox = ResolvedBrowser(PRODUCTS[BrowserName.FIREFOX], Path("/opt/firefox/firefox"), None,
                              DriverKind.REMOTE, remote_url="http://grid:4444")
    options, _ = remote_options(firefox)
    caps = options.to_capabilities()
    assert caps["browserName"] == "firefox"
    moz = caps["moz:firefoxOptions"]
    assert moz["args"] == ["-headless"] and moz["binary"] == "/opt/firefox/firefox"
    assert moz["prefs"]["dom.webgpu.enabled"] is True

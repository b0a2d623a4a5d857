"""Browsers as data: where each product's binary and driver may live and how it is launched.

Adding a browser: a ``BrowserName`` in vocabulary.py, a ``BrowserProduct`` here, and (if its
driver is new) a launcher in sessions.py's ``LAUNCHERS``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..vocabulary import BrowserName
from .install import WEBNN_CHROMIUM_LAUNCHER

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--enable-unsafe-webgpu",
    "--enable-webgpu-developer-features",  # unquantized timestamp-query values
    "--enable-features=WebMachineLearningNeuralNetwork",
    "--enable-precise-memory-info",  # performance.memory unrounded
    "--enable-blink-features=ForceEagerMeasureMemory",  # measureUserAgentSpecificMemory at once
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
FIREFOX_PREFS = (
    ("dom.webgpu.enabled", True),
    ("gfx.webgpu.ignore-blocklist", True),
)


class DriverKind(enum.StrEnum):
    CHROMEDRIVER = "chromedriver"
    MSEDGEDRIVER = "msedgedriver"
    GECKODRIVER = "geckodriver"
    MARIONETTE = "marionette"  # Mozilla's marionette-driver: Firefox without geckodriver
    SAFARIDRIVER = "safaridriver"
    REMOTE = "remote"  # a Selenium Grid / any W3C WebDriver endpoint (--remote URL)


@dataclass(frozen=True)
class BrowserProduct:
    name: BrowserName
    binaries: tuple[str, ...]
    """Candidate binaries, in order of preference: absolute paths or names looked up on PATH."""
    drivers: tuple[str, ...]
    driver_kind: DriverKind
    install_hint: str
    args: tuple[str, ...] = ()
    prefs: tuple[tuple[str, object], ...] = ()
    fallback_driver_kind: DriverKind | None = None
    """Used when none of ``drivers`` is installed (Firefox falls back to Marionette)."""


PRODUCTS: dict[BrowserName, BrowserProduct] = {
    BrowserName.CHROME: BrowserProduct(
        name=BrowserName.CHROME,
        binaries=(
            str(WEBNN_CHROMIUM_LAUNCHER),  # WebGPU + WebNN; installed by scripts/setup.sh
            "google-chrome",
            "google-chrome-stable",
            "chromium",
            "chromium-browser",
        ),
        drivers=("chromedriver", "/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"),
        driver_kind=DriverKind.CHROMEDRIVER,
        install_hint="run scripts/setup.sh (apt-get install chromium chromium-driver)",
        args=CHROMIUM_ARGS,
    ),
    BrowserName.EDGE: BrowserProduct(
        name=BrowserName.EDGE,
        binaries=("microsoft-edge", "microsoft-edge-stable", "/opt/microsoft/msedge/msedge"),
        drivers=("msedgedriver",),
        driver_kind=DriverKind.MSEDGEDRIVER,
        install_hint="install Microsoft Edge and msedgedriver (not packaged for Debian)",
        args=CHROMIUM_ARGS,
    ),
    BrowserName.FIREFOX: BrowserProduct(
        name=BrowserName.FIREFOX,
        # firefox-esr first: Debian's /usr/bin/firefox is a shell wrapper Marionette cannot version.
        binaries=("firefox-esr", "firefox"),
        drivers=("geckodriver",),
        driver_kind=DriverKind.GECKODRIVER,
        install_hint="run scripts/setup.sh (apt-get install firefox-esr)",
        prefs=FIREFOX_PREFS,
        fallback_driver_kind=DriverKind.MARIONETTE,
    ),
    BrowserName.SAFARI: BrowserProduct(
        name=BrowserName.SAFARI,
        binaries=("/Applications/Safari.app/Contents/MacOS/Safari",),
        drivers=("safaridriver", "/usr/bin/safaridriver"),
        driver_kind=DriverKind.SAFARIDRIVER,
        install_hint="Safari exists only on macOS (enable 'Allow Remote Automation')",
    ),
}

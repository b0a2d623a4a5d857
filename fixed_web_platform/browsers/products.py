"""Browsers as data: where each product's binary and driver may live and how it is launched.

Adding a browser: a ``BrowserName`` in vocabulary.py, a ``BrowserProduct`` here, and (if its
driver is new) a launcher in sessions.py's ``LAUNCHERS``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..vocabulary import BrowserName, with_build
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
    builds: tuple[tuple[str, str], ...] = ()
    """Named builds a sweep may run side by side (``--browser chrome@chromium``): name -> binary
    (an absolute path or a name looked up on PATH)."""


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
        builds=(("webnn", str(WEBNN_CHROMIUM_LAUNCHER)), ("chromium", "chromium"),
                ("stable", "google-chrome-stable"), ("beta", "google-chrome-beta"),
                ("dev", "google-chrome-unstable")),
    ),
    BrowserName.EDGE: BrowserProduct(
        name=BrowserName.EDGE,
        binaries=("microsoft-edge", "microsoft-edge-stable", "/opt/microsoft/msedge/msedge"),
        drivers=("msedgedriver",),
        driver_kind=DriverKind.MSEDGEDRIVER,
        install_hint="install Microsoft Edge and msedgedriver (not packaged for Debian)",
        args=CHROMIUM_ARGS,
        builds=(("stable", "microsoft-edge-stable"), ("beta", "microsoft-edge-beta"),
                ("dev", "microsoft-edge-dev")),
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
        builds=(("esr", "firefox-esr"), ("nightly", "firefox-nightly")),
    ),
    BrowserName.SAFARI: BrowserProduct(
        name=BrowserName.SAFARI,
        binaries=("/Applications/Safari.app/Contents/MacOS/Safari",),
        drivers=("safaridriver", "/usr/bin/safaridriver"),
        driver_kind=DriverKind.SAFARIDRIVER,
        install_hint="Safari exists only on macOS (enable 'Allow Remote Automation')",
    ),
}


@dataclass(frozen=True)
class BrowserChoice:
    """A browser as a sweep names it: ``chrome``, or ``chrome@BUILD`` for one of its binaries (a
    named build of its product, or a path); '' the one discovery finds."""

    name: BrowserName
    build: str = ""

    def __str__(self) -> str:
        return with_build(self.name, self.build)

    def binary(self) -> str:
        """The binary the build names (a path, or a name to look up on PATH); '' for discovery's."""
        if not self.build or "/" in self.build:
            return self.build
        return dict(PRODUCTS[self.name].builds)[self.build]


def browser_choice(value: BrowserName | BrowserChoice | str) -> BrowserChoice:
    """A browser as a user names it (``chrome``, ``chrome@chromium``, ``chrome@/opt/chrome/chrome``);
    ValueError naming the browsers or the product's builds otherwise."""
    if isinstance(value, BrowserChoice):
        return value
    text = str(value)
    name, sep, build = text.partition("@")
    try:
        browser = BrowserName(name.strip().lower())
    except ValueError:
        raise ValueError(f"unknown browser {name!r}; choose from {', '.join(b.value for b in BrowserName)}") from None
    if not sep:
        return BrowserChoice(browser)
    named = dict(PRODUCTS[browser].builds)
    if "/" not in build and build not in named:
        raise ValueError(f"browser {text!r}: write {browser}@PATH or one of its builds: "
                         f"{', '.join(f'{browser}@{b}' for b in named) or 'none named'}")
    return BrowserChoice(browser, build)


ARG_BROWSERS = (BrowserName.CHROME, BrowserName.EDGE)
"""Browsers that take extra command-line switches (--browser-arg): the Chromium family."""
PREF_BROWSERS = (BrowserName.FIREFOX,)
"""Browsers that take extra preferences (--browser-pref)."""
MERGED_SWITCHES = ("--enable-features=", "--disable-features=", "--enable-blink-features=")
"""Chromium honours only the last of each of these: a user's values join the harness's."""


def _browser_named(text: str, flag: str, takers: Sequence[BrowserName], example: str) -> BrowserName:
    try:
        name = BrowserName(text.strip().lower())
    except ValueError:
        raise ValueError(f"{flag} {example}: {text!r} is not a browser "
                         f"({', '.join(b.value for b in BrowserName)})") from None
    if name not in takers:
        raise ValueError(f"{flag} takes {' and '.join(b.value for b in takers)}, not {name.value} "
                         f"(Chromium takes switches: --browser-arg; Firefox takes preferences: --browser-pref)")
    return name


def parse_browser_args(values: Sequence[str]) -> dict[BrowserName, tuple[str, ...]]:
    """--browser-arg NAME=ARG values (e.g. chrome=--enable-features=Vulkan), per browser in order."""
    found: dict[BrowserName, tuple[str, ...]] = {}
    for value in values:
        name, sep, arg = value.partition("=")
        if not sep or not arg.startswith("-"):
            raise ValueError(f"--browser-arg {value!r}: write NAME=--switch, e.g. chrome=--enable-features=Vulkan")
        browser = _browser_named(name, "--browser-arg", ARG_BROWSERS, repr(value))
        found[browser] = (*found.get(browser, ()), arg)
    return found


def _pref_value(text: str) -> object:
    """A Firefox preference's value: true/false, a whole number, else the text."""
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


def parse_browser_prefs(values: Sequence[str]) -> dict[BrowserName, tuple[tuple[str, object], ...]]:
    """--browser-pref NAME=KEY=VALUE values (e.g. firefox=dom.webgpu.enabled=true), per browser."""
    found: dict[BrowserName, tuple[tuple[str, object], ...]] = {}
    for value in values:
        name, _, rest = value.partition("=")
        key, sep, text = rest.partition("=")
        if not sep or not key:
            raise ValueError(f"--browser-pref {value!r}: write NAME=KEY=VALUE, e.g. firefox=dom.webgpu.enabled=true")
        browser = _browser_named(name, "--browser-pref", PREF_BROWSERS, repr(value))
        found[browser] = (*found.get(browser, ()), (key, _pref_value(text)))
    return found


def with_extras(product: BrowserProduct, args: Sequence[str] = (), prefs: Sequence[tuple[str, object]] = ()
                ) -> BrowserProduct:
    """The product launched with a user's extra switches and preferences: a switch Chromium reads
    once (MERGED_SWITCHES) joins the harness's own, a preference the user sets wins."""
    merged = list(product.args)
    for arg in args:
        head = next((h for h in MERGED_SWITCHES if arg.startswith(h)), None)
        at = next((i for i, a in enumerate(merged) if head and a.startswith(head)), None)
        if at is None:
            merged.append(arg)
        else:
            merged[at] = f"{merged[at]},{arg[len(head):]}"
    chosen = dict(product.prefs) | dict(prefs)
    return dataclasses.replace(product, args=tuple(merged), prefs=tuple(chosen.items()))


"""Finding a browser and its driver.

The binary: an explicit path, else the product's candidates in order. The driver: an explicit
path (which must exist; nothing is tried past it), else the steps of ``DRIVER_CHAIN`` in order,
the first that gives a driver winning:

1. on this machine: the product's driver candidates, preferring one whose major version is the
   browser's;
2. Selenium Manager, ``--offline`` (it never downloads here);
3. webdriver-manager, only when the host it downloads from answers (it never uses a local driver);

and last, for Firefox, Marionette, with why each step failed in ``driver_note``. Offline nothing
downloads or waits more than a few seconds; with no driver, ``BrowserUnavailable`` names each step
and why it failed. Version probes, Selenium Manager and the network check run once per process.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import first_line
from ..vocabulary import BrowserName
from .products import PRODUCTS, BrowserProduct, DriverKind

VERSION_PROBE_TIMEOUT_S = 3.0
SELENIUM_MANAGER_TIMEOUT_S = 5.0
NETWORK_TIMEOUT_S = 1.0

# Drivers released with their browser, so their majors should match. geckodriver (0.x) and
# safaridriver are versioned on their own (and Safari's binary is never run to ask).
MAJOR_TRACKS_BROWSER = frozenset({DriverKind.CHROMEDRIVER, DriverKind.MSEDGEDRIVER})
# ChromeDriver runs with --disable-build-check (the WebNN Chromium is older than Debian's driver);
# an msedgedriver of another major is passed over for one that matches.
MISMATCH_ACCEPTED = frozenset({DriverKind.CHROMEDRIVER})
# webdriver-manager's manager for each driver, and the host it asks first.
WEBDRIVER_MANAGERS: dict[DriverKind, tuple[str, str, str]] = {
    DriverKind.CHROMEDRIVER: ("webdriver_manager.chrome", "ChromeDriverManager",
                              "googlechromelabs.github.io"),
    DriverKind.GECKODRIVER: ("webdriver_manager.firefox", "GeckoDriverManager", "api.github.com"),
    DriverKind.MSEDGEDRIVER: ("webdriver_manager.microsoft", "EdgeChromiumDriverManager",
                              "msedgedriver.microsoft.com"),
}


class BrowserUnavailable(Exception):
    """The browser or its driver is not installed here; the message says what was searched."""


@dataclass(frozen=True)
class ResolvedBrowser:
    product: BrowserProduct
    binary: Path | None
    """The browser binary; None on a remote endpoint unless --browser-binary names one there."""
    driver: Path | None
    driver_kind: DriverKind
    driver_note: str = ""
    """A driver whose major differs from the browser's, or (Marionette) why no driver was found."""
    remote_url: str = ""
    """The W3C WebDriver endpoint (e.g. a Selenium Grid) that creates this browser; '' = local."""


class StepFailed(Exception):
    """One step of the driver chain gave no usable driver; the message says why, in one line."""


@dataclass(frozen=True)
class FoundDriver:
    path: Path
    note: str = ""


def _find(candidate: str) -> Path | None:
    if "/" in candidate:
        path = Path(candidate)
        return path if path.is_file() and path.stat().st_mode & 0o111 else None
    found = shutil.which(candidate)
    return Path(found).resolve() if found else None


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run a probe in a process group of its own, killed whole (children too) on timeout."""
    with subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@functools.cache
def major_version(program: Path) -> int | None:
    """The major of the first version ``program --version`` prints; None if it prints none."""
    try:
        out = _run([str(program), "--version"], VERSION_PROBE_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\b(\d+)\.\d+", out)
    return int(match.group(1)) if match else None


@functools.cache
def network_reachable(host: str, port: int = 443, timeout_s: float = NETWORK_TIMEOUT_S) -> bool:
    """Whether a TCP connection to ``host`` (or to the HTTPS proxy set for it) opens in time.
    In a thread, so a slow name lookup cannot hold the caller much past ``timeout_s``."""
    proxy = urllib.request.getproxies().get("https")
    if proxy and not urllib.request.proxy_bypass(host):
        parts = urllib.parse.urlsplit(proxy if "//" in proxy else f"//{proxy}")
        host, port = parts.hostname or host, parts.port or 80
    opened = threading.Event()

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            opened.set()
        except OSError:
            pass

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout_s + 0.5)
    return opened.is_set()


def _check_versions(product: BrowserProduct, binary: Path, drivers: list[Path]) -> FoundDriver:
    """The first driver of the browser's major, else one that cannot tell its version; a
    ChromeDriver of another major is taken with a note, any other mismatch fails the step."""
    want = major_version(binary) if product.driver_kind in MAJOR_TRACKS_BROWSER else None
    if want is None:
        return FoundDriver(drivers[0])
    majors = {d: major_version(d) for d in drivers}
    rank = {want: 0, None: 1}
    best = min(drivers, key=lambda d: rank.get(majors[d], 2))
    if majors[best] in rank:
        return FoundDriver(best)
    why = (f"{product.driver_kind} major {', '.join(f'{majors[d]} ({d})' for d in drivers)} "
           f"is not the browser's {want} ({binary})")
    if product.driver_kind in MISMATCH_ACCEPTED:
        return FoundDriver(best, f"{why}; used with --disable-build-check")
    raise StepFailed(why)


def on_this_machine(product: BrowserProduct, binary: Path) -> FoundDriver:
    found = list(dict.fromkeys(p for p in map(_find, product.drivers) if p))
    if not found:
        raise StepFailed(f"none of {', '.join(product.drivers)} found")
    return _check_versions(product, binary, found)


@functools.cache
def _selenium_manager_lookup(browser: str, binary: Path) -> tuple[Path | None, str]:
    """Selenium Manager's driver path, or why none. Its binary is run directly rather than by
    ``SeleniumManager().binary_paths``: for a timeout, and for the warning that says why."""
    from selenium.common import WebDriverException
    from selenium.webdriver.common.selenium_manager import SeleniumManager

    try:
        args = [str(SeleniumManager._get_binary()), "--browser", browser, "--browser-path",
                str(binary), "--offline", "--language-binding", "python", "--output", "json"]
        proc = _run(args, SELENIUM_MANAGER_TIMEOUT_S)
        output = json.loads(proc.stdout)
    except subprocess.TimeoutExpired:
        return None, f"no answer in {SELENIUM_MANAGER_TIMEOUT_S:g} s"
    except (OSError, ValueError, WebDriverException) as exc:
        return None, first_line(exc)
    result = output.get("result") or {}
    if proc.returncode == 0 and result.get("driver_path"):
        return Path(result["driver_path"]), ""
    warnings = [log["message"] for log in output.get("logs", []) if log.get("level") != "INFO"]
    why = result.get("message") or (warnings[-1] if warnings else "")
    return None, (why.strip().splitlines() or ["found no driver"])[0]


def selenium_manager(product: BrowserProduct, binary: Path) -> FoundDriver:
    driver, why = _selenium_manager_lookup(product.name.value, binary)
    if driver is None:
        raise StepFailed(why)
    return _check_versions(product, binary, [driver])


def webdriver_manager(product: BrowserProduct, binary: Path) -> FoundDriver:
    if product.driver_kind not in WEBDRIVER_MANAGERS:
        raise StepFailed(f"skipped, it has no {product.driver_kind}")
    module, manager, host = WEBDRIVER_MANAGERS[product.driver_kind]
    if not network_reachable(host):
        raise StepFailed("skipped, no network")
    try:
        path = getattr(importlib.import_module(module), manager)().install()
    except Exception as exc:  # any failure to fetch is this step's failure
        raise StepFailed(first_line(exc)) from exc
    return _check_versions(product, binary, [Path(path)])


def clear_caches() -> None:
    """Forget version probes, Selenium Manager answers and network checks (after an install)."""
    for cached in (major_version, network_reachable, _selenium_manager_lookup):
        cached.cache_clear()


Step = Callable[[BrowserProduct, Path], FoundDriver]
DRIVER_CHAIN: tuple[tuple[str, Step], ...] = (
    ("on this machine", on_this_machine),
    ("Selenium Manager", selenium_manager),
    ("webdriver-manager", webdriver_manager),
)


REMOTE_STATUS_TIMEOUT_S = 10.0
W3C_BROWSER_NAMES = {BrowserName.CHROME: "chrome", BrowserName.EDGE: "MicrosoftEdge",
                     BrowserName.FIREFOX: "firefox", BrowserName.SAFARI: "safari"}
"""The W3C browserName each product asks a remote endpoint for."""


def check_remote_url(url: str) -> str:
    """The endpoint URL without a trailing slash; ValueError (a usage error) when it is not one."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--remote {url!r}: not an http(s) URL of a WebDriver endpoint")
    return url.rstrip("/")


def remote_browsers(url: str) -> set[str] | None:
    """browserNames the endpoint's nodes offer (Selenium Grid's /status), None for an endpoint
    that does not list nodes (a plain WebDriver server); BrowserUnavailable when it does not
    answer or is not ready."""
    try:
        with urllib.request.urlopen(f"{url}/status", timeout=REMOTE_STATUS_TIMEOUT_S) as response:
            status = json.loads(response.read().decode())
    except (OSError, ValueError) as exc:
        raise BrowserUnavailable(f"the WebDriver endpoint {url} does not answer: {first_line(exc)}") \
            from None
    value = status.get("value") if isinstance(status, dict) else None
    if not isinstance(value, dict):
        raise BrowserUnavailable(f"the WebDriver endpoint {url} gave no W3C status")
    if not value.get("ready", False):
        raise BrowserUnavailable(f"the WebDriver endpoint {url} is not ready: "
                                 f"{' '.join(str(value.get('message') or '').split())}")
    nodes = value.get("nodes")
    if not isinstance(nodes, list):
        return None
    offered = set()
    for node in nodes:
        for slot in (node.get("slots") or []) if isinstance(node, dict) else []:
            stereotype = slot.get("stereotype") if isinstance(slot, dict) else None
            if isinstance(stereotype, dict) and stereotype.get("browserName"):
                offered.add(str(stereotype["browserName"]))
    return offered


def resolve_remote(name: BrowserName, url: str, binary: str | None = None) -> ResolvedBrowser:
    """A browser created by a remote WebDriver endpoint (e.g. a Selenium Grid): nothing is
    looked up on this machine, the node has the browser and its driver; ``binary`` is a path
    on the node. A grid none of whose nodes offers the browser makes it unavailable."""
    url = check_remote_url(url)
    offered = remote_browsers(url)
    wanted = W3C_BROWSER_NAMES[name]
    if offered is not None and wanted not in offered:
        raise BrowserUnavailable(f"{name}: the grid at {url} has no node offering {wanted} "
                                 f"(its nodes offer: {', '.join(sorted(offered)) or 'nothing'})")
    return ResolvedBrowser(PRODUCTS[name], Path(binary) if binary else None, None, DriverKind.REMOTE,
                           remote_url=url)


def resolve(
    name: BrowserName, binary: str | None = None, driver: str | None = None
) -> ResolvedBrowser:
    """Find a browser's binary and driver; an explicit path must exist or it is an error."""
    return resolve_product(PRODUCTS[name], binary, driver)


def resolve_product(
    product: BrowserProduct, binary: str | None = None, driver: str | None = None
) -> ResolvedBrowser:
    name, kind = product.name, product.driver_kind
    binaries = (binary,) if binary else product.binaries
    found_binary = next((p for p in map(_find, binaries) if p), None)
    if found_binary is None:
        raise BrowserUnavailable(
            f"{name}: no browser binary found (searched {', '.join(binaries)}); "
            f"{'check --browser-binary' if binary else product.install_hint}"
        )
    if driver:
        explicit = _find(driver)
        if explicit is None:
            raise BrowserUnavailable(f"{name}: no {kind} found (searched {driver}); check --driver")
        try:
            note = _check_versions(product, found_binary, [explicit]).note
        except StepFailed as exc:
            note = str(exc)  # asked for by path: used all the same
        return ResolvedBrowser(product, found_binary, explicit, kind, note)
    failures = []
    for label, step in DRIVER_CHAIN:
        try:
            found = step(product, found_binary)
        except StepFailed as exc:
            failures.append(f"{label}: {exc}")
            continue
        return ResolvedBrowser(product, found_binary, found.path, kind, found.note)
    why = f"no {kind}: {'; '.join(failures)}"
    if product.fallback_driver_kind is not None:
        return ResolvedBrowser(product, found_binary, None, product.fallback_driver_kind, why)
    raise BrowserUnavailable(f"{name}: {why}; {product.install_hint}")

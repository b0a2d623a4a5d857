"""Running browsers behind one small session interface, and how each driver launches one.

Drivers are always given to Selenium by explicit path; Firefox without geckodriver is driven by
Mozilla's marionette-driver. A session says when its page is gone (``PageGone``) from the kind
of driver error, so the harness never has to read error text to tell a crash.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..errors import first_line
from .discovery import BrowserUnavailable, ResolvedBrowser
from .products import DriverKind

PAGE_LOAD_TIMEOUT_S = 60


class PageGone(Exception):
    """The page no longer answers the driver (its renderer crashed or its window is gone)."""


def _kill_tree(pid: int | None) -> None:
    if pid is None:
        return
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)


_SCRATCH_DIRS: set[Path] = set()
"""Scratch folders (profiles, logs) of this process's browsers not yet removed: whatever an
interrupted close leaves is removed when the process exits."""


def _scratch_dir(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    _SCRATCH_DIRS.add(folder)
    return folder


@atexit.register
def _remove_leftover_scratch_dirs() -> None:
    for folder in list(_SCRATCH_DIRS):
        _remove_profile(folder, timeout_s=2.0)


def _remove_profile(folder: Path, timeout_s: float = 5.0) -> None:
    """Delete a browser's scratch profile. Helpers of a browser that quit by itself (no longer
    children of its pid) may still be exiting and writing into it: they are found by the folder
    on their command line and killed, and the removal is retried until the folder is gone."""
    needle = str(folder)
    stragglers = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(needle in arg for arg in proc.info["cmdline"] or ()):
                proc.kill()
                stragglers.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    psutil.wait_procs(stragglers, timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            _SCRATCH_DIRS.discard(folder)
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _call_with_timeout(fn: object, timeout_s: float) -> None:
    """Run a driver clean-up call that may hang on a dead browser, without waiting forever."""
    thread = threading.Thread(target=fn, daemon=True)  # type: ignore[arg-type]
    thread.start()
    thread.join(timeout_s)


@dataclass
class BrowserSession(ABC):
    """One running browser process, reused across the runs of a sweep until it breaks."""

    resolved: ResolvedBrowser
    version: str = ""
    pid: int | None = None
    """The browser's main process; the runner watches it to tell a crash from a slow page."""
    launch_args: tuple[str, ...] = field(default=())
    scratch_dir: Path | None = None
    """Profile or log folder made for this session; removed on close."""
    no_process: str = ""
    """Why there is no local browser process to watch and measure ('' when ``pid`` is set)."""
    ran_on: dict[str, str] = field(default_factory=lambda: {"where": "local"})
    """What ran the browser: 'local', or the remote endpoint and the node's platform as the
    session's capabilities say (compare matches machines on this)."""

    @abstractmethod
    def open(self, url: str) -> None:
        """Navigate to ``url`` (blocks until the page has loaded)."""

    @abstractmethod
    def ping(self) -> None:
        """A trivial script in the page: raises ``PageGone`` when the page (renderer) has crashed,
        and the driver's timeout error when the page is merely busy."""

    @abstractmethod
    def _quit(self) -> None: ...

    def death(self) -> str:
        """Why this session can no longer run pages ('' while it can): the browser process, or
        the driver that speaks to it, has died. No pid (Safari): the driver is trusted."""
        if self.pid is not None and not _alive(self.pid):
            return "the browser process died"
        return ""

    def is_alive(self) -> bool:
        return not self.death()

    def kill(self) -> None:
        """Hard-kill the browser's process tree (used after a hang, and by the crash test)."""
        _kill_tree(self.pid)

    def close(self) -> None:
        _call_with_timeout(self._quit, 15)
        self.kill()
        if self.scratch_dir is not None:
            _remove_profile(self.scratch_dir)


@dataclass
class SeleniumSession(BrowserSession):
    driver: object = None

    def open(self, url: str) -> None:
        self.driver.get(url)  # type: ignore[attr-defined]

    def ping(self) -> None:
        from selenium.common.exceptions import TimeoutException, WebDriverException

        try:
            self.driver.execute_script("return 1")  # type: ignore[attr-defined]
        except TimeoutException:
            raise  # a busy page is not a gone page
        except WebDriverException as exc:
            raise PageGone(first_line(exc)) from exc

    def _quit(self) -> None:
        try:
            self.driver.quit()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - quitting a dead browser may raise anything
            pass

    @property
    def driver_pid(self) -> int | None:
        service = getattr(self.driver, "service", None)
        return getattr(getattr(service, "process", None), "pid", None)

    def death(self) -> str:
        why = super().death()
        if not why and self.driver_pid is not None and not _alive(self.driver_pid):
            why = f"the driver ({self.resolved.driver_kind}) died"
        return why

    def close(self) -> None:
        service_pid = self.driver_pid
        super().close()
        _kill_tree(service_pid)


@dataclass
class MarionetteSession(BrowserSession):
    client: object = None

    def open(self, url: str) -> None:
        self.client.navigate(url)  # type: ignore[attr-defined]

    def ping(self) -> None:
        from marionette_driver import errors

        try:
            self.client.execute_script("return 1")  # type: ignore[attr-defined]
        except (errors.ScriptTimeoutException, errors.TimeoutException):
            raise  # a busy page is not a gone page
        except (errors.MarionetteException, OSError) as exc:
            raise PageGone(first_line(exc)) from exc

    def _quit(self) -> None:
        try:
            self.client.delete_session()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001
            pass
        try:
            self.client.cleanup()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001
            pass


def _child_browser_pid(service_pid: int) -> int | None:
    try:
        children = psutil.Process(service_pid).children()
    except psutil.NoSuchProcess:
        return None
    return children[0].pid if children else None


def _launch_chromium(resolved: ResolvedBrowser) -> BrowserSession:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService
    from selenium.webdriver.edge.service import Service as EdgeService

    profile = _scratch_dir(f"{resolved.product.name}-profile-")
    args = (*resolved.product.args, f"--user-data-dir={profile}")
    is_edge = resolved.driver_kind is DriverKind.MSEDGEDRIVER
    options = webdriver.EdgeOptions() if is_edge else webdriver.ChromeOptions()
    options.binary_location = str(resolved.binary)
    for arg in args:
        options.add_argument(arg)
    service_cls = EdgeService if is_edge else ChromeService
    # --disable-build-check: the WebNN Chromium (153) is older than Debian's ChromeDriver (156).
    service = service_cls(executable_path=str(resolved.driver), service_args=["--disable-build-check"])
    try:
        driver = (webdriver.Edge if is_edge else webdriver.Chrome)(service=service, options=options)
    except Exception:
        _remove_profile(profile)
        raise
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
    return SeleniumSession(
        resolved=resolved,
        version=str(driver.capabilities.get("browserVersion", "")),
        pid=_child_browser_pid(service.process.pid),
        launch_args=args,
        scratch_dir=profile,
        driver=driver,
    )


def _launch_selenium_firefox(resolved: ResolvedBrowser) -> BrowserSession:
    from selenium import webdriver
    from selenium.webdriver.firefox.service import Service

    options = webdriver.FirefoxOptions()
    options.binary_location = str(resolved.binary)
    options.add_argument("-headless")
    for key, value in resolved.product.prefs:
        options.set_preference(key, value)
    driver = webdriver.Firefox(service=Service(executable_path=str(resolved.driver)), options=options)
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
    return SeleniumSession(
        resolved=resolved,
        version=str(driver.capabilities.get("browserVersion", "")),
        pid=driver.capabilities.get("moz:processID"),
        launch_args=("-headless",),
        driver=driver,
    )


def _descendant_or_self(pid: int | None, root: int | None) -> bool:
    if pid is None or root is None:
        return False
    if pid == root:
        return True
    try:
        return any(p.pid == pid for p in psutil.Process(root).children(recursive=True))
    except psutil.Error:
        return False


def _launch_marionette(resolved: ResolvedBrowser) -> BrowserSession:
    """Firefox on a free Marionette port of its own (never the default 2828, which a leftover
    or a second sweep's Firefox may hold), checked to be the process we started."""
    logging.getLogger("mozversion").setLevel(logging.WARNING)
    from marionette_driver.marionette import Marionette

    log_dir = _scratch_dir("gecko-")
    client = None
    try:
        client = Marionette(
            bin=str(resolved.binary),
            port=0,  # marionette-driver picks a free port and gives it to this Firefox
            headless=True,
            prefs=dict(resolved.product.prefs),
            gecko_log=str(log_dir / "gecko.log"),
            startup_timeout=60,
        )
        client.start_session()
        client.timeout.page_load = PAGE_LOAD_TIMEOUT_S
        caps = client.session_capabilities
        runner = getattr(client.instance, "runner", None)
        started = getattr(getattr(runner, "process_handler", None), "pid", None)
        if not _descendant_or_self(caps.get("moz:processID"), started):
            raise RuntimeError(f"the Marionette session on port {client.port} belongs to another "
                               f"Firefox (pid {caps.get('moz:processID')}), not the one started "
                               f"(pid {started})")
    except BaseException:
        if client is not None:
            _call_with_timeout(client.cleanup, 15)
        _remove_profile(log_dir)
        raise
    return MarionetteSession(
        resolved=resolved,
        version=str(caps.get("browserVersion", "")),
        pid=caps.get("moz:processID"),
        launch_args=("-headless", f"marionette.port={client.port}"),
        scratch_dir=log_dir,
        client=client,
    )


def _launch_safari(resolved: ResolvedBrowser) -> BrowserSession:
    from selenium import webdriver
    from selenium.webdriver.safari.service import Service

    driver = webdriver.Safari(service=Service(executable_path=str(resolved.driver)))
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
    return SeleniumSession(
        resolved=resolved,
        version=str(driver.capabilities.get("browserVersion", "")),
        pid=None,
        no_process="safaridriver gives no browser process id",
        driver=driver,
    )


def remote_options(resolved: ResolvedBrowser) -> tuple[object, tuple[str, ...]]:
    """The same options and capabilities a local launch of this product uses, for a remote
    endpoint: no local profile folder, and a binary only when one was named (a path on the node)."""
    from selenium import webdriver

    product = resolved.product
    kind = product.driver_kind
    if kind in (DriverKind.CHROMEDRIVER, DriverKind.MSEDGEDRIVER):
        options = webdriver.EdgeOptions() if kind is DriverKind.MSEDGEDRIVER else webdriver.ChromeOptions()
        args = product.args
    elif kind is DriverKind.GECKODRIVER:  # Selenium's Firefox options: geckodriver on the node
        options = webdriver.FirefoxOptions()
        args = ("-headless",)
        for key, value in product.prefs:
            options.set_preference(key, value)
    else:
        options, args = webdriver.SafariOptions(), ()
    for arg in args:
        options.add_argument(arg)
    if resolved.binary is not None:
        options.binary_location = str(resolved.binary)
    return options, tuple(args)


def _node_of(capabilities: dict[str, object]) -> str:
    """The grid node's host, from the CDP/BiDi address Selenium Grid 4 hands out ('' if none)."""
    from urllib.parse import urlsplit

    for key in ("se:cdp", "webSocketUrl", "se:bidi"):
        value = capabilities.get(key)
        if isinstance(value, str) and "://" in value:
            return urlsplit(value).netloc
    return ""


def _launch_remote(resolved: ResolvedBrowser) -> BrowserSession:
    """A browser created by a Selenium Grid (or any W3C WebDriver endpoint). There is no local
    process: liveness comes from the driver (the page ping), process memory is unavailable."""
    from selenium import webdriver

    options, args = remote_options(resolved)
    driver = webdriver.Remote(command_executor=resolved.remote_url, options=options)
    try:
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
        caps = dict(driver.capabilities)
    except Exception:
        _call_with_timeout(driver.quit, 15)
        raise
    ran_on = {"where": resolved.remote_url, "platform": str(caps.get("platformName", "")),
              "node": _node_of(caps)}
    return SeleniumSession(
        resolved=resolved,
        version=str(caps.get("browserVersion", "")),
        pid=None,
        launch_args=args,
        no_process=f"the browser runs on a remote node ({resolved.remote_url}): no local process",
        ran_on=ran_on,
        driver=driver,
    )


LAUNCHERS = {
    DriverKind.CHROMEDRIVER: _launch_chromium,
    DriverKind.MSEDGEDRIVER: _launch_chromium,
    DriverKind.GECKODRIVER: _launch_selenium_firefox,
    DriverKind.MARIONETTE: _launch_marionette,
    DriverKind.SAFARIDRIVER: _launch_safari,
    DriverKind.REMOTE: _launch_remote,
}


def launch(resolved: ResolvedBrowser) -> BrowserSession:
    """Start the browser (blocking; the runner calls it in a worker thread)."""
    if resolved.driver_kind is DriverKind.SAFARIDRIVER and sys.platform != "darwin":
        raise BrowserUnavailable("safari: safaridriver runs only on macOS")
    return LAUNCHERS[resolved.driver_kind](resolved)

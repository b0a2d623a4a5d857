"""One page visit: open the page on a job, wait for its reply on the server, watch the browser.

A dead browser process, or a page that no longer answers the driver, is a crash at once (the page
is pinged every few seconds); no reply within the time limit is a timeout. Crashes are told apart
from failures by what the session reports (``PageGone``), never by searching error text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..browsers.sessions import BrowserSession, PageGone
from ..errors import first_line
from ..page_protocol import JobSpec
from ..vocabulary import Outcome
from .server import Job, JobServer

LIVENESS_POLL_S = 0.25
BLANK_URL = "about:blank"
LEAVE_TIMEOUT_S = 15.0
NAVIGATION_SETTLE_S = 10.0
PAGE_PING_S = 2.0
"""How often a loaded page is asked for a trivial script, so a crashed renderer (the browser's
main process still alive) is a crash at once, not a timeout later."""


@dataclass(frozen=True)
class Visit:
    """What came back from one page visit: the page's raw payload, or why there is none."""

    outcome: Outcome
    reason: str = ""
    payload: Any = None
    output: bytes | None = None


def _swallow(task: asyncio.Task[Any]) -> None:
    """Read a background driver call's error so it is not reported as never retrieved."""
    if not task.cancelled():
        task.exception()


async def _page_gone(session: BrowserSession) -> PageGone | None:
    """Ask the page once; the session says whether an error means the page is gone."""
    try:
        await asyncio.wait_for(asyncio.to_thread(session.ping), timeout=PAGE_PING_S * 5)
    except PageGone as gone:
        return gone
    except Exception:  # noqa: BLE001 - busy or slow is not gone
        return None
    return None


async def visit_page(
    server: JobServer, session: BrowserSession, spec: JobSpec, tensors: dict[str, bytes | Path],
    timeout_s: float, on_open: Callable[[Job], Awaitable[None]] | None = None,
) -> Visit:
    """Open the harness page on a job and wait (server side) for its result, watching the browser."""
    job = server.add_job(spec.to_json(), tensors)
    hook = asyncio.create_task(on_open(job)) if on_open else None
    navigation = asyncio.create_task(asyncio.to_thread(session.open, server.job_url(job)))
    # Its error is read in the loop below, or dropped when the session is killed after a hang.
    navigation.add_done_callback(_swallow)
    deadline = time.monotonic() + timeout_s
    ping: asyncio.Task[None] | None = None
    last_ping = time.monotonic()
    try:
        while not job.result.done():
            await asyncio.wait({job.result}, timeout=LIVENESS_POLL_S)
            if job.result.done():
                break
            if why := session.death():
                return Visit(Outcome.CRASH, f"{why} during the run")
            if navigation.done() and navigation.exception() is not None:
                error = first_line(navigation.exception())
                if why := session.death():
                    return Visit(Outcome.CRASH, f"{why} while loading the page: {error}")
                gone = await _page_gone(session)
                if gone is not None:
                    return Visit(Outcome.CRASH, f"the page crashed while loading: {error}")
                return Visit(Outcome.FAILED, f"navigation failed: {error}")
            if ping is not None and ping.done():
                error = ping.exception()
                ping = None
                if isinstance(error, PageGone):
                    return Visit(Outcome.CRASH, f"the page crashed: {error}")
            if navigation.done() and ping is None and time.monotonic() - last_ping >= PAGE_PING_S:
                last_ping = time.monotonic()
                ping = asyncio.create_task(asyncio.to_thread(session.ping))
                ping.add_done_callback(_swallow)
            if time.monotonic() > deadline:
                return Visit(Outcome.TIMEOUT, f"no result within {timeout_s:g} s; browser restarted")
        # Let the driver finish its calls before the next page is opened.
        await asyncio.wait({t for t in (navigation, ping) if t is not None}, timeout=NAVIGATION_SETTLE_S)
        return Visit(Outcome.OK, payload=job.result.result(), output=job.output)
    finally:
        server.remove_job(job)
        if hook is not None and not hook.done():
            hook.cancel()
        # A navigation still blocked on a dead or hung browser ends when the session is killed.


async def leave_page(session: BrowserSession) -> None:
    """Navigate away once a page has replied, so nothing it started (ONNX Runtime's wasm worker
    threads, which may spin on after their session is released) runs on into the next page.
    A browser that cannot leave is noticed by the next visit, not here."""
    try:
        await asyncio.wait_for(asyncio.to_thread(session.open, BLANK_URL), timeout=LEAVE_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - the next visit's liveness checks judge the browser
        pass

"""Local job server: serves web/ and engine assets, and hands each job its spec and tensors.

Listens on 127.0.0.1, on a random free port, unless asked for another address (--serve-host, so
a Selenium Grid's nodes can reach it). Every job has an unguessable token (128 random bits) that
the page must send back; requests without it are rejected. The driver awaits a job's result here.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from ..paths import WEB_DIR

MAX_POST_BYTES = 256 * 1024 * 1024
"""aiohttp's cap on any body; each job's output is further capped at its own output_bytes."""
MAX_RESULT_BYTES = 16 * 1024 * 1024
"""A result holds raw samples and a probe, never tensors."""


@dataclass
class Job:
    job_id: str
    token: str
    spec: dict[str, Any]
    tensors: dict[str, bytes | Path]
    result: asyncio.Future[dict[str, Any]]
    spec_fetched: asyncio.Event = field(default_factory=asyncio.Event)
    output: bytes | None = None


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it passes ``limit`` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
        chunks.append(chunk)
    return b"".join(chunks)


@web.middleware
async def _isolation_headers(request: web.Request, handler: Any) -> web.StreamResponse:
    """Cross-origin isolation gives the page high-resolution timers (and, later, memory APIs)."""
    response = await handler(request)
    response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
    response.headers["Cross-Origin-Embedder-Policy"] = "require-corp"
    response.headers["Cache-Control"] = "no-store"
    return response


LOOPBACK = "127.0.0.1"
ANY_ADDRESS = ("0.0.0.0", "::")


def url_host(bind: str) -> str:
    """The host a browser elsewhere uses to reach a server bound to ``bind``: the address itself,
    or for 0.0.0.0 / :: this machine's own address (its name's, else loopback)."""
    if bind not in ANY_ADDRESS:
        return f"[{bind}]" if ":" in bind else bind
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return LOOPBACK


def check_serve_host(host: str) -> str:
    """An address this machine can listen on; ValueError (a usage error) otherwise."""
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"--serve-host {host!r}: not an address of this machine ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        try:
            probe.bind((address[0], 0))
        except OSError as exc:
            raise ValueError(f"--serve-host {host!r}: cannot listen there ({exc.strerror or exc})") \
                from None
    return host


class JobServer:
    def __init__(self, mounts: dict[str, Path] | None = None, host: str = LOOPBACK) -> None:
        """``mounts``: URL prefix -> folder of engine assets (folders not installed are skipped,
        and the engine's page then reports the missing asset). ``host``: where to listen."""
        self._mounts = dict(mounts or {})
        self.host = host
        self._jobs: dict[str, Job] = {}
        self._runner: web.AppRunner | None = None
        self.port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}"

    @property
    def beyond_loopback(self) -> bool:
        return self.host not in (LOOPBACK, "localhost", "::1")

    async def start(self) -> None:
        app = web.Application(middlewares=[_isolation_headers], client_max_size=MAX_POST_BYTES)
        app.router.add_get("/api/jobs/{job_id}/spec", self._get_spec)
        app.router.add_get("/api/jobs/{job_id}/tensors/{name}", self._get_tensor)
        app.router.add_post("/api/jobs/{job_id}/output", self._post_output)
        app.router.add_post("/api/jobs/{job_id}/result", self._post_result)
        app.router.add_static("/web/", WEB_DIR)
        for prefix, folder in self._mounts.items():
            if Path(folder).is_dir():
                app.router.add_static(prefix, folder)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        sockets = site._server.sockets  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1]
        if self.beyond_loopback:
            print(f"WARNING: the page server listens on {self.host}:{self.port}, beyond loopback "
                  f"(--serve-host); pages are served to any machine that can reach it at "
                  f"{self.base_url}, and only requests with a job's secret token are answered",
                  file=sys.stderr, flush=True)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> JobServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def add_job(self, spec: dict[str, Any], tensors: dict[str, bytes | Path]) -> Job:
        job_id = secrets.token_hex(8)
        job = Job(
            job_id=job_id,
            token=secrets.token_urlsafe(16),
            spec={**spec, "job_id": job_id},
            tensors=tensors,
            result=asyncio.get_running_loop().create_future(),
        )
        self._jobs[job_id] = job
        return job

    def remove_job(self, job: Job) -> None:
        self._jobs.pop(job.job_id, None)

    def job_url(self, job: Job) -> str:
        return f"{self.base_url}/web/harness.html?job={job.job_id}&token={job.token}"

    def _authorized(self, request: web.Request) -> Job:
        job = self._jobs.get(request.match_info["job_id"])
        token = request.query.get("token", "")
        # bytes: compare_digest refuses non-ASCII str, and a token is the page's word, not ours
        if job is None or not secrets.compare_digest(token.encode("utf-8", "surrogateescape"),
                                                     job.token.encode()):
            raise web.HTTPForbidden(text="unknown job or bad token")
        return job

    async def _get_spec(self, request: web.Request) -> web.Response:
        job = self._authorized(request)
        job.spec_fetched.set()
        return web.json_response(job.spec)

    async def _get_tensor(self, request: web.Request) -> web.Response:
        job = self._authorized(request)
        data = job.tensors.get(request.match_info["name"])
        if data is None:
            raise web.HTTPNotFound(text="no such tensor")
        if isinstance(data, Path):  # a file the job serves as it is (a model folder's)
            return web.FileResponse(data, headers={"Content-Type": "application/octet-stream"})
        return web.Response(body=data, content_type="application/octet-stream")

    async def _post_output(self, request: web.Request) -> web.Response:
        """At most what this job's output can be (its spec's output_bytes), in pieces posted in
        order: each names its ``offset``; a piece sent again (the page retries one after a network
        error) replaces itself and whatever followed it."""
        job = self._authorized(request)
        limit = int(job.spec.get("output_bytes") or 0)
        try:
            offset = int(request.query.get("offset", "0"))
        except ValueError:
            raise web.HTTPBadRequest(text="offset is not an integer") from None
        held = job.output or b""
        if not 0 <= offset <= len(held):
            raise web.HTTPConflict(text=f"output piece at offset {offset}; {len(held)} bytes were received")
        job.output = held[:offset] + await _read_body(request, limit - offset)  # a piece sent again replaces itself
        return web.json_response({"ok": True})

    async def _post_result(self, request: web.Request) -> web.Response:
        job = self._authorized(request)
        body = await _read_body(request, MAX_RESULT_BYTES)
        try:
            payload = json.loads(body.decode())
        except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8, too big, too deep
            payload = {"status": "failed",
                       "reason": f"page posted an unreadable result: {type(exc).__name__}: {str(exc)[:200]}"}
        if not isinstance(payload, dict):
            payload = {"status": "failed", "reason": "page posted a result that is not an object"}
        if not job.result.done():
            job.result.set_result(payload)
        return web.json_response({"ok": True})

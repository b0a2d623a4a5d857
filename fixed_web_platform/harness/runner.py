"""Executes a plan: one browser session per browser, reused across its runs, one row per run.

The runner owns session lifecycle and the loop only: engines build jobs and read replies,
harness/page.py visits pages, analysis/measurement.py turns replies into rows. A crash or hang
costs that run's row only: the session is killed and the next run gets a fresh browser. A bug
in the harness itself is an ``error`` row with its traceback in the sweep's harness.log. Rows
are written to disk as each run ends.
"""

from __future__ import annotations

import asyncio
import collections
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import prepared_caches
from ..analysis.measurement import measured_row
from ..browsers import (
    BrowserSession,
    BrowserUnavailable,
    ResolvedBrowser,
    launch,
    resolve,
    resolve_remote,
)
from ..browsers.discovery import check_remote_url
from ..browsers.products import BrowserChoice, browser_choice, with_extras
from ..engines.base import Engine, EngineJob, Executed, Refusal
from ..engines.registry import (
    ENGINES,
    build_job,
    engine_for,
    planned_refusal,
    read_reply,
)
from ..errors import first_line
from ..page_protocol import (
    PageDataError,
    PageReply,
    parse_outputs,
    parse_page_reply,
    probe_spec,
)
from ..probes.adapter import adapter_label, adapter_limits
from ..probes.memory import MemoryFigures, TreeSampler
from ..probes.quiet import Quiet, wait_until_quiet
from ..progress import Progress
from ..results.rows import LayerRow, ResultRow, utc_now
from ..results.writer import ResultsWriteError, ResultWriter
from ..run_spec import RunSpec, TimingConfig
from ..vocabulary import BrowserName, Outcome, Platform
from ..workloads import kind_named
from .page import leave_page, visit_page
from .server import LOOPBACK, Job, JobServer, check_serve_host

RunHook = Callable[[RunSpec, BrowserSession, Job], Awaitable[None]]
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SweepOptions:
    timing: TimingConfig = TimingConfig()
    binaries: dict[BrowserName, str] = field(default_factory=dict)
    drivers: dict[BrowserName, str] = field(default_factory=dict)
    on_run_start: RunHook | None = None
    """Called (as a task) when a run's page is opened; tests use it to kill a browser mid-run."""
    progress: Progress | None = None
    remote: str | None = None
    """A Selenium Grid / W3C WebDriver endpoint that creates every browser (--remote URL)."""
    serve_host: str = LOOPBACK
    """Where the page server listens (--serve-host); beyond loopback only when asked."""
    parallel: int = 1
    """Browser sessions running runs at once (--parallel N), each its own grid slot."""
    browser_args: Mapping[BrowserName, tuple[str, ...]] = field(default_factory=dict)
    """Extra command-line switches per browser (--browser-arg NAME=ARG), after the harness's own."""
    browser_prefs: Mapping[BrowserName, tuple[tuple[str, object], ...]] = field(default_factory=dict)
    """Extra preferences per browser (--browser-pref NAME=KEY=VALUE), over the harness's own."""

    def __post_init__(self) -> None:
        """Every check of --remote, --serve-host and --parallel, for the CLI and the API alike
        (ValueError: a usage error, before any folder is made or browser started)."""
        if isinstance(self.parallel, bool) or not isinstance(self.parallel, int) or self.parallel < 1:
            raise ValueError(f"--parallel must be a whole number of at least 1, got {self.parallel!r}")
        if self.remote is not None:
            object.__setattr__(self, "remote", check_remote_url(self.remote))
            if self.drivers:
                raise ValueError("--driver goes without --remote (the grid's nodes have the drivers)")
        check_serve_host(self.serve_host)


class Overlap:
    """How many runs were in progress at once: each run's row records the most it saw."""

    def __init__(self) -> None:
        self._peaks: dict[int, int] = {}

    def begin(self, run_id: int) -> None:
        self._peaks[run_id] = 0
        now = len(self._peaks)
        for key in self._peaks:
            self._peaks[key] = max(self._peaks[key], now)

    def end(self, run_id: int) -> int:
        return self._peaks.pop(run_id, 1)


def _no_row(run: RunSpec, outcome: Outcome, reason: str, **kw: Any) -> tuple[ResultRow, dict[str, Any]]:
    row = ResultRow.without_measurement(run, outcome, reason, **kw)
    return row, {"outcome": row.outcome, "reason": row.reason}


class BrowserRunner:
    """Owns one browser for the runs of a sweep: (re)launches it, runs pages, records rows.
    Also what engines may ask of the browser before they build a job (``BrowserFacts``)."""

    def __init__(self, server: JobServer, resolved: ResolvedBrowser, writer: ResultWriter,
                 options: SweepOptions, overlap: Overlap | None = None, round_: int = 0, key: str = "") -> None:
        self.round = round_
        """The repetition (round) this runner's browser sessions serve."""
        self.key = key or str(resolved.product.name)
        """How environment.json names this browser: 'chrome', or 'chrome@chromium' for a build."""
        self.server = server
        self.resolved = resolved
        self.writer = writer
        self.options = options
        self.overlap = overlap or Overlap()
        self.session: BrowserSession | None = None
        self._webnn: dict[str, dict[str, Any]] = {}  # per device type, for the current session
        self._adapter_limits: dict[str, int] | None = None  # the browser's, from its first probe
        self._session_runs = 0  # runs measured in the current session

    async def ensure_session(self) -> BrowserSession:
        if self.session is not None and self.session.is_alive():
            return self.session
        await self.close()
        session = await asyncio.to_thread(launch, self.resolved)
        self.writer.record_browser(
            self.key,
            {
                "version": session.version,
                "binary": str(self.resolved.binary) if self.resolved.binary else "",
                "driver": str(self.resolved.driver) if self.resolved.driver else "",
                "driver_kind": self.resolved.driver_kind.value,
                "driver_note": self.resolved.driver_note,
                "launch_args": list(session.launch_args),
                "prefs": dict(self.resolved.product.prefs),
                "ran_on": dict(session.ran_on),
            },
        )
        self.session = session
        self._session_runs = 0
        return session

    async def close(self) -> None:
        if self.session is not None:
            await asyncio.to_thread(self.session.close)
        self.session = None
        self._webnn = {}

    async def webnn_context(self, device: str) -> dict[str, Any]:
        return (await self.webnn_capabilities([device]))[device]

    async def adapter_limits(self) -> dict[str, int]:
        """The WebGPU adapter's limits (web/probe.js: KEY_LIMITS) from a 'probe' job; {} without an adapter."""
        if self._adapter_limits is None:
            await self.webnn_capabilities([], probe=True)
        return self._adapter_limits or {}

    async def webnn_capabilities(self, devices: Sequence[str], probe: bool = False) -> dict[str, Any]:
        """Ask the page which WebNN contexts exist and what they support (a 'probe' job; ``probe``:
        visit it even when every device is known)."""
        session = await self.ensure_session()
        missing = [d for d in devices if d not in self._webnn]
        if missing or probe:
            reply = await visit_page(self.server, session, probe_spec(missing), {}, PROBE_TIMEOUT_S)
            if reply.outcome is not Outcome.OK:
                if reply.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
                    await self.close()
                raise RuntimeError(f"WebNN capability probe: {reply.outcome}: {reply.reason}")
            payload = reply.payload if isinstance(reply.payload, dict) else {}
            self._adapter_limits = adapter_limits(payload.get("probe"))
            webnn = payload.get("webnn") if isinstance(payload.get("webnn"), dict) else {}
            contexts = webnn.get("contexts") if isinstance(webnn.get("contexts"), dict) else {}
            for device in missing:
                if not webnn.get("present"):
                    info = {"available": False, "error": str(webnn.get("reason") or "no WebNN")}
                else:
                    ctx = contexts.get(device)
                    info = ctx if isinstance(ctx, dict) else {"available": False, "error": "no answer"}
                self._webnn[device] = info
            self.writer.record_browser(
                self.key,
                {"probe": payload.get("probe"), "webnn": dict(self._webnn), "probe_utc": utc_now()},
            )
        return {d: self._webnn[d] for d in devices}

    async def run(self, run: RunSpec) -> ResultRow:
        layers: list[LayerRow] = []
        self.overlap.begin(run.run_id)
        try:
            row, samples = await self._run(run, layers)
        except ResultsWriteError:
            raise  # the folder takes no more rows: the sweep ends (one line, exit 1)
        except Exception:  # noqa: BLE001 - a harness bug costs this row, not the sweep
            self.writer.log_harness_error(run.label, traceback.format_exc())
            lines = traceback.format_exc().strip().splitlines()
            row, samples = _no_row(run, Outcome.ERROR,
                                   f"harness error: {lines[-1]} (traceback in {self.writer.log_path.name})")
            layers = []
        finally:
            concurrent = self.overlap.end(run.run_id)
        row = replace(row, concurrent_sessions=concurrent)
        self.writer.add(row, samples, layers)
        if row.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
            await self.close()
        return row

    async def _run(self, run: RunSpec, layers: list[LayerRow]) -> tuple[ResultRow, dict[str, Any]]:
        """The run's row and samples; a whole-model run also fills ``layers`` (layers.csv)."""
        engine = engine_for(run.engine, run.platform)
        refused = run.refused or planned_refusal(run)  # a plan saved by another version may lack it
        if engine is None or refused:  # decided when the plan was built: no browser starts for it
            return _no_row(run, Outcome.UNSUPPORTED, refused or f"engine {run.engine} does not run {run.platform}")
        if engine.builds and engine.build(run).missing_reason:  # set-up installs them; nothing downloads here
            return _no_row(run, Outcome.UNAVAILABLE, engine.build(run).missing_reason)
        try:
            session = await self.ensure_session()
        except ResultsWriteError:
            raise
        except Exception as exc:  # noqa: BLE001 - any launch error is this run's failure
            where = f" on {self.resolved.remote_url}" if self.resolved.remote_url else ""
            return _no_row(run, Outcome.FAILED, f"browser failed to start{where}: {first_line(exc)}")
        timing = self.options.timing.for_run(run)
        job = await build_job(run, timing, self)
        if isinstance(job, Refusal):
            row, samples = _no_row(run, job.outcome, job.reason, browser_version=session.version)
            return row, samples | job.details
        return await self._measure(run, engine, job, session, timing, layers)

    async def _measure(self, run: RunSpec, engine: Engine, job: EngineJob, session: BrowserSession,
                       timing: TimingConfig, layers: list[LayerRow]) -> tuple[ResultRow, dict[str, Any]]:
        hook = self.options.on_run_start
        pages: list[PageReply] = []
        outputs: list[bytes | None] = []
        page: PageReply | None = None
        outcome, reason = Outcome.OK, ""
        peaks: list[MemoryFigures] = []
        quiet: list[Quiet] = []

        async def on_open(page_job: Job) -> None:
            if hook is not None:
                await hook(run, session, page_job)

        for _ in range(timing.repeat):
            page = None
            quiet.append(await wait_until_quiet(session.pid))
            sampler = TreeSampler(session.pid)
            await sampler.mark_baseline()  # the browser at rest, before this page loads
            sampler.start()
            try:
                visit = await visit_page(self.server, session, job.spec, job.tensors,
                                         timing.timeout_s / timing.repeat, on_open)
            finally:
                figures = await sampler.stop()
            peaks.append(figures)
            if visit.outcome not in (Outcome.CRASH, Outcome.TIMEOUT):
                await leave_page(session)
            outcome, reason = visit.outcome, visit.reason
            if visit.outcome is not Outcome.OK:
                break
            try:
                page = parse_page_reply(visit.payload, kind=kind_named(run.workload.kind))
            except PageDataError as exc:
                outcome, reason, page = Outcome.FAILED, f"page sent malformed data: {exc}", None
                break
            outcome, reason = Outcome(page.status), page.reason
            if page.probe and run.platform is Platform.WEBGPU:
                self.writer.record_browser(self.key, {"probe": page.probe, "probe_utc": utc_now()})
            if page.engine_version:
                self.writer.record_engine(run.engine.value, page.engine_version)
            if page.status != "ok":
                break
            pages.append(page)
            outputs.append(visit.output)
        if (job.refusal_is_unsupported and outcome is Outcome.FAILED and page is not None
                and page.stage in engine.refusal_stages):
            outcome = Outcome.UNSUPPORTED  # it refused what its context does not list: its answer
        if job.note:
            reason = f"{job.note}; browser said: {reason}" if reason else job.note
        restless = [q for q in quiet if not q.settled]
        if restless and outcome is Outcome.OK:
            busy = ", ".join(f"{q.cpu_percent:.0f}%" for q in restless)
            reason = "; ".join(filter(None, [reason, f"the browser was not at rest before {len(restless)} "
                                             f"page load(s) ({busy} of a core after {restless[0].waited_s:.1f} s)"]))
        rest = {"settle_s": [round(q.waited_s, 3) for q in quiet],
                "cpu_percent_before": [None if q.cpu_percent is None else round(q.cpu_percent, 1)
                                       for q in quiet]}
        base = replace(
            ResultRow.without_measurement(
                run, outcome, reason, browser_version=session.version,
                adapter=adapter_label(pages[0].probe) if pages and run.platform is Platform.WEBGPU else "",
                weight_format=job.weight_format,
            ),
            weight_dtype=job.weight_dtype,
            scale_dtype=job.scale_dtype,
            zero_point_dtype=job.zero_point_dtype,
            graph_form=job.graph_form or run.graph_form,
            session_run=self._session_runs,
            ran_on=ran_on_text(session),
            proc_memory_source=(f"unavailable: {session.no_process}" if session.pid is None
                                else "psutil: the browser's process tree"),
        )
        self._session_runs += 1
        if outcome is not Outcome.OK or not pages:
            layers.extend(layer_rows(run, job, None))
            return base, {"outcome": outcome.value, "reason": reason, **job.details, **rest}
        try:
            executed = [read_reply(run, job, p) for p in pages]
        except PageDataError as exc:
            failed = replace(base, outcome=Outcome.FAILED, reason=f"page sent malformed data: {exc}")
            return failed, {"outcome": failed.outcome, "reason": failed.reason, **job.details}
        row, samples = measured_row(base, run, job, pages, executed, outputs, timing,
                                    MemoryFigures.over_pages(peaks))
        layers.extend(layer_rows(run, job, executed[0]))
        if outputs[0] is not None and row.outcome in (Outcome.OK, Outcome.INVALID):
            parsed = parse_outputs(outputs[0], job.prepared.outputs)
            arrays = job.prepared.output_arrays(parsed)
            check = executed[0].check
            if check is not None and "reference_dequantized_f64" in arrays:  # judged by the engine's own rule
                arrays["reference_engine_rule_f64"] = check(job.prepared.judged(parsed))[0]
            if arrays:
                row = replace(row, outputs_file=self.writer.save_outputs(run.run_id, arrays))
        return row, {**samples, **job.details, **rest}


def ran_on_text(session: BrowserSession) -> str:
    """'local', or 'NODE (PLATFORM) via URL' for a browser a remote endpoint created."""
    where = session.ran_on.get("where", "local")
    if where == "local":
        return "local"
    node = session.ran_on.get("node") or "node"
    platform = session.ran_on.get("platform")
    return f"{node}{f' ({platform})' if platform else ''} via {where}"


def layer_rows(run: RunSpec, job: EngineJob, executed: Executed | None) -> list[LayerRow]:
    """layers.csv lines of a model run (its kind's layer plan; none for a lone matmul): the plan,
    what ran where the engine could tell, and what the held weights cost (their error against
    the float weights, where the harness made the bytes)."""
    ran = {layer.name: layer for layer in executed.layers} if executed is not None else {}
    held = {layer.name: layer.held for layer in getattr(getattr(job.prepared, "held", None), "layers", ())}
    rows = []
    for p in job.layer_plan:
        done = ran.get(p.layer.name)
        rows.append(LayerRow(
            run_id=run.run_id, layer=p.layer.name, kind=p.layer.kind, k=p.layer.k, n=p.layer.n,
            bits_requested=p.bits, rule=p.rule, bits_executed=done.bits_executed if done else None,
            weight_dtype=done.weight_dtype if done else "", weight_bytes=done.weight_bytes if done else None,
            gpu_ms=done.gpu_ms if done else None, act_dtype=done.act_dtype if done else "",
            weight_error=held[p.layer.name].weight_error if p.layer.name in held else None))
    return rows


def asset_mounts() -> dict[str, Any]:
    """URL prefix -> folder for every registered engine's page assets (e.g. ORT's bundle)."""
    mounts: dict[str, Any] = {}
    for engine in ENGINES:
        mounts |= engine.assets()
    return mounts


def resolve_browser(choice: BrowserChoice | BrowserName, options: SweepOptions) -> ResolvedBrowser | BrowserUnavailable:
    """The browser as the options launch it: found (locally or on --remote), with the user's extra
    switches and preferences; or why it cannot be. A named build's binary (``chrome@chromium``)
    replaces discovery's and ``--browser-binary``'s."""
    choice = browser_choice(choice)
    browser = choice.name
    binary = choice.binary() or options.binaries.get(browser)
    try:
        if options.remote:
            found = resolve_remote(browser, options.remote, binary)
        else:
            found = resolve(browser, binary, options.drivers.get(browser))
    except BrowserUnavailable as exc:
        return BrowserUnavailable(f"{choice}: {exc}") if choice.build else exc
    extra_args, extra_prefs = options.browser_args.get(browser, ()), options.browser_prefs.get(browser, ())
    if not extra_args and not extra_prefs:
        return found
    return replace(found, product=with_extras(found.product, extra_args, extra_prefs))


def _say_interrupts_once(loop: asyncio.AbstractEventLoop) -> None:
    """Ctrl-C or a stop signal (cli/main.py) raises KeyboardInterrupt in whatever the main thread
    runs: when that is one of the sweep's tasks, asyncio ends the loop with it (the caller reports
    it, once) and also keeps it in the task, logged with a traceback as "never retrieved" when the
    task is collected. The loop's exception handler drops that second report; others pass on."""
    previous = loop.get_exception_handler()
    if getattr(previous, "says_interrupts_once", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), KeyboardInterrupt):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.says_interrupts_once = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


async def run_sweep(
    plan: Sequence[RunSpec], writer: ResultWriter, options: SweepOptions = SweepOptions()
) -> list[ResultRow]:
    """Runs the plan in order on ``options.parallel`` concurrent browser sessions (one by default).
    Each session takes the next run from the queue, keeps its browser for the runs of that
    browser and round that follow (a new round starts a fresh browser), and writes every row as
    its run ends."""
    _say_interrupts_once(asyncio.get_running_loop())
    rows: list[ResultRow] = []
    total = len(plan)
    queue = collections.deque(plan)
    held: list[tuple[Any, ...]] = []  # the configuration whose preparation the caches hold
    overlap = Overlap()
    browsers = list(dict.fromkeys(BrowserChoice(r.browser, r.browser_build) for r in plan))
    resolved = dict(zip(browsers, await asyncio.gather(
        *(asyncio.to_thread(resolve_browser, b, options) for b in browsers)), strict=True))

    async def session_worker(server: JobServer) -> None:
        runner: BrowserRunner | None = None
        try:
            while queue:
                run = queue.popleft()
                if held and held != [prepared_caches.configuration(run)]:
                    prepared_caches.release()  # one configuration's preparation held at a time
                held[:] = [prepared_caches.configuration(run)]
                if options.progress:
                    options.progress.started(run, len(rows) + 1, total)
                found = resolved[BrowserChoice(run.browser, run.browser_build)]
                if isinstance(found, BrowserUnavailable):
                    row, samples = _no_row(run, Outcome.UNAVAILABLE, str(found))
                    writer.add(row, samples)
                else:
                    if runner is not None and (runner.resolved is not found or runner.round != run.repetition):
                        await runner.close()  # one browser at a time per slot; a fresh one per round
                        runner = None
                    runner = runner or BrowserRunner(server, found, writer, options, overlap, run.repetition,
                                                     run.browser_key)
                    row = await runner.run(run)
                rows.append(row)
                if options.progress:
                    options.progress.finished(run, row, len(rows), total)
        finally:
            if runner is not None:
                await runner.close()

    async with JobServer(asset_mounts(), host=options.serve_host) as server:
        try:
            async with asyncio.TaskGroup() as sessions:
                for _ in range(min(options.parallel, max(1, total))):
                    sessions.create_task(session_worker(server))
        except BaseExceptionGroup as group:  # the first session's error, as a single session raises it
            raise group.exceptions[0] from None
    return rows

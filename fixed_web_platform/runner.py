"""Executes a plan: one browser session per browser, reused across its runs, one row per run.

A crash or hang costs that run's row only: the session is killed and the next run gets a fresh
browser. Rows are written to disk as each run ends.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from . import quant
from .browsers import BrowserSession, BrowserUnavailable, ResolvedBrowser, launch, resolve
from .progress import Progress
from .page_result import PageDataError, PageResult, parse_output, parse_page_result
from .results import ResultRow, ResultWriter, utc_now
from .server import Job, JobServer
from .specs import SCHEMA_VERSION, BrowserName, Outcome, Platform, RunSpec, TimingConfig
from .errors import first_line
from .memory import MemoryFigures, TreeSampler
from .stats import summarize
from .webnn_precision import WeightPlan, choose_weight_plan
from .workloads import PreparedWorkload, kernel_tolerance, prepare

RunHook = Callable[[RunSpec, BrowserSession, Job], Awaitable[None]]
LIVENESS_POLL_S = 0.25
PROBE_TIMEOUT_S = 60.0
NAVIGATION_SETTLE_S = 10.0
PAGE_PING_S = 2.0
"""How often a loaded page is asked for a trivial script, so a crashed renderer (the browser's
main process still alive) is a crash at once, not a timeout later."""


def _swallow(task: asyncio.Task[Any]) -> None:
    """Read a background driver call's error so it is not reported as never retrieved."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class SweepOptions:
    timing: TimingConfig = TimingConfig()
    binaries: dict[BrowserName, str] = field(default_factory=dict)
    drivers: dict[BrowserName, str] = field(default_factory=dict)
    on_run_start: RunHook | None = None
    """Called (as a task) when a run's page is opened; tests use it to kill a browser mid-run."""
    progress: Progress | None = None


@dataclass(frozen=True)
class PageReply:
    """What came back from one page visit: a payload, or why there is none."""

    outcome: Outcome
    reason: str = ""
    payload: Any = None
    output: bytes | None = None


def adapter_label(probe: dict[str, Any]) -> str:
    gpu = probe.get("webgpu") if isinstance(probe, dict) else None
    if not isinstance(gpu, dict) or not gpu.get("available"):
        return ""
    adapter = gpu.get("adapter") or {}
    parts = [str(adapter.get(k, "")) for k in ("vendor", "architecture", "device")]
    label = "/".join(p for p in parts if p)
    return f"{label} (fallback)" if adapter.get("isFallbackAdapter") else label


def job_spec(
    run: RunSpec, prepared: PreparedWorkload, timing: TimingConfig, weights: WeightPlan | None = None
) -> dict[str, Any]:
    """The JSON the page fetches: shape, kernel or graph choices, tensor names, counts."""
    w = run.workload
    spec: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "platform": run.platform.value,
        "bits": prepared.bits,
        "m": w.m,
        "k": w.k,
        "n": w.n,
        "warmup": timing.warmup,
        "min_iterations": timing.min_iterations,
        "max_iterations": timing.max_iterations,
        "min_time_ms": timing.min_time_s * 1000.0,
        "budget_ms": timing.page_budget_ms,
        "constants": prepared.constants,
        "variants": [
            {"shader": v.shader, "compute_dtype": v.compute_dtype, "requires": list(v.requires)}
            for v in prepared.variants
        ],
        "bindings": list(prepared.tensors),
        "output_bytes": w.m * w.n * 4,
    }
    if weights is not None:
        spec["webnn"] = {
            "device_type": run.webnn_device,
            "weight_dtype": weights.weight_dtype,
            "scale_dtype": weights.scale_dtype,
            "zero_point_dtype": weights.zero_point_dtype,
            "matmul_dtype": weights.matmul_dtype,
        }
    return spec


async def visit_page(
    server: JobServer, session: BrowserSession, spec: dict[str, Any], tensors: dict[str, bytes],
    timeout_s: float, on_open: Callable[[Job], Awaitable[None]] | None = None,
) -> PageReply:
    """Open the harness page on a job and wait (server side) for its result, watching the browser."""
    job = server.add_job(spec, tensors)
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
            if not session.is_alive():
                return PageReply(Outcome.CRASH, "the browser process died during the run")
            if navigation.done() and navigation.exception() is not None:
                first = first_line(navigation.exception())
                if not session.is_alive() or "crash" in first.lower():
                    return PageReply(Outcome.CRASH, f"browser crashed: {first}")
                return PageReply(Outcome.FAILED, f"navigation failed: {first}")
            if ping is not None and ping.done():
                error = ping.exception()
                ping = None
                if error is not None and "crash" in first_line(error).lower():
                    return PageReply(Outcome.CRASH, f"the page crashed: {first_line(error)}")
            if navigation.done() and ping is None and time.monotonic() - last_ping >= PAGE_PING_S:
                last_ping = time.monotonic()
                ping = asyncio.create_task(asyncio.to_thread(session.ping))
                ping.add_done_callback(_swallow)
            if time.monotonic() > deadline:
                return PageReply(Outcome.TIMEOUT, f"no result within {timeout_s:g} s; browser restarted")
        # Let the driver finish its calls before the next page is opened.
        await asyncio.wait({t for t in (navigation, ping) if t is not None}, timeout=NAVIGATION_SETTLE_S)
        return PageReply(Outcome.OK, payload=job.result.result(), output=job.output)
    finally:
        server.remove_job(job)
        if hook is not None and not hook.done():
            hook.cancel()
        # A navigation still blocked on a dead or hung browser ends when the session is killed.


def _samples_record(pages: Sequence[PageResult], timing_source: str, outcome: str) -> dict[str, Any]:
    gpu_ok = all(p.gpu_ms is not None for p in pages)
    return {
        "outcome": outcome,
        "timing_source": timing_source,
        "cold_ms": [p.cold_ms for p in pages],
        "wall_ms": [s for p in pages for s in p.wall_ms],
        "gpu_ms": [s for p in pages for s in p.gpu_ms or ()] if gpu_ok else None,
        "samples_per_page": [len(p.wall_ms) for p in pages],
        "compile_ms": [p.compile_ms for p in pages],
    }


OPERAND_BITS = {"float32": 32, "float16": 16, "int8": 8, "uint8": 8, "int4": 4, "uint4": 4,
                "int2": 2, "uint2": 2}
BUILD_STAGES = ("graph building", "build")
"""WebNN stages where a refused data type surfaces (the browser's answer to what we asked)."""


def what_ran(page: PageResult, run: RunSpec, prepared: PreparedWorkload,
             weights: WeightPlan | None) -> tuple[int | None, str, str]:
    """(bits executed, compute dtype, problem) from what the page reports it bound or built.

    Python decides the compute dtype (hence the tolerance) from the kernel or graph it offered,
    never from the page's word; a page that used something not offered is a problem."""
    if weights is not None:  # WebNN: the dataType of the operand that held the stored weights
        bits = OPERAND_BITS.get(page.weight_operand_dtype)
        compute = "f16" if weights.matmul_dtype == "float16" else "f32"
        problem = "" if page.weight_operand_dtype == weights.weight_dtype else (
            f"the graph held weights as {page.weight_operand_dtype or '?'}, not {weights.weight_dtype}")
        return bits, compute, problem
    variant = next((v for v in prepared.variants if v.shader == page.shader), None)
    if variant is None:
        return None, "", f"the page used shader {page.shader!r}, which the job did not offer"
    elements = run.workload.n * run.workload.k
    bound = page.weight_buffer_bytes or 0
    bits = bound * 8 // elements if bound * 8 % elements == 0 else None
    problem = "" if bits == prepared.bits else (
        f"the bound weight buffer holds {bound} bytes, not {prepared.bits}-bit weights")
    return bits, variant.compute_dtype, problem


def measured_row(base: ResultRow, run: RunSpec, prepared: PreparedWorkload,
                 pages: Sequence[PageResult], outputs: Sequence[bytes | None], timing: TimingConfig,
                 memory: MemoryFigures | None = None, weights: WeightPlan | None = None,
                 ) -> tuple[ResultRow, dict[str, Any]]:
    """Statistics and error figures from the pages' raw samples and output tensors (pooled over
    the page loads of one run); every page's output must pass the kernel check."""
    try:
        outs = [parse_output(o, run.workload.m, run.workload.n) for o in outputs]
    except PageDataError as exc:
        row = replace(base, outcome=Outcome.FAILED, reason=f"page sent malformed data: {exc}")
        return row, {"outcome": row.outcome, "reason": row.reason}
    first = pages[0]
    ran = [what_ran(p, run, prepared, weights) for p in pages]
    bits_executed, compute_dtype, _ = ran[0]
    problems = sorted({problem for _, _, problem in ran if problem})
    vs_float = quant.error_metrics(outs[0], prepared.ref_float)
    kernel_errors = [quant.error_metrics(o, prepared.ref_dequantized)["rel_error"] for o in outs]
    kernel_error = max(kernel_errors, key=lambda e: (e != e, e))  # NaN counts as the worst
    tolerance = kernel_tolerance(compute_dtype)
    gpu_samples = [s for p in pages for s in p.gpu_ms or ()]
    gpu_usable = all(p.gpu_ms is not None for p in pages) and all(s > 0 for s in gpu_samples)
    wall_samples = [s for p in pages for s in p.wall_ms]
    headline = gpu_samples if gpu_usable else wall_samples
    timing_source = "gpu-timestamp" if gpu_usable else "wall-clock"
    stats = summarize(headline)
    short = any(len(p.wall_ms) < timing.min_iterations for p in pages)
    notes = [base.reason] if base.reason else []
    if short:
        counts = ", ".join(str(len(p.wall_ms)) for p in pages)
        notes.append(f"short: {counts} timed samples per page, {timing.min_iterations} asked "
                     f"(page time budget {timing.page_budget_ms / 1000:g} s)")
    outcome = Outcome.OK
    if problems:
        outcome = Outcome.INVALID
        notes.extend(problems)
    if not (kernel_error <= tolerance):  # NaN fails too
        outcome = Outcome.INVALID
        notes.append(f"kernel error {kernel_error:.3g} vs the dequantized reference exceeds the "
                     f"{compute_dtype} tolerance {tolerance:g}")
    heaps = [p.js_heap_bytes for p in pages if p.js_heap_bytes is not None]
    row = replace(
        base,
        outcome=outcome,
        reason="; ".join(notes),
        bits_executed=bits_executed,
        compute_dtype=compute_dtype,
        latency_ms_median=stats.median,
        latency_ms_p10=stats.p10,
        latency_ms_p90=stats.p90,
        latency_cv=stats.cv,
        latency_ms_mean=stats.mean,
        latency_ms_stdev=stats.stdev,
        latency_ms_iqr=stats.iqr,
        n_samples=stats.n,
        min_samples=timing.min_iterations * len(pages),
        samples_short=short,
        unstable=bool(stats.instability),
        instability=stats.instability,
        pages=len(pages),
        timing_source=timing_source,
        cold_ms=first.cold_ms,
        wall_ms_median=summarize(wall_samples).median,
        gpu_ms_median=summarize(gpu_samples).median if gpu_samples else None,
        compile_ms=first.compile_ms,
        gflops=run.workload.flops / (stats.median * 1e-3) / 1e9 if stats.median > 0 else None,
        weight_bytes=prepared.weight_bytes,
        weight_bytes_f32=run.workload.n * run.workload.k * 4,
        compression=run.workload.n * run.workload.k * 4 / prepared.weight_bytes,
        gpu_buffer_bytes=first.gpu_buffer_bytes or None,
        js_heap_bytes=max(heaps) if heaps else None,
        js_heap_source=next((p.js_heap_source for p in pages if p.js_heap_bytes is not None),
                            first.js_heap_source),
        rel_error_vs_float=vs_float["rel_error"],
        max_abs_error_vs_float=vs_float["max_abs_error"],
        snr_db=vs_float["snr_db"],
        cosine_vs_float=vs_float["cosine"],
        rel_error_vs_dequantized=kernel_error,
        kernel_tolerance=tolerance,
        shader=first.shader,
    )
    if memory is not None:
        row = replace(
            row,
            proc_rss_baseline_bytes=memory.baseline_rss,
            proc_rss_peak_bytes=memory.peak_rss,
            proc_rss_delta_bytes=memory.delta_rss,
            proc_uss_peak_bytes=memory.peak_uss,
            proc_pss_peak_bytes=memory.peak_pss,
            proc_count=memory.processes,
        )
    return row, _samples_record(pages, timing_source, row.outcome)


class BrowserRunner:
    """Owns one browser for the runs of a sweep: (re)launches it, runs pages, records rows."""

    def __init__(self, server: JobServer, resolved: ResolvedBrowser, writer: ResultWriter,
                 options: SweepOptions) -> None:
        self.server = server
        self.resolved = resolved
        self.writer = writer
        self.options = options
        self.session: BrowserSession | None = None
        self._webnn: dict[str, dict[str, Any]] = {}  # per device type, for the current session

    async def ensure_session(self) -> BrowserSession:
        if self.session is not None and self.session.is_alive():
            return self.session
        await self.close()
        session = await asyncio.to_thread(launch, self.resolved)
        self.writer.record_browser(
            self.resolved.product.name,
            {
                "version": session.version,
                "binary": str(self.resolved.binary),
                "driver": str(self.resolved.driver) if self.resolved.driver else "",
                "driver_kind": self.resolved.driver_kind.value,
                "launch_args": list(session.launch_args),
                "prefs": dict(self.resolved.product.prefs),
            },
        )
        self.session = session
        return session

    async def close(self) -> None:
        if self.session is not None:
            await asyncio.to_thread(self.session.close)
        self.session = None
        self._webnn = {}

    async def webnn_capabilities(self, devices: Sequence[str]) -> dict[str, Any]:
        """Ask the page which WebNN contexts exist and what they support (a 'probe' job)."""
        session = await self.ensure_session()
        missing = [d for d in devices if d not in self._webnn]
        if missing:
            reply = await visit_page(
                self.server, session, {"platform": "probe", "webnn_devices": missing}, {},
                PROBE_TIMEOUT_S,
            )
            if reply.outcome is not Outcome.OK:
                if reply.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
                    await self.close()
                raise RuntimeError(f"WebNN capability probe: {reply.outcome}: {reply.reason}")
            payload = reply.payload if isinstance(reply.payload, dict) else {}
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
                self.resolved.product.name,
                {"probe": payload.get("probe"), "webnn": dict(self._webnn), "probe_utc": utc_now()},
            )
        return {d: self._webnn[d] for d in devices}

    async def run(self, run: RunSpec) -> ResultRow:
        try:
            row, samples = await self._run(run)
        except Exception as exc:  # noqa: BLE001 - a harness error costs this row, not the sweep
            row = ResultRow.without_measurement(run, Outcome.FAILED, first_line(exc))
            samples = {"outcome": row.outcome, "reason": row.reason}
        self.writer.add(row, samples)
        if row.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
            await self.close()
        return row

    async def _run(self, run: RunSpec) -> tuple[ResultRow, dict[str, Any]]:
        try:
            session = await self.ensure_session()
        except Exception as exc:  # noqa: BLE001 - any launch error is this run's failure
            row = ResultRow.without_measurement(
                run, Outcome.FAILED, f"browser failed to start: {first_line(exc)}")
            return row, {"outcome": row.outcome, "reason": row.reason}
        weights: WeightPlan | None = None
        context_limits: dict[str, Any] | None = None
        if run.platform is Platform.WEBNN:
            context = (await self.webnn_capabilities([run.webnn_device]))[run.webnn_device]
            if not context.get("available"):
                row = ResultRow.without_measurement(
                    run, Outcome.UNSUPPORTED, f"WebNN {run.webnn_device}: {context.get('error', '')}",
                    browser_version=session.version,
                )
                return row, {"outcome": row.outcome, "reason": row.reason}
            context_limits = context.get("limits") or {}
            weights = choose_weight_plan(run.bits, run.precision_mode, context_limits)
            if weights.unsupported:
                row = ResultRow.without_measurement(
                    run, Outcome.UNSUPPORTED, weights.unsupported, browser_version=session.version
                )
                return row, {"outcome": row.outcome, "reason": row.reason, "op_support_limits": context_limits}
        bits = weights.bits_executed if weights else run.bits
        prepared = prepare(run.workload, bits, run.block_size, run.seed, bool(weights and weights.unsigned))
        hook = self.options.on_run_start
        timing = self.options.timing
        spec = job_spec(run, prepared, timing, weights)
        pages: list[PageResult] = []
        outputs: list[bytes | None] = []
        page: PageResult | None = None
        outcome, reason = Outcome.OK, ""
        peaks: list[MemoryFigures] = []
        async def on_open(job: Job) -> None:
            if hook is not None:
                await hook(run, session, job)

        for _ in range(timing.repeat):
            page = None
            sampler = TreeSampler(session.pid)
            await sampler.mark_baseline()  # the browser at rest, before this page loads
            sampler.start()
            try:
                reply = await visit_page(self.server, session, spec, prepared.tensors,
                                         timing.timeout_s / timing.repeat, on_open)
            finally:
                figures = await sampler.stop()
            peaks.append(figures)
            outcome, reason = reply.outcome, reply.reason
            if reply.outcome is not Outcome.OK:
                break
            try:
                page = parse_page_result(reply.payload, timing.max_iterations)
            except PageDataError as exc:
                outcome, reason, page = Outcome.FAILED, f"page sent malformed data: {exc}", None
                break
            outcome, reason = Outcome(page.status), page.reason
            if page.probe and weights is None:
                self.writer.record_browser(run.browser, {"probe": page.probe, "probe_utc": utc_now()})
            if page.status != "ok":
                break
            pages.append(page)
            outputs.append(reply.output)
        if (weights is not None and weights.asks_unlisted and outcome is Outcome.FAILED
                and page is not None and page.stage in BUILD_STAGES):
            outcome = Outcome.UNSUPPORTED  # it refused a type its context does not list: its answer
        if weights is not None and weights.note:
            reason = f"{weights.note}; browser said: {reason}" if reason else weights.note
        base = replace(
            ResultRow.without_measurement(
                run, outcome, reason, browser_version=session.version,
                adapter=adapter_label(pages[0].probe) if pages and weights is None else "",
                weight_format=prepared.weight_format,
            ),
            weight_dtype=weights.weight_dtype if weights else prepared.weight_dtype,
            scale_dtype=(weights.scale_dtype if weights else ("float32" if bits <= 8 else "")),
            zero_point_dtype=(weights.zero_point_dtype if weights else (prepared.weight_dtype if bits <= 8 else "")),
        )
        extra = {"op_support_limits": context_limits} if context_limits is not None else {}
        if outcome is not Outcome.OK or not pages:
            return base, {"outcome": outcome.value, "reason": reason, **extra}
        memory = MemoryFigures.over_pages(peaks)
        row, samples = measured_row(base, run, prepared, pages, outputs, timing, memory, weights)
        return row, {**samples, **extra}


async def run_sweep(
    plan: Sequence[RunSpec], writer: ResultWriter, options: SweepOptions = SweepOptions()
) -> list[ResultRow]:
    rows: list[ResultRow] = []
    total = len(plan)
    async with JobServer() as server:
        for browser, group in itertools.groupby(plan, key=lambda r: r.browser):
            runs = list(group)
            try:
                resolved = resolve(browser, options.binaries.get(browser), options.drivers.get(browser))
            except BrowserUnavailable as exc:
                for run in runs:
                    if options.progress:
                        options.progress.started(run, len(rows) + 1, total)
                    row = ResultRow.without_measurement(run, Outcome.UNAVAILABLE, str(exc))
                    writer.add(row, {"outcome": row.outcome, "reason": row.reason})
                    rows.append(row)
                    if options.progress:
                        options.progress.finished(run, row, len(rows), total)
                continue
            runner = BrowserRunner(server, resolved, writer, options)
            try:
                for run in runs:
                    if options.progress:
                        options.progress.started(run, len(rows) + 1, total)
                    row = await runner.run(run)
                    rows.append(row)
                    if options.progress:
                        options.progress.finished(run, row, len(rows), total)
            finally:
                await runner.close()
    return rows

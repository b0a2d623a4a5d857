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
from .page_result import PageDataError, PageResult, parse_output, parse_page_result
from .results import ResultRow, ResultWriter, utc_now
from .server import Job, JobServer
from .specs import SCHEMA_VERSION, BrowserName, Outcome, Platform, RunSpec, TimingConfig
from .stats import summarize
from .webnn_precision import WeightPlan, choose_weight_plan
from .workloads import PreparedWorkload, kernel_tolerance, prepare

RunHook = Callable[[RunSpec, BrowserSession, Job], Awaitable[None]]
LIVENESS_POLL_S = 0.25
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SweepOptions:
    timing: TimingConfig = TimingConfig()
    binaries: dict[BrowserName, str] = field(default_factory=dict)
    drivers: dict[BrowserName, str] = field(default_factory=dict)
    on_run_start: RunHook | None = None
    """Called (as a task) when a run's page is opened; tests use it to kill a browser mid-run."""
    progress: Callable[[str], None] | None = print


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
        "iterations": timing.iterations,
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
    deadline = time.monotonic() + timeout_s
    try:
        while not job.result.done():
            await asyncio.wait({job.result}, timeout=LIVENESS_POLL_S)
            if job.result.done():
                break
            if not session.is_alive():
                return PageReply(Outcome.CRASH, "the browser process died during the run")
            if navigation.done() and navigation.exception() is not None:
                first = (str(navigation.exception()).strip().splitlines() or ["?"])[0]
                if not session.is_alive() or "crash" in first.lower():
                    return PageReply(Outcome.CRASH, f"browser crashed: {first}")
                return PageReply(Outcome.FAILED, f"navigation failed: {first}")
            if time.monotonic() > deadline:
                return PageReply(Outcome.TIMEOUT, f"no result within {timeout_s:g} s; browser restarted")
        return PageReply(Outcome.OK, payload=job.result.result(), output=job.output)
    finally:
        server.remove_job(job)
        if hook is not None and not hook.done():
            hook.cancel()
        # A navigation still blocked on a dead or hung browser ends when the session is killed.


def _samples_record(page: PageResult, timing_source: str, outcome: str) -> dict[str, Any]:
    return {
        "outcome": outcome,
        "timing_source": timing_source,
        "cold_ms": page.cold_ms,
        "wall_ms": list(page.wall_ms),
        "gpu_ms": list(page.gpu_ms) if page.gpu_ms is not None else None,
        "compile_ms": page.compile_ms,
    }


def measured_row(base: ResultRow, run: RunSpec, prepared: PreparedWorkload, page: PageResult,
                 output: bytes | None) -> tuple[ResultRow, dict[str, Any]]:
    """Statistics and error figures from the page's raw samples and output tensor."""
    try:
        out = parse_output(output, run.workload.m, run.workload.n)
    except PageDataError as exc:
        row = replace(base, outcome=Outcome.FAILED, reason=f"page sent malformed data: {exc}")
        return row, {"outcome": row.outcome, "reason": row.reason}
    vs_float = quant.error_metrics(out, prepared.ref_float)
    vs_deq = quant.error_metrics(out, prepared.ref_dequantized)
    tolerance = kernel_tolerance(page.compute_dtype)
    gpu_usable = page.gpu_ms is not None and all(s > 0 for s in page.gpu_ms)
    headline = page.gpu_ms if gpu_usable else page.wall_ms
    timing_source = "gpu-timestamp" if gpu_usable else "wall-clock"
    stats = summarize(headline)
    outcome, reason = Outcome.OK, base.reason
    if page.weight_bits != prepared.bits:
        reason = f"page executed {page.weight_bits}-bit weights for a {prepared.bits}-bit job"
        outcome = Outcome.INVALID
    if not (vs_deq["rel_error"] <= tolerance):  # NaN fails too
        outcome = Outcome.INVALID
        reason = (
            f"kernel error {vs_deq['rel_error']:.3g} vs the dequantized reference exceeds the "
            f"{page.compute_dtype} tolerance {tolerance:g}"
        )
    row = replace(
        base,
        outcome=outcome,
        reason=reason,
        bits_executed=page.weight_bits,
        compute_dtype=page.compute_dtype,
        latency_ms_median=stats.median,
        latency_ms_p10=stats.p10,
        latency_ms_p90=stats.p90,
        latency_cv=stats.cv,
        n_samples=stats.n,
        timing_source=timing_source,
        cold_ms=page.cold_ms,
        wall_ms_median=summarize(page.wall_ms).median,
        gpu_ms_median=summarize(page.gpu_ms).median if page.gpu_ms else None,
        compile_ms=page.compile_ms,
        gflops=run.workload.flops / (stats.median * 1e-3) / 1e9 if stats.median > 0 else None,
        weight_bytes=prepared.weight_bytes,
        weight_bytes_f32=run.workload.n * run.workload.k * 4,
        gpu_buffer_bytes=page.gpu_buffer_bytes or None,
        rel_error_vs_float=vs_float["rel_error"],
        max_abs_error_vs_float=vs_float["max_abs_error"],
        snr_db=vs_float["snr_db"],
        cosine_vs_float=vs_float["cosine"],
        rel_error_vs_dequantized=vs_deq["rel_error"],
        kernel_tolerance=tolerance,
        shader=page.shader,
    )
    return row, _samples_record(page, timing_source, row.outcome)


def _progress(options: SweepOptions, index: int, total: int, run: RunSpec, row: ResultRow) -> None:
    if options.progress is None:
        return
    median = f"{row.latency_ms_median:.3f} ms" if row.latency_ms_median is not None else "-"
    executed = (
        f" (ran {row.bits_executed}-bit)"
        if row.bits_executed is not None and row.bits_executed != row.bits_requested else ""
    )
    reason = f" ({row.reason})" if row.reason else ""
    options.progress(
        f"[{index}/{total}] {run.browser} {run.platform} {run.bits}-bit{executed} "
        f"{run.workload.shape}: {row.outcome} {median}{reason}"
    )


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
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            row = ResultRow.without_measurement(run, Outcome.FAILED, first)
            samples = {"outcome": row.outcome, "reason": row.reason}
        self.writer.add(row, samples)
        if row.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
            await self.close()
        return row

    async def _run(self, run: RunSpec) -> tuple[ResultRow, dict[str, Any]]:
        try:
            session = await self.ensure_session()
        except Exception as exc:  # noqa: BLE001 - any launch error is this run's failure
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            row = ResultRow.without_measurement(run, Outcome.FAILED, f"browser failed to start: {first}")
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

        async def on_open(job: Job) -> None:
            if hook is not None:
                await hook(run, session, job)

        reply = await visit_page(
            self.server, session, job_spec(run, prepared, self.options.timing, weights),
            prepared.tensors, self.options.timing.timeout_s, on_open,
        )
        page: PageResult | None = None
        outcome, reason = reply.outcome, reply.reason
        if reply.outcome is Outcome.OK:
            try:
                page = parse_page_result(reply.payload, self.options.timing.iterations)
            except PageDataError as exc:
                outcome, reason = Outcome.FAILED, f"page sent malformed data: {exc}"
            else:
                outcome, reason = Outcome(page.status), page.reason
                if page.probe and weights is None:
                    self.writer.record_browser(run.browser, {"probe": page.probe, "probe_utc": utc_now()})
        if weights is not None and weights.asks_unlisted and outcome is Outcome.FAILED and page:
            outcome = Outcome.UNSUPPORTED  # we asked for a type the context does not list: its answer
        if weights is not None and weights.note:
            reason = f"{weights.note}; browser said: {reason}" if reason else weights.note
        base = replace(
            ResultRow.without_measurement(
                run, outcome, reason, browser_version=session.version,
                adapter=adapter_label(page.probe) if page and weights is None else "",
                weight_format=prepared.weight_format,
            ),
            weight_dtype=weights.weight_dtype if weights else prepared.weight_dtype,
            scale_dtype=(weights.scale_dtype if weights else ("float32" if bits <= 8 else "")),
            zero_point_dtype=(weights.zero_point_dtype if weights else (prepared.weight_dtype if bits <= 8 else "")),
        )
        extra = {"op_support_limits": context_limits} if context_limits is not None else {}
        if outcome is not Outcome.OK or page is None:
            return base, {"outcome": outcome.value, "reason": reason, **extra}
        row, samples = measured_row(base, run, prepared, page, reply.output)
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
                    row = ResultRow.without_measurement(run, Outcome.UNAVAILABLE, str(exc))
                    writer.add(row, {"outcome": row.outcome, "reason": row.reason})
                    rows.append(row)
                    _progress(options, len(rows), total, run, row)
                continue
            runner = BrowserRunner(server, resolved, writer, options)
            try:
                for run in runs:
                    row = await runner.run(run)
                    rows.append(row)
                    _progress(options, len(rows), total, run, row)
            finally:
                await runner.close()
    return rows

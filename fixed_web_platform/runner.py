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
from .workloads import PreparedWorkload, kernel_tolerance, prepare

RunHook = Callable[[RunSpec, BrowserSession, Job], Awaitable[None]]
LIVENESS_POLL_S = 0.25


@dataclass(frozen=True)
class SweepOptions:
    timing: TimingConfig = TimingConfig()
    binaries: dict[BrowserName, str] = field(default_factory=dict)
    drivers: dict[BrowserName, str] = field(default_factory=dict)
    on_run_start: RunHook | None = None
    """Called (as a task) when a run's page is opened; tests use it to kill a browser mid-run."""
    progress: Callable[[str], None] | None = print


@dataclass
class _Attempt:
    """What came back from the browser for one run, before it becomes a row."""

    outcome: Outcome
    reason: str = ""
    page: PageResult | None = None
    output: bytes | None = None


def _adapter_label(probe: dict[str, Any]) -> str:
    gpu = probe.get("webgpu") if isinstance(probe, dict) else None
    if not isinstance(gpu, dict) or not gpu.get("available"):
        return ""
    adapter = gpu.get("adapter") or {}
    parts = [str(adapter.get(k, "")) for k in ("vendor", "architecture", "device")]
    label = "/".join(p for p in parts if p)
    return f"{label} (fallback)" if adapter.get("isFallbackAdapter") else label


def job_spec(run: RunSpec, prepared: PreparedWorkload, timing: TimingConfig) -> dict[str, Any]:
    """The JSON the page fetches: shape, kernel choices, tensor names in binding order, counts."""
    w = run.workload
    return {
        "schema_version": SCHEMA_VERSION,
        "platform": run.platform.value,
        "bits": run.bits,
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


async def _execute(
    server: JobServer, session: BrowserSession, run: RunSpec, prepared: PreparedWorkload,
    options: SweepOptions,
) -> _Attempt:
    job = server.add_job(job_spec(run, prepared, options.timing), prepared.tensors)
    hook = asyncio.create_task(options.on_run_start(run, session, job)) if options.on_run_start else None
    navigation = asyncio.create_task(asyncio.to_thread(session.open, server.job_url(job)))
    deadline = time.monotonic() + options.timing.timeout_s
    try:
        while not job.result.done():
            await asyncio.wait({job.result}, timeout=LIVENESS_POLL_S)
            if job.result.done():
                break
            if not session.is_alive():
                return _Attempt(Outcome.CRASH, "the browser process died during the run")
            if navigation.done() and navigation.exception() is not None:
                exc = navigation.exception()
                if not session.is_alive() or "crash" in str(exc).lower():
                    return _Attempt(Outcome.CRASH, f"browser crashed: {str(exc).splitlines()[0]}")
                return _Attempt(Outcome.FAILED, f"navigation failed: {str(exc).splitlines()[0]}")
            if time.monotonic() > deadline:
                return _Attempt(
                    Outcome.TIMEOUT, f"no result within {options.timing.timeout_s:g} s; browser restarted"
                )
        try:
            page = parse_page_result(job.result.result(), options.timing.iterations)
        except PageDataError as exc:
            return _Attempt(Outcome.FAILED, f"page sent malformed data: {exc}")
        if page.status == "ok":
            return _Attempt(Outcome.OK, page=page, output=job.output)
        return _Attempt(Outcome(page.status), page.reason, page=page)
    finally:
        server.remove_job(job)
        if hook is not None and not hook.done():
            hook.cancel()
        # A navigation still blocked on a dead or hung browser finishes when the session is killed.


def _row_from_attempt(
    run: RunSpec, prepared: PreparedWorkload, attempt: _Attempt, session: BrowserSession,
    writer: ResultWriter,
) -> ResultRow:
    page = attempt.page
    adapter = _adapter_label(page.probe) if page else ""
    base = ResultRow.without_measurement(
        run, attempt.outcome, attempt.reason, browser_version=session.version, adapter=adapter,
        weight_format=prepared.weight_format,
    )
    if attempt.outcome is not Outcome.OK or page is None:
        writer.add(base, {"outcome": attempt.outcome.value, "reason": attempt.reason})
        return base
    try:
        out = parse_output(attempt.output, run.workload.m, run.workload.n)
    except PageDataError as exc:
        row = replace(base, outcome=Outcome.FAILED, reason=f"page sent malformed data: {exc}")
        writer.add(row, {"outcome": row.outcome})
        return row
    vs_float = quant.error_metrics(out, prepared.ref_float)
    vs_deq = quant.error_metrics(out, prepared.ref_dequantized)
    tolerance = kernel_tolerance(page.compute_dtype)
    gpu_usable = page.gpu_ms is not None and all(s > 0 for s in page.gpu_ms)
    headline = page.gpu_ms if gpu_usable else page.wall_ms
    timing_source = "gpu-timestamp" if gpu_usable else "wall-clock"
    stats = summarize(headline)
    wall = summarize(page.wall_ms)
    outcome, reason = Outcome.OK, ""
    if page.weight_bits != run.bits:
        reason = f"page executed {page.weight_bits}-bit weights for a {run.bits}-bit request"
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
        wall_ms_median=wall.median,
        gpu_ms_median=summarize(page.gpu_ms).median if page.gpu_ms else None,
        compile_ms=page.compile_ms,
        gflops=run.workload.flops / (stats.median * 1e-3) / 1e9 if stats.median > 0 else None,
        weight_bytes=prepared.weight_bytes,
        weight_bytes_f32=run.workload.n * run.workload.k * 4,
        gpu_buffer_bytes=page.gpu_buffer_bytes,
        rel_error_vs_float=vs_float["rel_error"],
        max_abs_error_vs_float=vs_float["max_abs_error"],
        snr_db=vs_float["snr_db"],
        cosine_vs_float=vs_float["cosine"],
        rel_error_vs_dequantized=vs_deq["rel_error"],
        kernel_tolerance=tolerance,
        shader=page.shader,
    )
    writer.add(
        row,
        {
            "outcome": row.outcome,
            "timing_source": timing_source,
            "cold_ms": page.cold_ms,
            "wall_ms": list(page.wall_ms),
            "gpu_ms": list(page.gpu_ms) if page.gpu_ms is not None else None,
            "compile_ms": page.compile_ms,
        },
    )
    return row


def _progress(options: SweepOptions, index: int, total: int, run: RunSpec, row: ResultRow) -> None:
    if options.progress is None:
        return
    median = f"{row.latency_ms_median:.3f} ms" if row.latency_ms_median is not None else "-"
    reason = f" ({row.reason})" if row.reason else ""
    options.progress(
        f"[{index}/{total}] {run.browser} {run.platform} {run.bits}-bit {run.workload.shape}: "
        f"{row.outcome} {median}{reason}"
    )


async def _launch(resolved: ResolvedBrowser, writer: ResultWriter) -> BrowserSession:
    session = await asyncio.to_thread(launch, resolved)
    writer.record_browser(
        resolved.product.name,
        {
            "version": session.version,
            "binary": str(resolved.binary),
            "driver": str(resolved.driver) if resolved.driver else "",
            "driver_kind": resolved.driver_kind.value,
            "launch_args": list(session.launch_args),
            "prefs": {k: v for k, v in resolved.product.prefs},
        },
    )
    return session


async def run_sweep(
    plan: Sequence[RunSpec], writer: ResultWriter, options: SweepOptions = SweepOptions()
) -> list[ResultRow]:
    rows: list[ResultRow] = []
    total = len(plan)
    done = 0
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
                    done += 1
                    _progress(options, done, total, run, row)
                continue
            session: BrowserSession | None = None
            try:
                for run in runs:
                    done += 1
                    row = await _run_one(server, resolved, session, run, options, writer)
                    session = row[1]
                    rows.append(row[0])
                    _progress(options, done, total, run, row[0])
            finally:
                if session is not None:
                    await asyncio.to_thread(session.close)
    return rows


async def _run_one(
    server: JobServer, resolved: ResolvedBrowser, session: BrowserSession | None, run: RunSpec,
    options: SweepOptions, writer: ResultWriter,
) -> tuple[ResultRow, BrowserSession | None]:
    prepared = prepare(run.workload, run.bits, run.block_size, run.seed)
    if run.platform is not Platform.WEBGPU:
        row = ResultRow.without_measurement(
            run, Outcome.UNSUPPORTED, f"{run.platform} runs are not built yet",
            weight_format=prepared.weight_format,
        )
        writer.add(row, {"outcome": row.outcome, "reason": row.reason})
        return row, session
    if session is None or not session.is_alive():
        if session is not None:
            await asyncio.to_thread(session.close)
        try:
            session = await _launch(resolved, writer)
        except Exception as exc:  # noqa: BLE001 - any launch error is this run's failure
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            row = ResultRow.without_measurement(
                run, Outcome.FAILED, f"browser failed to start: {first}",
                weight_format=prepared.weight_format,
            )
            writer.add(row, {"outcome": row.outcome, "reason": row.reason})
            return row, None
    attempt = await _execute(server, session, run, prepared, options)
    if attempt.page is not None and attempt.page.probe:
        writer.record_browser(run.browser, {"probe": attempt.page.probe, "probe_utc": utc_now()})
    row = _row_from_attempt(run, prepared, attempt, session, writer)
    if attempt.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
        await asyncio.to_thread(session.close)
        session = None
    return row, session

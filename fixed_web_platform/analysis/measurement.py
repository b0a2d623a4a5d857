"""From a run's raw page replies to its row: statistics, both error figures, and validity.

Engine-agnostic: the engine has already said what ran (``Executed``); this module pools the page
loads of one run, picks the headline timing source, judges the kernel against the float64
dequantized reference and the user's cost against the float64 original-weights reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..engines.base import EngineJob, Executed
from ..harness.protocol import PageDataError, PageReply, parse_outputs
from ..precision import quant
from ..probes.memory import MemoryFigures
from ..results.rows import ResultRow
from ..run_spec import RunSpec, TimingConfig
from ..vocabulary import Outcome, TimingSource
from ..workloads import kind_named
from .stats import summarize

PERFORMANCE_FIGURES = (
    "latency_ms_median", "latency_ms_p10", "latency_ms_p90", "latency_cv", "latency_ms_mean",
    "latency_ms_stdev", "latency_ms_iqr", "cold_ms", "wall_ms_median", "gpu_ms_median", "gflops",
)
"""Blank in any row that is not ok (the raw samples stay in samples.jsonl for diagnosis), with
the row's kind's own speed figures (``Column.performance``)."""


def samples_record(pages: Sequence[PageReply], timing_source: str, outcome: str) -> dict[str, Any]:
    gpu_ok = all(p.gpu_ms is not None for p in pages)
    return {
        "outcome": outcome,
        "timing_source": timing_source,
        "cold_ms": [p.cold_ms for p in pages],
        "wall_ms": [s for p in pages for s in p.wall_ms],
        "gpu_ms": [s for p in pages for s in p.gpu_ms or ()] if gpu_ok else None,
        "samples_per_page": [len(p.wall_ms) for p in pages],
        "compile_ms": [p.compile_ms for p in pages],
        "gpu_note": next((p.gpu_note for p in pages if p.gpu_note), ""),
    } | ({"kind": [p.kind_fields for p in pages]} if any(p.kind_fields for p in pages) else {})


def measured_row(base: ResultRow, run: RunSpec, job: EngineJob, pages: Sequence[PageReply],
                 executed: Sequence[Executed], outputs: Sequence[bytes | None], timing: TimingConfig,
                 memory: MemoryFigures | None = None) -> tuple[ResultRow, dict[str, Any]]:
    """Statistics and error figures from the pages' raw samples and output tensors (pooled over
    the page loads of one run); every page's output must pass the kernel check."""
    prepared = job.prepared
    try:
        parsed = [parse_outputs(o, prepared.outputs) for o in outputs]
        outs = [prepared.judged(p) for p in parsed]
    except PageDataError as exc:
        row = replace(base, outcome=Outcome.FAILED, reason=f"page sent malformed data: {exc}")
        return row, {"outcome": row.outcome, "reason": row.reason}
    first = pages[0]
    ran = executed[0]
    problems = sorted({e.problem for e in executed if e.problem})
    problems += sorted({p for p in (prepared.kernel_problem(o) for o in outs) if p})
    vs_float = quant.error_metrics(outs[0], prepared.ref_float)
    kernel_errors = [quant.error_metrics(o, prepared.ref_dequantized)["rel_error"] for o in outs]
    kernel_error = max(kernel_errors, key=lambda e: (e != e, e))  # NaN counts as the worst
    tolerance = prepared.tolerance(ran.compute_dtype)
    gpu_samples = [s for p in pages for s in p.gpu_ms or ()]
    gpu_usable = all(p.gpu_ms is not None for p in pages) and all(s > 0 for s in gpu_samples)
    wall_samples = [s for p in pages for s in p.wall_ms]
    headline = gpu_samples if gpu_usable else wall_samples
    timing_source = TimingSource.GPU_TIMESTAMP if gpu_usable else TimingSource.WALL_CLOCK
    stats = summarize(headline)
    short = any(len(p.wall_ms) < timing.min_iterations for p in pages)
    notes = [base.reason] if base.reason else []
    notes.extend(sorted({e.note for e in executed if e.note}))
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
        basis = f" ({prepared.tolerance_basis})" if prepared.tolerance_basis else ""
        notes.append(f"kernel error {kernel_error:.3g} vs the dequantized reference exceeds the "
                     f"{ran.compute_dtype} tolerance {tolerance:.3g}{basis}")
    elif prepared.tolerance_basis:
        notes.append(f"kernel tolerance {tolerance:.3g} ({prepared.tolerance_basis})")
    heaps = [p.js_heap_bytes for p in pages if p.js_heap_bytes is not None]
    weight_f32 = prepared.weight_bytes_f32
    row = base.with_fields(
        outcome=outcome,
        reason="; ".join(notes),
        bits_executed=ran.bits,
        compute_dtype=ran.compute_dtype,
        executed_on=ran.executed_on,
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
        gflops=run.workload.flops / (stats.median * 1e-3) / 1e9 if stats.median > 0 and run.workload.flops else None,
        weight_bytes=prepared.weight_bytes,
        weight_bytes_f32=weight_f32,
        compression=weight_f32 / prepared.weight_bytes,
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
        kernel_variant=ran.kernel_variant,
        threads=first.threads,
        engine_version=first.engine_version,
        **prepared.figures(parsed[0], stats.median),
        **kind_named(run.workload.kind).speed_figures(run.workload, [p.kind_fields for p in pages]),
    )
    if outcome is not Outcome.OK:  # figures of a run whose output is wrong are not reported
        speed = [*PERFORMANCE_FIGURES, *(c.name for c in kind_named(row.kind).columns if c.performance)]
        row = row.with_fields(**dict.fromkeys(speed))
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
    return row, samples_record(pages, timing_source, row.outcome)

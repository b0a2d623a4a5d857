"""From a run's raw page replies to its row: statistics, both error figures, and validity.

Engine-agnostic: the engine has already said what ran (``Executed``); this module pools the page
loads of one run, picks the headline timing source, judges the kernel against the float64
dequantized reference and the user's cost against the float64 original-weights reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..engines.base import EngineJob, Executed
from ..page_protocol import PageDataError, PageReply, parse_outputs
from ..precision import quant
from ..probes.memory import MemoryFigures
from ..results.rows import ResultRow
from ..run_spec import LEAST_SAMPLES, RunSpec, TimingConfig
from ..series.stats import summarize
from ..series.steady import SteadyClass, Verdict, classify, run_class, tally
from ..vocabulary import Outcome, TimingSource
from ..workloads import kind_named
from ..workloads.base import PageIterations, WorkloadKind

PERFORMANCE_FIGURES = (
    "latency_ms_median", "latency_ms_p10", "latency_ms_p90", "latency_cv", "latency_ms_mean",
    "latency_ms_stdev", "latency_ms_iqr", "cold_ms", "wall_ms_median", "gpu_ms_median", "gflops",
    "warmup_iterations", "warmup_s", "steady_samples", "first_warm_ratio",
)
"""Blank in any row that is not ok (the raw samples stay in samples.jsonl for diagnosis), with
the row's kind's own speed figures (``Column.performance``)."""


@dataclass(frozen=True)
class PageSeries:
    """One page load's iterations judged (series/steady.py): which of them the figures use."""

    page: PageReply
    verdict: Verdict
    """The headline series' verdict (GPU timestamps where every page has them, else wall clock)."""
    wall_verdict: Verdict
    start: int
    """The first iteration (of the wall series) the figures use."""
    gpu_offset: int
    """The wall series' index of the first GPU timestamp (the ring keeps the last ones)."""

    @property
    def wall(self) -> tuple[float, ...]:
        return self.page.wall_ms[self.start:]

    @property
    def gpu(self) -> tuple[float, ...] | None:
        g = self.page.gpu_ms
        return None if g is None else g[max(0, self.start - self.gpu_offset):]

    def iterations(self, kind: WorkloadKind) -> PageIterations:
        """The page's iterations after its floor as its kind's speed figures read them."""
        floor = self.page.floor_iterations
        return PageIterations(kind.from_iteration(self.page.kind_fields, floor), self.page.start_ms[floor:],
                              max(0, self.start - floor))

    def to_json(self) -> dict[str, Any]:
        p = self.page
        return {"wall_ms": list(p.wall_ms), "start_ms": list(p.start_ms), "gpu_ms": None if p.gpu_ms is None
                else list(p.gpu_ms), "floor_iterations": p.floor_iterations, "stop_reason": p.stop_reason,
                "figures_from": self.start, "steady": self.verdict.to_json(),
                **({"wall_steady": self.wall_verdict.to_json()} if self.verdict is not self.wall_verdict else {})}


def judge_series(pages: Sequence[PageReply], least: int = 1, kind: WorkloadKind | None = None
                 ) -> tuple[list[PageSeries], str]:
    """Classify every page load's series (as its ``kind`` has the classifier see it) and pick the
    iterations the figures use: the steady
    segment where there is one, else those after the floor, and at least the last ``least`` of
    the page's (the floor's last ones where fewer came after it); GPU timestamps when every page
    has usable ones (they cover the last iterations: the figures then start no earlier)."""
    gpu_usable = all(p.gpu_ms is not None and all(s > 0 for s in p.gpu_ms) for p in pages)
    out = []
    for p in pages:
        wall = kind.judged_wall(p.kind_fields, p.wall_ms) if kind is not None else p.wall_ms
        wall_verdict = classify(wall, p.start_ms, p.floor_iterations)
        offset = len(p.wall_ms) - len(p.gpu_ms) if p.gpu_ms else 0
        verdict = wall_verdict
        if gpu_usable:
            starts = [t - p.start_ms[offset] for t in p.start_ms[offset:]]
            local = classify(p.gpu_ms, starts, max(0, p.floor_iterations - offset))
            verdict = replace(local, steady_start=local.steady_start + offset,
                              change_points=tuple(c + offset for c in local.change_points),
                              warmup_s=None if local.warmup_s is None else p.start_ms[local.steady_start + offset] / 1000)
        start = verdict.steady_start if verdict.settled else p.floor_iterations
        start = max(start, offset) if gpu_usable else start
        start = max(0, min(start, len(p.wall_ms) - least))  # a page cut short: its last `least`
        out.append(PageSeries(p, verdict, wall_verdict, start, offset))
    return out, (TimingSource.GPU_TIMESTAMP if gpu_usable else TimingSource.WALL_CLOCK)


def samples_record(series: Sequence[PageSeries], timing_source: str, outcome: str) -> dict[str, Any]:
    """The run's samples.jsonl record: the samples its figures come from (``wall_ms``,
    ``gpu_ms``, split by ``samples_per_page``) and every page's whole ``series``."""
    pages = [s.page for s in series]
    gpu = [s.gpu for s in series]
    return {
        "outcome": outcome,
        "timing_source": timing_source,
        "cold_ms": [p.cold_ms for p in pages],
        "wall_ms": [x for s in series for x in s.wall],
        "gpu_ms": [x for g in gpu for x in g] if all(g is not None for g in gpu) else None,
        "samples_per_page": [len(s.wall) for s in series],
        "compile_ms": [p.compile_ms for p in pages],
        "gpu_note": next((p.gpu_note for p in pages if p.gpu_note), ""),
        "series": [s.to_json() for s in series],
    } | ({"kind": [p.kind_fields for p in pages]} if any(p.kind_fields for p in pages) else {})


def steady_fields(series: Sequence[PageSeries]) -> dict[str, Any]:
    """A row's steady-state columns from its page loads' verdicts."""
    verdicts = [s.verdict for s in series]
    first = series[0]
    level = float(np.median(first.wall))
    stops = sorted({s.page.stop_reason for s in series})
    return {
        "steady_class": run_class(verdicts).value,
        "steady_tally": tally(verdicts),
        "warmup_iterations": int(np.median([s.start for s in series])),
        "warmup_s": float(np.median([s.page.start_ms[s.start] / 1000 for s in series])),
        "steady_samples": sum(len(s.wall) for s in series),
        "stop_reason": "/".join(stops),
        "iterations_per_sample": max(s.page.iterations_per_sample for s in series),
        "first_warm_ratio": first.page.wall_ms[0] / level if level > 0 else None,
    }


def steady_notes(series: Sequence[PageSeries]) -> list[str]:
    """What a row's reason says about its series: no steady state, a GPU/wall disagreement."""
    notes = []
    if any(s.verdict.steady_class is SteadyClass.NO_STEADY for s in series):
        notes.append("no steady state: the figures are every iteration after the floor, not a steady level")
    split = sorted({f"{s.verdict.steady_class} on GPU timestamps, {s.wall_verdict.steady_class} on the wall clock"
                    for s in series if s.verdict.steady_class is not s.wall_verdict.steady_class})
    return notes + split


def short_note(series: Sequence[PageSeries], timing: TimingConfig) -> str:
    """Why a row is short of the samples asked, and how long one took: 'short: 4 samples of 12.3 s
    after the floor per page (stopped at the steady cap), 10 asked'."""
    pages = [s.page for s in series]
    counts = ", ".join(str(len(p.wall_ms) - p.floor_iterations) for p in pages)
    took = float(np.median([x for p in pages for x in p.wall_ms]))
    stops = "/".join(sorted({STOPPED.get(p.stop_reason, p.stop_reason) for p in pages}))
    each = f"{took / 1000:.3g} s" if took >= 1000 else f"{took:.3g} ms"
    return (f"short: {counts} sample(s) of {each} after the floor per page ({stops}), "
            f"{timing.min_iterations} asked")


STOPPED = {"cap": "stopped at the steady cap", "budget": "stopped at the page's time budget",
           "record-cap": "stopped at the most samples a page records"}
"""A stop reason, as the short note says it."""


def meter_fields(pages: Sequence[PageReply]) -> dict[str, Any]:
    """The row's measured memory (web/meter.js): each figure the largest over the run's page loads,
    blank where no page had the resource (no WebGPU device, no wasm memory, no WebNN graph)."""
    meters = [p.meter for p in pages if p.meter is not None]

    def most(figure: Any, present: Any) -> int | None:
        values = [figure(m) for m in meters if present(m)]
        return max(values) if values else None

    def gpu(m: Any) -> bool:
        return m.gpu_devices > 0

    def webnn(m: Any) -> bool:
        return m.webnn_constant_bytes > 0 or m.webnn_tensor_peak_bytes > 0

    return {
        "gpu_peak_bytes": most(lambda m: m.gpu_peak_bytes, gpu),
        "gpu_measured_peak_bytes": most(lambda m: m.gpu_phase_peak_bytes[2], gpu),
        "gpu_largest_buffer_bytes": most(lambda m: m.gpu_largest_bytes, gpu),
        "wasm_peak_bytes": most(lambda m: m.wasm_peak_bytes, lambda m: m.wasm_memories > 0),
        "webnn_constant_bytes": most(lambda m: m.webnn_constant_bytes, webnn),
        "webnn_tensor_peak_bytes": most(lambda m: m.webnn_tensor_peak_bytes, webnn),
    }


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
    kind = kind_named(run.workload.kind)
    problems = sorted({e.problem for e in executed if e.problem})
    staged = getattr(prepared, "staged_check", None)  # a kind judged stage by stage (workloads/base.Prepared)
    checks = [ran.check(o) if ran.check else staged(p) if staged else (prepared.ref_dequantized,
                                                                       prepared.kernel_problem(o))
              for p, o in zip(parsed, outs)]
    problems += sorted({problem for _, problem in checks if problem})
    vs_float = quant.error_metrics(outs[0], prepared.ref_float)
    kernel_errors = [quant.error_metrics(o, ref)["rel_error"] for o, (ref, _) in zip(outs, checks)]
    kernel_error = max(kernel_errors, key=lambda e: (e != e, e))  # NaN counts as the worst
    tolerance = prepared.tolerance(ran.compute_dtype) + ran.check_slack
    least = min(timing.min_iterations or 1, LEAST_SAMPLES)
    series, timing_source = judge_series(pages, least, kind)
    wall_samples = [x for s in series for x in s.wall]
    gpu_samples = [x for s in series for x in s.gpu or ()]
    headline = gpu_samples if timing_source is TimingSource.GPU_TIMESTAMP else wall_samples
    stats = summarize(headline)
    after_floor = [len(p.wall_ms) - p.floor_iterations for p in pages]
    short = any(n < (timing.min_iterations or 1) for n in after_floor)
    notes = [base.reason] if base.reason else []
    notes.extend(sorted({e.note for e in executed if e.note}))
    if getattr(prepared, "precision_note", ""):  # what the preparation did to the weights beyond quantizing them
        notes.append(prepared.precision_note)
    if short:
        notes.append(short_note(series, timing))
    notes.extend(steady_notes(series))
    outcome = Outcome.OK
    if any(len(s.wall) < least for s in series):  # a figure is never fewer samples than that
        outcome = Outcome.TIMEOUT
        notes.append(f"no figure: fewer than {least} iterations after the cold one within the page's "
                     f"{timing.page_budget_ms / 1000:g} s (raise --timeout)")
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
    precision_figures = getattr(prepared, "precision_figures", None)
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
        js_heap_bytes=max(heaps) if heaps else None,
        js_heap_source=next((p.js_heap_source for p in pages if p.js_heap_bytes is not None),
                            first.js_heap_source),
        **meter_fields(pages),
        rel_error_vs_float=vs_float["rel_error"],
        max_abs_error_vs_float=vs_float["max_abs_error"],
        snr_db=vs_float["snr_db"],
        cosine_vs_float=vs_float["cosine"],
        rel_error_vs_dequantized=kernel_error,
        kernel_tolerance=tolerance,
        shader=first.shader,
        kernel_variant=ran.kernel_variant,
        backend=ran.backend or base.backend,
        act_executed=ran.act_executed,
        threads=first.threads,
        engine_version=first.engine_version,
        **prepared.figures(parsed[0], stats.median),
        **(precision_figures(outs[0], ran.compute_dtype) if precision_figures else {}),
        **steady_fields(series),
        **kind.speed_figures(run.workload, [s.iterations(kind) for s in series]),
    )
    if outcome is not Outcome.OK:  # figures of a run whose output is wrong (or too few) are not reported
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
    return row, samples_record(series, timing_source, row.outcome)

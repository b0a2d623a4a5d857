"""The result row: one per planned run, the same columns whatever happened (schema in
vocabulary.SCHEMA_VERSION). Only ``ok`` rows carry measured figures."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

from ..plan import RunSpec
from ..vocabulary import SCHEMA_VERSION, Outcome


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ResultRow:
    schema_version: int
    run_id: int
    repetition: int
    timestamp_utc: str
    browser: str
    browser_version: str
    engine: str
    platform: str
    executed_on: str
    """Where the weight-bearing work ran (an ORT run may fall back to wasm); empty without a run."""
    precision_mode: str
    adapter: str
    device_type: str
    workload: str
    m: int
    k: int
    n: int
    bits_requested: int
    bits_executed: int | None
    weight_format: str
    weight_dtype: str
    scale_dtype: str
    zero_point_dtype: str
    compute_dtype: str
    block_size: int
    outcome: str
    reason: str
    latency_ms_median: float | None = None
    latency_ms_p10: float | None = None
    latency_ms_p90: float | None = None
    latency_cv: float | None = None
    latency_ms_mean: float | None = None
    latency_ms_stdev: float | None = None
    latency_ms_iqr: float | None = None
    n_samples: int = 0
    min_samples: int = 0
    samples_short: bool | None = None
    """True when fewer timed samples came back than the minimum asked for (time budget hit)."""
    unstable: bool | None = None
    instability: str = ""
    """Why the samples are unstable (CV over 10%, or the slowest sample over 2x the median)."""
    pages: int = 0
    timing_source: str = ""
    cold_ms: float | None = None
    wall_ms_median: float | None = None
    gpu_ms_median: float | None = None
    compile_ms: float | None = None
    gflops: float | None = None
    weight_bytes: int | None = None
    weight_bytes_f32: int | None = None
    compression: float | None = None
    gpu_buffer_bytes: int | None = None
    js_heap_bytes: int | None = None
    js_heap_source: str = ""
    proc_rss_baseline_bytes: int | None = None
    proc_rss_peak_bytes: int | None = None
    proc_rss_delta_bytes: int | None = None
    proc_uss_peak_bytes: int | None = None
    proc_pss_peak_bytes: int | None = None
    proc_count: int | None = None
    rel_error_vs_float: float | None = None
    max_abs_error_vs_float: float | None = None
    snr_db: float | None = None
    cosine_vs_float: float | None = None
    rel_error_vs_dequantized: float | None = None
    kernel_tolerance: float | None = None
    shader: str = ""
    session_run: int | None = None
    """This run's place in its browser session (0: the first after the browser started, whose
    process memory includes the browser warming up)."""
    threads: int | None = None
    """ORT: wasm threads in effect (the page reports it)."""
    engine_version: str = ""

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def without_measurement(
        cls, run: RunSpec, outcome: Outcome, reason: str, *, browser_version: str = "",
        adapter: str = "", weight_format: str = "",
    ) -> ResultRow:
        """A row for a run that produced no figures: the outcome and the reason say why."""
        return cls(
            schema_version=SCHEMA_VERSION,
            run_id=run.run_id,
            repetition=run.repetition,
            timestamp_utc=utc_now(),
            browser=run.browser,
            browser_version=browser_version,
            engine=run.engine,
            platform=run.platform,
            executed_on="",
            precision_mode=run.precision_mode,
            adapter=adapter,
            device_type=run.webnn_device if run.platform == "webnn" else "",
            workload=run.workload.name,
            m=run.workload.m,
            k=run.workload.k,
            n=run.workload.n,
            bits_requested=run.bits,
            bits_executed=None,
            weight_format=weight_format,
            weight_dtype="",
            scale_dtype="",
            zero_point_dtype="",
            compute_dtype="",
            block_size=run.block_size if run.bits <= 8 else 0,
            outcome=outcome,
            reason=reason,
        )

"""The result row: one per planned run, the same columns whatever happened (schema in
vocabulary.SCHEMA_VERSION). Only ``ok`` rows carry measured figures.

A row is a common core (identity, outcome, timing, memory, bits requested and executed, both
error figures, environment) plus the columns of its workload kind (``kind_fields``; each kind
declares them in workloads/<kind>, see ``workloads.kind_columns``). results.csv has every
registered kind's columns, blank where a row's kind has none. What identifies a configuration
is ``identity_columns()``, the one definition every reader uses.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..run_spec import RunSpec
from ..vocabulary import SCHEMA_VERSION, Outcome
from ..workloads import KINDS, kind_columns, kind_named

CORE_SETTING = ("browser", "engine", "platform", "precision_mode", "device_type", "kind", "workload")
"""The core columns that say what ran where (each kind adds what its work is: ``setting_columns``)."""
CORE_PRECISION = ("bits_requested", "format_requested", "granularity", "block_size", "act_bits", "observer",
                  "graph_form")
"""The core columns that say which precision was asked for (kinds may add: a model's plan)."""


def setting_columns() -> tuple[str, ...]:
    """A setting: everything that identifies a configuration except the precision asked for (what
    the report compares across precisions, e.g. against its float32 row)."""
    return (*CORE_SETTING, *dict.fromkeys(c for kind in KINDS for c in kind.identity))


def precision_columns() -> tuple[str, ...]:
    return (*CORE_PRECISION, *dict.fromkeys(c for kind in KINDS for c in kind.precision_identity))


def identity_columns() -> tuple[str, ...]:
    """The one definition of what makes two rows the same configuration (across sweeps, too):
    the setting and the precision. Compare, the report, glance and plots all group by it."""
    return (*setting_columns(), *precision_columns())


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
    kind: str
    """The workload kind (matmul, encoder, ...): which kind columns the row has."""
    workload: str
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
    outputs_file: str = ""
    """outputs/<run_id>.npz: what the kind saves to recompute its figures (a model's outputs,
    inputs and both references); blank when it saves nothing."""
    kernel_variant: str = ""
    """The harness's WGSL kernels: the kernel and its tile, rows x columns per invocation
    (e.g. 'quant-w4 tile 16x1'); blank for other engines."""
    concurrent_sessions: int | None = None
    """Runs in progress at once while this one ran (--parallel N): 1 = it ran alone. Runs
    sharing one machine disturb each other's timings."""
    ran_on: str = ""
    """What ran the browser: 'local', or 'NODE (PLATFORM) via URL' through --remote."""
    proc_memory_source: str = ""
    """How the proc_* memory figures were measured, or 'unavailable: why' (e.g. a browser on a
    remote node has no local process)."""
    act_bits: int = 32
    """Activation precision: 32 (float) or 8 (int8 with calibrated scale and zero point)."""
    observer: str = ""
    """The calibration observer of int8 activations (minmax, percentile, ...); '' at 32."""
    format_requested: str = ""
    """The engine's named weight format asked for (wllama: a GGUF type, or 'shipped': the model's
    own file); blank where the bits name the format."""
    granularity: str = ""
    """How the 8/4/2-bit weights are grouped: 'block' (block_size values along K share a scale and
    zero point) or 'per-channel' (one symmetric scale per output channel); blank at 32/16 bits."""
    graph_form: str = ""
    """The graph form built (the harness's WebNN graphs: engines/webnn/forms.py), or the one asked
    for when no graph was built; blank for engines with one form."""
    calibration: str = ""
    """What the observer saw: 'synthetic' (matmul sweep), 'builtin-calibration' or the
    --calibration file (models); '' at 32."""

    kind_fields: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """The row's values of its kind's columns (workloads/<kind>): shape or model, its figures."""

    @classmethod
    def core_columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name != "kind_fields"]

    @classmethod
    def columns(cls) -> list[str]:
        """results.csv's header: the core, then every registered kind's columns."""
        return [*cls.core_columns(), *(c.name for c in kind_columns())]

    def __getitem__(self, name: str) -> Any:
        """Any column's value: a core field or a kind column (None where the kind has none)."""
        if name in self.kind_fields:
            return self.kind_fields[name]
        if name in _CORE:
            return getattr(self, name)
        if name in _KIND:
            return None
        raise KeyError(name)

    def __getattr__(self, name: str) -> Any:
        """A kind column reads as an attribute too (``row.cosine_mean``): None where the row's kind
        has none. Called only for names that are not core fields."""
        if name != "kind_fields" and name in _KIND:
            return self.kind_fields.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def record(self) -> dict[str, Any]:
        """The row as results.csv holds it: every column, in order."""
        return {name: self[name] for name in self.columns()}

    def with_fields(self, **values: Any) -> ResultRow:
        """A copy with core fields and the row's own kind columns set by name."""
        core = {k: v for k, v in values.items() if k in _CORE}
        extra = {k: v for k, v in values.items() if k not in _CORE}
        own = {c.name for c in kind_named(self.kind).columns}
        unknown = [k for k in extra if k not in own]
        if unknown:
            raise KeyError(f"no column {unknown[0]!r} on a {self.kind} row")
        return dataclasses.replace(self, **core, kind_fields={**self.kind_fields, **extra})

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
            kind=run.workload.kind,
            workload=run.workload.name,
            bits_requested=run.bits,
            bits_executed=None,
            weight_format=weight_format,
            weight_dtype="",
            scale_dtype="",
            zero_point_dtype="",
            compute_dtype="",
            block_size=run.block_size if run.bits <= 8 and run.granularity == "block" else 0,
            outcome=outcome,
            reason=reason,
            act_bits=run.act_bits,
            observer=run.observer,
            format_requested=run.weight_format,
            granularity=run.granularity if run.bits <= 8 else "",
            graph_form=run.graph_form,
            calibration=run.workload.calibration_label if run.act_bits != 32 else "",
            kind_fields=run.workload.row_fields(run.bits, run.block_size),
        )


_CORE = frozenset(ResultRow.core_columns())
_KIND = frozenset(c.name for c in kind_columns())


@dataclass(frozen=True)
class LayerRow:
    """One linear layer of a whole-model run (layers.csv)."""

    run_id: int
    layer: str
    kind: str
    k: int
    n: int
    bits_requested: int
    """What the precision plan gave this layer (--bits or a rule)."""
    rule: str
    bits_executed: int | None
    weight_dtype: str
    weight_bytes: int | None
    gpu_ms: float | None
    """Median GPU time of the layer's dispatch (timestamp queries), where the engine has them."""
    act_dtype: str = ""
    """What the layer's input was quantized to where it ran with int8 activations ('' float)."""

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

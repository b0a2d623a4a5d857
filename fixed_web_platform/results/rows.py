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

from ..precision.quantizers import QUANTIZERS
from ..run_spec import RunSpec
from ..vocabulary import SCHEMA_VERSION, Outcome, with_build
from ..workloads import KINDS, kind_columns, kind_named

CORE_SETTING = ("browser", "browser_build", "engine", "engine_build", "platform", "precision_mode", "device_type",
                "buffer_cache", "backend", "kind", "workload")
"""The core columns that say what ran where (each kind adds what its work is: ``setting_columns``)."""
CORE_PRECISION = ("bits_requested", "format_requested", "granularity", "weight_quant", "block_size", "act_bits",
                  "observer", "graph_form", "accuracy_level")
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
    """The result schema this row was written with (vocabulary.SCHEMA_VERSION); readers refuse
    newer ones."""
    run_id: int
    """The run's place in plan.json (0, 1, ...): the key joining the row to samples.jsonl and
    outputs/."""
    repetition: int
    """Which round of --repetitions this run belongs to (0-based); each round runs in fresh
    browser sessions."""
    timestamp_utc: str
    """When the row was written (UTC, ISO 8601)."""
    browser: str
    """The browser asked for: chrome, edge, firefox or safari."""
    browser_version: str
    """The version the browser reported (blank when it never started)."""
    engine: str
    """Who built the work: harness (the harness's WGSL kernels and WebNN graphs), ort (ONNX
    Runtime Web), wllama (llama.cpp in WebAssembly)."""
    platform: str
    """The API asked for: webgpu, webnn or wasm (ONNX Runtime Web's CPU provider)."""
    executed_on: str
    """Where the weight-bearing work ran (an ORT run may fall back to wasm); empty without a run."""
    precision_mode: str
    """WebNN's precision mode: standard (precisions the spec does not guarantee are upgraded to
    8-bit, and the reason says so) or experimental (tried as asked; the browser's error is the
    row's reason)."""
    adapter: str
    """The WebGPU adapter as the page's probe saw it: vendor/architecture/device, ending '
    (fallback)' when the browser says it is a fallback (software) adapter such as SwiftShader or
    lavapipe; blank off WebGPU."""
    device_type: str
    """WebNN's MLContext deviceType (cpu, gpu, npu); blank on other platforms."""
    kind: str
    """The workload kind (matmul, encoder, ...): which kind columns the row has."""
    workload: str
    """The workload's name: a built-in matmul shape (bert-base-attn-gemm), a --shape, or a
    model's label."""
    bits_requested: int
    """The weight precision asked for: 32 (float32 baseline), 16, 8, 4 or 2."""
    bits_executed: int | None
    """What ran, read from what the page actually bound: the size of the weight buffer the WGSL
    kernel had (on the dequant- path, the packed buffer the dequantize step bound) or the
    dataType of the WebNN operand holding the weights. A mismatch with the job makes the run
    invalid; an upgrade (standard mode) is reported here and in the reason."""
    weight_format: str
    """How the weights were held, e.g. int4-block32-asymmetric, int8-per-channel-symmetric,
    float16, float32."""
    weight_dtype: str
    """The data type the weights were stored in (for WebNN the MLOperand type used)."""
    scale_dtype: str
    """The data type of the quantization scales (blank without scales)."""
    zero_point_dtype: str
    """The data type of the zero points (blank without zero points)."""
    compute_dtype: str
    """The arithmetic the kernel or graph the harness offered uses (f32, or f16 only where the
    adapter has shader-f16), not the page's word."""
    block_size: int
    """Values along K sharing one scale and zero point for 8/4/2-bit block weights (--block-
    size); 0 where not blockwise."""
    outcome: str
    """What happened: one of the closed set of outcomes (reference/outcomes). Only ok rows carry
    measured figures."""
    reason: str
    """Why, in words: the browser's error, the upgrade made, what was not at rest; on one line
    (samples.jsonl keeps the whole text)."""
    latency_ms_median: float | None = None
    """Median of the timed samples in milliseconds, on timing_source; computed in Python from
    the raw samples in samples.jsonl."""
    latency_ms_p10: float | None = None
    """10th percentile of the timed samples (ms)."""
    latency_ms_p90: float | None = None
    """90th percentile of the timed samples (ms)."""
    latency_cv: float | None = None
    """Coefficient of variation of the timed samples (stdev / mean)."""
    latency_ms_mean: float | None = None
    """Mean of the timed samples (ms)."""
    latency_ms_stdev: float | None = None
    """Standard deviation of the timed samples (ms)."""
    latency_ms_iqr: float | None = None
    """Interquartile range of the timed samples (ms)."""
    n_samples: int = 0
    """Timed samples the figures come from (the steady segments; after the floor where there is
    none to find)."""
    min_samples: int = 0
    """The minimum number of timed samples asked for (--min-iterations)."""
    samples_short: bool | None = None
    """True when fewer timed samples came back than the minimum asked for (time budget hit)."""
    unstable: bool | None = None
    """True when the samples' CV is over 10% or the slowest sample is over twice the median."""
    instability: str = ""
    """Why the samples are unstable (CV over 10%, or the slowest sample over 2x the median)."""
    pages: int = 0
    """Page loads pooled into this row (--repeat)."""
    steady_class: str = ""
    """Did the series settle (docs/concepts/steady-state.md): flat, warm-up, slowdown, no steady
    state (the figures are then the iterations after the floor, labelled so, and compare and
    history do not judge them), too short (too few iterations to tell); "not judged" in results
    from before the steady-state protocol. The worst of the row's page loads."""
    steady_tally: str = ""
    """How many page loads had each class, e.g. "warm-up x2, flat x1"; a GPU-timestamp series
    classed otherwise than its wall-clock series is noted in the reason."""
    warmup_iterations: int | None = None
    """Median over page loads of the iterations before the steady segment (the floor included)."""
    warmup_s: float | None = None
    """Median over page loads of the seconds from the first warm iteration to the steady segment."""
    steady_samples: int | None = None
    """Samples the figures come from: the steady segments, pooled over page loads."""
    stop_reason: str = ""
    """Why the pages stopped iterating: steady, cap (steady mode's --steady-cap), counts (the
    counts protocol), max-iterations, budget (the page's time budget), record-cap; several
    joined by '/' where page loads differ."""
    iterations_per_sample: int | None = None
    """Iterations each sample is the mean of: 1, or more where one run is too fast for the clock
    (microseconds; web/timing.js times a batch by one clock read); the largest over page loads."""
    first_warm_ratio: float | None = None
    """The first iteration after the cold one over the steady median (the start-up cost a user
    feels beyond the cold iteration); from the first page load."""
    timing_source: str = ""
    """Where the headline latency comes from: gpu-timestamp (WebGPU timestamp queries, where the
    adapter has them) or wall-clock (from submit to completion)."""
    cold_ms: float | None = None
    """The first (cold) iteration's time, kept apart from the warm-ups and the timed samples
    (ms)."""
    wall_ms_median: float | None = None
    """Median wall-clock time of the timed iterations (ms), kept beside GPU timestamps."""
    gpu_ms_median: float | None = None
    """Median GPU-timestamp time of the timed iterations (ms); blank without timestamp
    queries."""
    compile_ms: float | None = None
    """Time to compile the run's shaders or build its graph (ms), part of a cold start."""
    gflops: float | None = None
    """2*M*K*N / median latency for a matmul; a whole model's forward-pass FLOPs (linear layers
    and attention) / median latency."""
    weight_bytes: int | None = None
    """Bytes handed to the kernel or graph for the weights: packed values + scales + zero points
    (on the dequant- path the float32 scratch copy counts in gpu_peak_bytes instead); for
    WebNN what was handed to the graph builder (the backend may repack it)."""
    weight_bytes_f32: int | None = None
    """The float32 bytes of the same weights."""
    compression: float | None = None
    """weight_bytes_f32 / weight_bytes."""
    js_heap_bytes: int | None = None
    """The page's JavaScript heap: measureUserAgentSpecificMemory() (the pages are cross-origin
    isolated), else performance.memory; blank with the reason in js_heap_source."""
    js_heap_source: str = ""
    """Which API gave js_heap_bytes, or why there is none."""
    gpu_peak_bytes: int | None = None
    """Measured (web/meter.js, every engine alike): the most bytes of WebGPU buffers live at once in
    the page and its workers, from creation to destroy or collection; the largest over page loads.
    Blank where the page made no WebGPU device."""
    gpu_measured_peak_bytes: int | None = None
    """Measured: gpu_peak_bytes within the timed iterations after the floor (what a model holds
    while it runs, without load-time staging)."""
    gpu_largest_buffer_bytes: int | None = None
    """Measured: the largest single WebGPU buffer the run created (against the adapter's
    maxBufferSize and maxStorageBufferBindingSize)."""
    wasm_peak_bytes: int | None = None
    """Measured: the most bytes of WebAssembly memory at once, over every memory the page's engines
    created or exported (a memory never shrinks); blank where no memory was made."""
    webnn_constant_bytes: int | None = None
    """Measured: bytes handed to WebNN as graph constants (what the engine gave the browser; the
    backend may repack them). Blank where no WebNN graph was built."""
    webnn_tensor_peak_bytes: int | None = None
    """Measured: the most bytes of MLTensors live at once (MLContext.createTensor)."""
    proc_rss_baseline_bytes: int | None = None
    """The browser's whole process tree (renderer, GPU, utility processes) at rest before the
    page's work: RSS summed over the tree (psutil)."""
    proc_rss_peak_bytes: int | None = None
    """Peak RSS of the browser's process tree during the run, sampled every 100 ms."""
    proc_rss_delta_bytes: int | None = None
    """proc_rss_peak_bytes minus proc_rss_baseline_bytes: what the run added."""
    proc_uss_peak_bytes: int | None = None
    """Peak USS of the tree (memory no other process shares), read as often as keeps the read
    under 2% of one core (the kernel walks every mapping to give it)."""
    proc_pss_peak_bytes: int | None = None
    """Peak PSS of the tree (shared pages split between their sharers), read like USS."""
    proc_count: int | None = None
    """Processes in the browser's tree during the run."""
    rel_error_vs_float: float | None = None
    """What quantization costs: relative error of the output against the float64 result with the
    ORIGINAL float weights."""
    max_abs_error_vs_float: float | None = None
    """Largest absolute difference from the float64 result with the original weights."""
    snr_db: float | None = None
    """Signal-to-noise ratio of the output against the float64 result with the original weights
    (dB)."""
    cosine_vs_float: float | None = None
    """Cosine similarity of the output with the float64 result with the original weights."""
    rel_error_vs_dequantized: float | None = None
    """Is the kernel right: relative error against the float64 result with the DEQUANTIZED
    weights (the same bytes the page held)."""
    kernel_tolerance: float | None = None
    """The bound rel_error_vs_dequantized must stay under (1e-5 for f32 arithmetic, 1e-2 for
    f16); above it the row is invalid."""
    shader: str = ""
    """The WGSL source(s) run, e.g. matmul_quant.wgsl; 'dequantize.wgsl>matmul_f32.wgsl' is a
    step then the kernel; a model joins its layers' kernels with '+'."""
    session_run: int | None = None
    """This run's place in its browser session (0: the first after the browser started, whose
    process memory includes the browser warming up)."""
    threads: int | None = None
    """ORT: wasm threads in effect (the page reports it)."""
    engine_version: str = ""
    """The engine build the page loaded, as the engine reports it (e.g. ONNX Runtime Web's
    version, wllama's)."""
    browser_build: str = ""
    """The browser binary asked for (``--browser chrome@chromium``: a named build or a path);
    blank for the one discovery found. Two builds of one browser are two configurations."""
    engine_build: str = ""
    """The engine release asked for (``--engine ort@1.31.0-dev...``), blank for the engine's default
    build; the build the page loaded is ``engine_version``."""
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
    act_smoothing: str = ""
    """How int8 activations' outlier channels were migrated into the weights before calibration
    ('smoothquant-0.7': SmoothQuant at alpha 0.7, models/smoothing.py); '' for none or at 32."""
    act_scale: str = ""
    """How int8 inputs are scaled: 'per-tensor' (one calibrated scale and zero point per layer) or
    'per-token' (each position divided by its peak |x| around a constant scale, models/calibration.
    ActivationQuant.per_token); '' at 32."""
    format_requested: str = ""
    """The engine's named weight format asked for (wllama: a GGUF type, or 'shipped': the model's
    own file); blank where the bits name the format."""
    granularity: str = ""
    """How the 8/4/2-bit weights are grouped: 'block' (block_size values along K share a scale and
    zero point) or 'per-channel' (one symmetric scale per output channel); blank at 32/16 bits."""
    buffer_cache: str = ""
    """ONNX Runtime's WebGPU storage-buffer cache mode the run set (ORT and transformers.js on
    WebGPU: --buffer-cache, else ORT's default, bucket); blank for engines without the choice."""
    backend: str = ""
    """The implementation of the platform the engine ran (ONNX Runtime Web on WebGPU: native or
    jsep, as the page read it from ORT); blank for engines with one."""
    accuracy_level: str = ""
    """ONNX Runtime's MatMulNBits ``accuracy_level`` set on the run's model (--accuracy-level);
    blank: the model's own (the harness's exports set none: 0)."""
    act_executed: str = ""
    """What the weight-bearing kernels computed the activations in, where the page can tell: 'int8'
    when ONNX Runtime's WebGPU profile names its DP4A MatMulNBits programs (accuracy level 4 on an
    adapter with subgroups), 'float' when it names MatMulNBits programs without; blank otherwise."""
    graph_form: str = ""
    """The graph form built (the harness's WebNN graphs: engines/webnn/forms.py), or the one asked
    for when no graph was built; blank for engines with one form."""
    calibration: str = ""
    """What the observer (or a calibrated weight quantizer, gptq) saw: 'synthetic' (matmul sweep),
    'builtin-calibration' or the --calibration file (models); '' without either."""
    weight_quant: str = ""
    """The weight quantizer that made the 8/4/2-bit codes (--weight-quant: minmax, offset, hqq, kquant,
    gptq; docs/design/weight-quantizers.md); blank at 32/16 bits and for an engine's named format
    (format_requested, e.g. wllama's GGUF types, which round by their own rule) but ``held``."""

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

    @property
    def browser_key(self) -> str:
        """'chrome', or 'chrome@chromium' for a build asked for (RunSpec.browser_key)."""
        return with_build(self.browser, self.browser_build)

    @property
    def engine_key(self) -> str:
        """'ort', or 'ort@1.31.0-dev...' for a build asked for (RunSpec.engine_key)."""
        return with_build(self.engine, self.engine_build)

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
        """A row for a run that produced no figures: the outcome and the reason say why (its weight
        format the job's, else the run's: a refused dtype names itself)."""
        return cls(
            schema_version=SCHEMA_VERSION,
            run_id=run.run_id,
            repetition=run.repetition,
            timestamp_utc=utc_now(),
            browser=run.browser,
            browser_version=browser_version,
            browser_build=run.browser_build,
            engine=run.engine,
            engine_build=run.engine_build,
            platform=run.platform,
            executed_on="",
            precision_mode=run.precision_mode,
            adapter=adapter,
            device_type=run.webnn_device if run.platform == "webnn" else "",
            kind=run.workload.kind,
            workload=run.workload.name,
            bits_requested=run.bits,
            bits_executed=None,
            weight_format=weight_format or run.weight_format,
            weight_dtype="",
            scale_dtype="",
            zero_point_dtype="",
            compute_dtype="",
            block_size=run.block_size if run.bits <= 8 and run.granularity == "block" else 0,
            outcome=outcome,
            reason=reason,
            act_bits=run.act_bits,
            observer=run.observer,
            act_smoothing=getattr(run.workload, "act_smoothing", "") if run.act_bits == 8 else "",
            act_scale=getattr(run.workload, "act_scale", "per-tensor") if run.act_bits == 8 else "",
            format_requested=run.weight_format,
            granularity=run.granularity if run.bits <= 8 else "",
            graph_form=run.graph_form,
            buffer_cache=run.buffer_cache,
            backend=run.backend,
            accuracy_level=run.accuracy_level,
            calibration=run.workload.calibration_label
            if run.act_bits != 32 or QUANTIZERS[run.weight_quant].calibrated else "",
            weight_quant=run.quantized_by,
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
    weight_error: float | None = None
    """Relative RMS error of the weights as held (the values its bytes stand for) against the
    float weights: what the bits and the quantizer (--weight-quant) cost this layer; blank where
    the engine holds bytes of its own (wllama's GGUF files)."""

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

"""The vocabulary of a sweep: closed sets (StrEnums) and the constants every module shares.

Each rule that checks a user's word against these sets lives here once (``parse_bits``...), and
every entry point (CLI, Python API, plan files) goes through it.
"""

from __future__ import annotations

import enum
import os

SCHEMA_VERSION = 19
"""Version of the result files (results.csv, samples.jsonl, environment.json, plan.json).
v3: engine and executed_on columns, the ``error`` outcome, ORT thread count.
v4: whole-model columns (model, weights, batch_size, ... top1_agreement), layers.csv, outputs/.
v5: kernel_variant (which kernel and tile the WGSL engine ran).
v6: concurrent_sessions, ran_on, proc_memory_source (--parallel, --remote), precision_rules
    (which rule set planned a whole model's bits, e.g. a sensitivity probe); environment.json's
    browsers record ran_on (what ran the browser) and driver_note.
v7: calibration (what int8 activations were calibrated on), whole models with int8 activations,
    layers.csv act_dtype.
v8: rows are a core plus their workload kind's columns: a ``kind`` column (matmul, encoder;
    plan files' 'model' kind is now 'encoder'); m, k, n blank on rows that are not matmuls; a
    run's ``refused`` reason in plan.json. Older folders read as before (kind derived).
v9: ``format_requested`` (an engine's named weight format, e.g. wllama's GGUF types; blank where
    the bits name the format); engine ``wllama``.
v10: ``granularity`` (block or per-channel weights; older folders read as block at 8/4/2 bits) and
    ``graph_form`` (the WebNN graph form built, or asked for); both in a configuration's identity.
v11: steady state (docs/concepts/steady-state.md): ``steady_class``, ``steady_tally``,
    ``warmup_iterations``, ``warmup_s``, ``steady_samples``, ``stop_reason``, ``first_warm_ratio``;
    figures come from the steady segment; samples.jsonl keeps every page's full ``series``.
    Older folders read as "not judged".
v12: ``weight_quant`` (the weight quantizer that made the 8/4/2-bit codes: minmax, offset, hqq;
    in a configuration's identity; plan.json's runs carry it). Older folders read as minmax at
    8/4/2 bits (blank where an engine's named format decides the rounding). layers.csv
    ``weight_error`` (each layer's held weights against the float ones).
v13: ONNX files' ``onnx_inventory`` and ``precision_promise`` (what a file's nodes hold, and
    whether that is what its name promises: formats/onnx_inventory.py); samples.jsonl's
    ``onnx_inventory`` for every ORT row (weight bytes by precision). Older folders read blank.
v14: the steady-state protocol for whole models too (their kind's cap and minimum): decoders'
    ``ttft_steady_class`` beside ``decode_steady_class`` (now judged across generations), speech's
    ``decode_steady_class``; ``iterations_per_sample`` (work too fast for the clock, timed in
    batches). Older folders read blank.
v15: memory measured around every engine's calls (web/meter.js): ``gpu_peak_bytes``,
    ``gpu_measured_peak_bytes``, ``gpu_largest_buffer_bytes``, ``wasm_peak_bytes``,
    ``webnn_constant_bytes``, ``webnn_tensor_peak_bytes``; ``buffer_cache`` (ONNX Runtime's WebGPU
    storage-buffer cache mode, a setting). Older folders read blank, and ORT's and
    transformers.js's WebGPU rows as ORT's default cache, bucket.
v16: decoders' ``fp32_activation_peak`` and ``fp16_overflow`` (did a float16 engine's activations
    overflow). Older folders read blank.
v17: ``act_smoothing`` (how int8 activations were smoothed before calibration: SmoothQuant's
    alpha, models/smoothing.py). Older folders read blank (none).
v18: ``act_scale`` (int8 inputs scaled 'per-tensor' or 'per-token'). Older folders read blank
    (per-tensor where act_bits is 8).
v19: ``browser_build`` and ``engine_build`` (the browser binary and the engine release asked for:
    ``--browser chrome@chromium``, ``--engine ort@1.31.0-dev...``), settings. Older folders read
    blank (the default binary and build). ``backend`` (ONNX Runtime Web's WebGPU implementation:
    native or jsep), a setting; ``accuracy_level`` (MatMulNBits' attribute set on ORT's models), a
    precision; ``act_executed`` (activations the kernels computed with, as read from what ran).
    Older folders read ORT's WebGPU rows as native, the others blank."""

ACT_BITS = (32, 8)
"""Activation precisions: float32, or int8 calibrated with an observer."""
ACT8_WEIGHT_BITS = (8, 4)
"""Weight bits int8 activations run with (int8 x int8 dot products: W8A8, and W4A8 unpacked)."""

COMPUTE_DTYPES = ("f32", "f16", "i8dot")
"""What a kernel's arithmetic ran in: float32, float16, or int8 dot products accumulated in i32
and rescaled in f32 (the int8-activation kernels)."""

PROTOCOL_VERSION = 7
"""Version of the page protocol (job spec the page fetches, reply it posts).
v2: the spec names its output tensors (``outputs``: name, dtype, shape); a matmul's m, k, n are
    its runner's options.
v3: every iteration after the cold one is in the reply (``wall_ms``, ``start_ms``), with the
    floor's length (``floor_iterations``) and ``stop_reason``; ``gpu_ms`` covers the last ones;
    the spec carries the steady-state rule's fields (web/timing.js).
v4: work faster than the spec's ``sample_min_ms`` is timed in batches (the reply's
    ``iterations_per_sample``); the steady cap waits for ``least_samples`` after the floor
    (TimingConfig.cap_waits).
v5: every reply carries ``meter`` (web/meter.js: WebGPU buffers, WebAssembly memory and WebNN
    constants and tensors counted around the engine's calls, the page's and its workers').
v6: ONNX Runtime Web's replies say which WebGPU implementation ran (``backend``: native or jsep)
    and the kernel programs its WebGPU profile names (``programs``).
v7: ONNX Runtime Web's whole-model replies name the programs of each linear layer's node too
    (``layers[i].programs``)."""


class Platform(enum.StrEnum):
    """The browser API a run goes through. ``wasm``: an engine's CPU path in WebAssembly (ONNX
    Runtime Web's CPU provider, llama.cpp's CPU backend)."""

    WEBGPU = "webgpu"
    WEBNN = "webnn"
    WASM = "wasm"


class EngineName(enum.StrEnum):
    """Who builds the work for the page: the harness's own kernels/graphs, ONNX Runtime Web,
    llama.cpp compiled to WebAssembly (wllama, GGUF decoders), or transformers.js's pipelines on
    model folders in its layout."""

    HARNESS = "harness"
    ORT = "ort"
    WLLAMA = "wllama"
    TRANSFORMERSJS = "transformersjs"


class BrowserName(enum.StrEnum):
    CHROME = "chrome"
    EDGE = "edge"
    FIREFOX = "firefox"
    SAFARI = "safari"


class Outcome(enum.StrEnum):
    """What happened to one planned run. Only ``ok`` rows carry measured figures."""

    OK = "ok"
    """Measured: every figure in the row comes from this run."""
    UNSUPPORTED = "unsupported"
    """The browser lacks a feature the run needs (or the engine refused what its context does not
    list); `reason` names it. Not a failure: an answer about this browser."""
    FAILED = "failed"
    """The browser (or the page) raised an error; `reason` is its message."""
    TIMEOUT = "timeout"
    """No result within `--timeout`; the browser was killed and the next run gets a fresh one."""
    CRASH = "crash"
    """The browser process, or the page's renderer, died during the run (the page is pinged every
    2 s); the next run starts a fresh browser."""
    INVALID = "invalid"
    """It ran, but the kernel error exceeds its tolerance: the numbers are not trusted, so the row
    carries no latency figures (the raw samples stay in `samples.jsonl`)."""
    UNAVAILABLE = "unavailable"
    """The browser or its driver is not installed here; `reason` says what was searched."""
    ERROR = "error"
    """A bug in the harness itself, not the browser's doing: the traceback is in the sweep's
    `harness.log`."""
    OUT_OF_MEMORY = "out-of-memory"
    """The engine failed where the browser could not give it memory: a GPU out-of-memory error, or
    WebAssembly memory that could not grow (web/meter.js saw it; the engine's message follows in
    `reason`). An answer about this browser and machine: the run does not fit."""
    DEVICE_LOST = "device-lost"
    """The browser lost the GPU device mid-run (GPUDevice.lost, its reason and message in
    `reason`: a GPU process crash, a driver reset); the next run's page gets a fresh device."""

    @property
    def is_failure(self) -> bool:
        """Outcomes that make the sweep exit 1: something broke, as opposed to 'cannot run here'."""
        return self in (Outcome.FAILED, Outcome.TIMEOUT, Outcome.CRASH, Outcome.INVALID,
                        Outcome.ERROR, Outcome.DEVICE_LOST)


class PrecisionMode(enum.StrEnum):
    STANDARD = "standard"
    EXPERIMENTAL = "experimental"


EXPERIMENTAL_PRECISION_ENV = "WEBNN_EXPERIMENTAL_PRECISION"
"""Set to 1, WebNN runs ask for the requested precision (no upgrade) unless told otherwise."""


def experimental_precision_default() -> bool:
    """The one reading of WEBNN_EXPERIMENTAL_PRECISION, for the CLI and the Python API alike."""
    return os.environ.get(EXPERIMENTAL_PRECISION_ENV, "").strip() == "1"


class TimingSource(enum.StrEnum):
    """Where a row's headline latency comes from."""

    GPU_TIMESTAMP = "gpu-timestamp"
    WALL_CLOCK = "wall-clock"


WEBNN_DEVICES = ("cpu", "gpu", "npu")

SUPPORTED_BITS = (32, 16, 8, 4, 2)
"""32 is the float32 baseline; 16 is float16 weights; 8/4/2 are packed integer weights."""
DEFAULT_BITS = SUPPORTED_BITS
DEFAULT_BLOCK_SIZE = 32

GRANULARITIES = ("block", "per-channel")
"""How 8/4/2-bit weights are grouped: ``block`` (asymmetric, one scale and zero point per
--block-size values along K, the default) or ``per-channel`` (symmetric: one scale per output
channel, the block is all of K, zero point 0, as TFLite's int8 spec and PyTorch's
per_channel_symmetric have it; the form WebNN's TFLite backend fuses into integer kernels)."""
DEFAULT_GRANULARITY = "block"
HELD_FORMAT = "held"
"""The named weight format (``RunSpec.weight_format``) of an engine that writes the harness's own
codes in its layout (wllama: Q4_1 from the run's --weight-quant codes), planned once per quantizer;
every other named format rounds by its engine's own rule and runs once."""
PER_CHANNEL_BLOCK = 0
"""The block size that stands for per-channel in a layer plan or a prepare call (resolved to the
layer's K where the bytes are made: precision/held.py)."""


def block_for(granularity: str, block_size: int) -> int:
    """The block a run's weights are prepared with: ``block_size``, or PER_CHANNEL_BLOCK."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity {granularity!r} is not one of {', '.join(GRANULARITIES)}")
    return PER_CHANNEL_BLOCK if granularity == "per-channel" else block_size


def check_packing(k: int, bits: int, block: int, where: str) -> None:
    """The one rule of packed weights (ValueError, one line, naming the block size first): ``bits``
    8/4/2 fill 32-bit words, so a block (or, per channel, K) is whole words, and blocks tile K.
    ``where``: what holds K (a shape, a layer), for the message."""
    if bits not in (8, 4, 2):
        return
    per_word = 32 // bits
    if block == PER_CHANNEL_BLOCK:
        if k % per_word:
            raise ValueError(f"{where}: per-channel {bits}-bit weights need K={k} to be a multiple of "
                             f"{per_word} (packed into 32-bit words)")
        return
    if block % per_word:
        raise ValueError(f"block size {block} must be a multiple of {per_word} for {bits}-bit weights "
                         "packed into 32-bit words")
    if k % block:
        raise ValueError(f"block size {block} does not divide K={k} of {where} ({bits}-bit weights are "
                         "quantized in blocks along K): choose a block size that divides it")


def parse_bits(value: object) -> int:
    """The one check of a bits value (CLI, API and plan files): ValueError with one line."""
    try:
        bits = int(str(value))
    except ValueError:
        raise ValueError(f"bits {value!r} is not an integer") from None
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"bits {bits} is not supported; choose from {' '.join(map(str, SUPPORTED_BITS))}")
    return bits


def parse_count(text: str, minimum: int) -> int:
    """A user's whole number of at least ``minimum`` (CLI counts, sizes): ValueError with one line."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{value} must be at least {minimum}")
    return value


def with_build(name: object, build: object) -> str:
    """A browser or an engine with the build asked for: 'chrome@chromium', 'ort@1.31.0-dev...';
    the bare name for the default build (the one spelling of a build everywhere)."""
    return f"{name}@{build}" if build else str(name)


def parse_enum(kind: type[enum.StrEnum], value: object, what: str) -> enum.StrEnum:
    """A user's word as a member of ``kind``, or ValueError naming the choices."""
    try:
        return kind(str(value).lower())
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; choose from {', '.join(m.value for m in kind)}") from None


class SteadyClass(enum.StrEnum):
    """What a page load's series did (warmup_stats' classes)."""

    FLAT = "flat"
    """One level from the first iteration after the floor."""
    WARMUP = "warm-up"
    """Slower first, then settled at a faster level."""
    SLOWDOWN = "slowdown"
    """Settled at a level slower than an earlier one."""
    NO_STEADY = "no steady state"
    """The last level covers too little of the series: a drift, a cycle or a late step."""
    TOO_SHORT = "too short"
    """Too few iterations to judge (models keep a handful by default)."""
    NOT_JUDGED = "not judged"
    """A result from before the steady-state protocol (schema 10 or older)."""

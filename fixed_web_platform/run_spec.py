"""What one planned run is (RunSpec) and the timing protocol every run follows (TimingConfig).

The lowest layer of the sweep's data: engines, rows and the page protocol read these; the plan
(plan.py) builds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .precision.quantizers import DEFAULT_QUANTIZER
from .vocabulary import (DEFAULT_GRANULARITY, HELD_FORMAT, BrowserName, EngineName, Platform, PrecisionMode, block_for,
                         parse_bits, with_build)
from .workloads import KINDS, MATMUL, Workload, kind_named, workload_from_json

MAX_ITERATIONS_LIMIT = 2048
"""WebGPU query sets hold at most 4096 timestamps: two per iteration of the ring (timing.js)."""
RECORD_CAP = 20_000
"""The most samples a page records (a 0.5 ms kernel runs 20,000 in 10 s)."""
LEAST_SAMPLES = 3
"""A row's figure is never fewer samples than this where a page had them (not one sample:
analysis/measurement.py)."""
SAMPLE_MIN_MS = 2.0
"""Work faster than half of this is timed in batches spanning it (TimingConfig.sample_min_ms): a
single run of a few microseconds is below what performance.now() resolves; 2 ms keeps an 8 s floor
within a third of RECORD_CAP."""

WARMUP_FLOORS_S: dict[tuple[str, str, str], float] = {
    ("ort", "wasm", "chrome"): 8.0,
    ("ort", "wasm", "edge"): 8.0,
    ("wllama", "wasm", "chrome"): 2.0,
    ("wllama", "wasm", "edge"): 2.0,
}
"""The floor of ``--warmup-time auto``: seconds every page of an (engine, platform, browser)
runs before its iterations may count as steady; 0 where not listed. Measured, not guessed
(docs/concepts/steady-state.md#the-floors-measured, 2026-11-28): Chromium's V8 moves WebAssembly
from Liftoff to TurboFan after a budget of executed work, and ONNX Runtime's wasm MiniLM passes
in Chrome kept getting faster for about 8 s (119 -> 79 ms); llama.cpp's first two generations in
Chrome were 30% slower (1.3 s). Matmul kernels showed no start-up to skip on any engine (their
long series were flat, or changed mid-series, not at the start). Edge runs Chromium's V8: as
Chrome (not measured here)."""
CLOCK_BATCH_MS: dict[tuple[str, str], float] = {("firefox", "webgpu"): 90.0}
"""Where a page's wall clock is coarse, the page's stop rule judges batches of iterations
spanning at least this long: a tick (Firefox's onSubmittedWorkDone resolves on a ~100 ms tick, so
an iteration there takes at least one; faster ones would be judged several to a batch)."""


@dataclass(frozen=True)
class TimingConfig:
    """The timing protocol of every run (web/timing.js is the page's half;
    docs/concepts/steady-state.md says how they fit). The dataclass's own defaults are the
    counts protocol (``--steady off``); DEFAULT_TIMING and MODEL_TIMING are the product's."""

    warmup: int | None = 3
    """Iterations every page runs before any may count as steady (a floor, never steady; None:
    the run's workload kind's, KindTiming)."""
    min_iterations: int | None = 10
    """Iterations after the floor a page needs before it may stop (None: the kind's)."""
    min_time_s: float = 1.0
    max_iterations: int = 200
    """Counts mode: the most iterations after the floor. Both modes: the GPU timestamp ring
    keeps the last max_iterations iterations' timestamps."""
    repeat: int = 1
    """Page loads per run; their samples are pooled (pyperf's processes idea)."""
    timeout_s: float = 120.0
    warmup_min_s: float | None = 0.0
    """The floor also runs until this much time has passed (0: the count alone; None: auto, the
    floor measured for the run's engine, platform and browser, WARMUP_FLOORS_S)."""
    steady: bool = False
    """Steady mode: iterate until the trailing window is steady (web/timing.js) or steady_cap_s;
    off: the counts protocol (min_iterations and min_time_s after the floor)."""
    steady_cap_s: float | None = 10.0
    """Steady mode: a page stops here, steady or not (seconds from its first warm iteration;
    None: the kind's), once it has cap_waits samples after its floor."""
    cap_waits: int | None = LEAST_SAMPLES
    """Samples after the floor the steady cap waits for (None: the kind's, KindTiming)."""
    steady_tolerance: float = 0.05
    """Steady mode: the window's halves' medians agree within this (relative)."""
    batch_ms: float = 0.0
    """The stop rule judges batches of iterations at least this long (CLOCK_BATCH_MS, per run)."""
    sample_min_ms: float = SAMPLE_MIN_MS
    """Work faster than half of this is timed in batches: a sample that spans less grows the
    batch to span this long (web/timing.js; 0: one iteration a sample)."""

    def __post_init__(self) -> None:
        if self.warmup is not None and self.warmup < 0:
            raise ValueError(f"warm-up count must not be negative, got {self.warmup}")
        least = 1 if self.min_iterations is None else self.min_iterations
        if not 1 <= least <= self.max_iterations <= MAX_ITERATIONS_LIMIT:
            raise ValueError(
                f"need 1 <= min iterations ({least}) <= max iterations "
                f"({self.max_iterations}) <= {MAX_ITERATIONS_LIMIT}"
            )
        if not (0 <= self.min_time_s < float("inf")):
            raise ValueError(f"min time must be a non-negative number of seconds, got {self.min_time_s}")
        if self.repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {self.repeat}")
        if self.warmup_min_s is not None and not (0 <= self.warmup_min_s < float("inf")):
            raise ValueError(f"warm-up time must be a non-negative number of seconds, got {self.warmup_min_s}")
        if not (0 < self.timeout_s < float("inf")):
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout_s}")
        if self.steady_cap_s is not None and not (0 < self.steady_cap_s < float("inf")):
            raise ValueError(f"steady cap must be a positive number of seconds, got {self.steady_cap_s}")
        if self.cap_waits is not None and self.cap_waits < 1:
            raise ValueError(f"the cap must wait for at least 1 sample, got {self.cap_waits}")
        if not (0 < self.steady_tolerance < 1):
            raise ValueError(f"steady tolerance must be between 0 and 1, got {self.steady_tolerance}")
        if not (0 <= self.sample_min_ms < 1000):
            raise ValueError(f"sample minimum must be 0 to 1000 ms, got {self.sample_min_ms}")

    @property
    def page_budget_ms(self) -> float:
        """Time one page may spend on its iterations: half its share of the run's timeout."""
        return 1000.0 * self.timeout_s * 0.5 / self.repeat

    def for_run(self, run: RunSpec) -> TimingConfig:
        """This protocol as one run's pages follow it: what it leaves to the run's workload kind
        (KindTiming), the auto floor and the clock's batch resolved for its engine, platform and
        browser."""
        kind = kind_named(run.workload.kind).kind_timing
        floor = self.warmup_min_s
        if floor is None:
            floor = WARMUP_FLOORS_S.get((run.engine.value, run.platform.value, run.browser.value), 0.0)
        batch = CLOCK_BATCH_MS.get((run.browser.value, run.platform.value), 0.0)
        least = kind.min_iterations if self.min_iterations is None else self.min_iterations
        return dataclasses.replace(
            self, warmup=kind.warmup if self.warmup is None else self.warmup, min_iterations=least,
            max_iterations=max(self.max_iterations, least),
            steady_cap_s=kind.steady_cap_s if self.steady_cap_s is None else self.steady_cap_s,
            cap_waits=kind.cap_waits if self.cap_waits is None else self.cap_waits,
            warmup_min_s=floor, batch_ms=max(self.batch_ms, batch))

    @property
    def resolved(self) -> bool:
        """Nothing left to a run's kind or engine (for_run has been applied)."""
        return None not in (self.warmup, self.min_iterations, self.steady_cap_s, self.cap_waits, self.warmup_min_s)


DEFAULT_TIMING = TimingConfig(steady=True, warmup_min_s=None)
"""The main command's protocol for kernels: steady mode after the auto floor."""
MODEL_TIMING = TimingConfig(warmup=None, min_iterations=None, min_time_s=1.0, max_iterations=200, timeout_s=600.0,
                            warmup_min_s=None, steady=True, steady_cap_s=None, cap_waits=None)
"""The product's protocol for whole models (``--model``): steady mode like the kernels', its warm-up
count, minimum, cap and what the cap waits for each the workload kind's (KindTiming: a kind's iterations take tens of
milliseconds to seconds), and a longer time limit. Any timing flag given on the command line
wins."""


def protocol_words(recorded: Mapping[str, Any]) -> str:
    """How a sweep's pages measured, in words, from its TimingConfig as environment.json records it
    (the report's machine line and a findings page's stamp say it alike)."""
    t = recorded
    if not t:
        return "protocol not recorded"

    def value(key: str) -> str:
        return "the workload kind's" if t.get(key) is None else format(t[key], "g")

    floor = t.get("warmup_min_s", 0)  # None: the floor measured per engine (WARMUP_FLOORS_S)
    floor = " (and at least the engine's measured floor)" if floor is None else (
        f" (and at least {floor:g} s)" if floor else "")
    if t.get("steady") and all(t.get(k) is None for k in ("warmup", "min_iterations", "steady_cap_s")):
        head = f"steady mode with the workload kind's warm-up, minimum and cap{floor}"
    elif t.get("steady"):
        head = (f"steady mode (at most {value('steady_cap_s')} s a page): {value('warmup')} warm-up(s){floor}, "
                f"at least {value('min_iterations')} timed iterations")
    else:
        least_time = f" and {t['min_time_s']:g} s" if t.get("min_time_s") else ""
        head = (f"counts protocol: {value('warmup')} warm-up(s){floor}, at least {value('min_iterations')} "
                f"timed iterations{least_time}")
    return f"{head}, {t.get('repeat')} page load(s) a run, {t.get('timeout_s', 0):g} s limit"


def per_kind(field: str) -> str:
    """'encoder 60, decoder 120, ...': one KindTiming field of every kind that runs models (help
    texts and docs)."""
    return ", ".join(f"{k.name} {getattr(k.kind_timing, field):g}" for k in KINDS if k is not MATMUL)


def coded_bits(bits: int, workload: Workload) -> set[int]:
    """The 8/4/2 bits at which layers of a run at ``bits`` are held as a quantizer's codes: the
    run's own, and those a model's precision rules set (a sensitivity probe's one layer at 4 bits
    in a float model)."""
    return {b for b in (bits, *(rule.bits for rule in workload.rules)) if b <= 8}


def holds_codes(bits: int, workload: Workload) -> bool:
    """Some layer is held as a quantizer's codes: where ``--weight-quant`` matters."""
    return bool(coded_bits(bits, workload))


@dataclass(frozen=True)
class RunSpec:
    """One planned run: everything the harness needs to execute and label it."""

    run_id: int
    browser: BrowserName
    platform: Platform
    workload: Workload
    bits: int
    block_size: int
    repetition: int
    precision_mode: PrecisionMode
    seed: int
    webnn_device: str = "cpu"
    """MLContext deviceType for WebNN runs (cpu, gpu or npu); unused elsewhere."""
    engine: EngineName = EngineName.HARNESS
    """Who builds the work: the harness's kernels/graphs or ONNX Runtime Web."""
    engine_build: str = ""
    """The engine release asked for (``--engine ort@1.31.0-dev...``: engines/builds.py), as its
    version; '' for the engine's default build (and for the harness's own engines)."""
    browser_build: str = ""
    """The browser binary asked for (``--browser chrome@chromium``: a product's named build, or a
    path); '' for the one discovery finds. The rows say which version it was."""
    act_bits: int = 32
    """Activation precision: 32 (float) or 8 (int8, statically calibrated: W8A8 / W4A8)."""
    observer: str = ""
    """The calibration observer that gave the activations their scale and zero point ('' at 32)."""
    weight_format: str = ""
    """The weight format asked for, for engines that hold several at one bit width (wllama: a
    GGUF type such as Q4_0, 'shipped' for the model's own file, or HELD_FORMAT for the harness's
    codes); '' where the bits name it."""
    granularity: str = DEFAULT_GRANULARITY
    """How 8/4/2-bit weights are grouped: 'block' (block_size along K) or 'per-channel'."""
    weight_quant: str = DEFAULT_QUANTIZER
    """The weight quantizer that makes the 8/4/2-bit codes (precision/quantizers.py: --weight-quant).
    The default where the bits or an engine's named format decide (32/16 bits, per-channel
    weights, wllama's GGUF types but HELD_FORMAT); plans from before the axis read as it."""
    buffer_cache: str = ""
    """ONNX Runtime's WebGPU storage-buffer cache mode (engines/ort: BUFFER_CACHES; ORT and
    transformers.js on WebGPU, their default named), '' for engines without the choice."""
    backend: str = ""
    """The implementation of the platform inside the engine, for engines with several (ONNX Runtime
    Web on WebGPU: 'native', its C++ WebGPU execution provider, or 'jsep', its JavaScript one:
    engines/ort.BACKENDS); '' for engines with one."""
    accuracy_level: str = ""
    """ONNX Runtime's MatMulNBits ``accuracy_level`` set on every such node of the run's model
    ('0'-'4'; 4 lets its WebGPU kernels quantize activations to int8 where the adapter has
    subgroups); '' leaves the model's own."""
    graph_form: str = ""
    """The graph form asked for, for engines that build one computation several ways (the
    harness's WebNN graphs: engines/webnn/forms.py); '' for the engine's default."""
    refused: str = ""
    """Why this run will not be attempted, decided when the plan was built (no module runs its
    engine, platform and workload kind, or its activation precision); '' for a run to attempt."""

    @property
    def quantized_by(self) -> str:
        """The weight quantizer that made the held codes: ``weight_quant`` where some layer is held
        at 8/4/2 bits (``holds_codes``) as the harness's codes (no named format, or HELD_FORMAT);
        '' otherwise."""
        return self.weight_quant if holds_codes(self.bits, self.workload) and self.weight_format in ("", HELD_FORMAT) else ""

    @property
    def weight_block(self) -> int:
        """The block the weights are prepared with: block_size, or PER_CHANNEL_BLOCK."""
        return block_for(self.granularity, self.block_size)

    @property
    def browser_key(self) -> str:
        """The browser as one of a sweep's browser sessions is keyed: 'chrome', 'chrome@chromium'."""
        return with_build(self.browser, self.browser_build)

    @property
    def engine_key(self) -> str:
        """The engine and the build asked for: 'ort', 'ort@1.31.0-dev...'."""
        return with_build(self.engine, self.engine_build)

    @property
    def label(self) -> str:
        acts = f" a{self.act_bits} {self.observer}" if self.act_bits != 32 else ""
        fmt = f" {self.weight_format}" if self.weight_format else ""
        group = " per-channel" if self.granularity == "per-channel" and self.bits <= 8 else ""
        group += f" {self.weight_quant}" if self.weight_quant != DEFAULT_QUANTIZER else ""
        form = f" [{self.graph_form}]" if self.graph_form else ""
        form += f" cache:{self.buffer_cache}" if self.buffer_cache else ""
        form += f" {self.backend}" if self.backend else ""
        form += f" accuracy_level:{self.accuracy_level}" if self.accuracy_level else ""
        return (f"{self.browser_key}/{self.engine_key}/{self.platform} {self.bits}-bit{fmt}{group}{acts}{form} "
                f"{self.workload.label} rep{self.repetition}")

    def to_json(self) -> dict[str, Any]:
        doc = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return doc | {"workload": self.workload.to_json()}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunSpec:
        return cls(**{
            **doc,
            "browser": BrowserName(doc["browser"]),
            "engine": EngineName(doc.get("engine", EngineName.HARNESS)),  # v2 plans: harness only
            "platform": Platform(doc["platform"]),
            "precision_mode": PrecisionMode(doc["precision_mode"]),
            "workload": workload_from_json(doc["workload"]),
            "bits": parse_bits(doc["bits"]),
        })

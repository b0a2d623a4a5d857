"""The page protocol, both ways: the typed job spec the page fetches, and the reply it posts.

The spec is built here only (engines fill in their own part); the reply is data from a browser,
so every field is checked, not trusted. ``PROTOCOL_VERSION`` travels in every spec; the page
echoes it and a reply in another version is refused.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import PageDataError
from .run_spec import RECORD_CAP, TimingConfig
from .vocabulary import COMPUTE_DTYPES, PROTOCOL_VERSION
from .workloads import TensorSpec, WorkloadKind
from .workloads.base import TENSOR_DTYPES

MAX_REASON_CHARS = 2000
MAX_SAMPLE_MS = 3_600_000.0
"""A timed sample longer than an hour is not a measurement (a forged or broken reply)."""
PAGE_STATUSES = ("ok", "unsupported", "failed", "out-of-memory", "device-lost")
STOP_REASONS = ("steady", "cap", "counts", "max-iterations", "budget", "record-cap")
"""Why a page stopped iterating (web/timing.js): steady mode's rule held; steady mode's cap; counts
mode's counts met; counts mode's max_iterations; the page's time budget; the record cap."""
_RUNNER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
PROBE_RUNNER = "probe"
"""The page's built-in capability probe (web/probe.js), not an engine."""


@dataclass(frozen=True)
class JobSpec:
    """What one page load is asked to do. ``runner`` names the module web/engines/<runner>.js
    that executes it; ``options`` is the engine's own part (JSON-ready)."""

    runner: str
    engine: str
    platform: str
    bits: int = 0
    timing: TimingConfig | None = None
    bindings: tuple[str, ...] = ()
    """Tensor names the page fetches, in binding order."""
    outputs: tuple[TensorSpec, ...] = ()
    """The tensors the page posts back, in this order, packed (the workload kind's ``outputs``)."""
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _RUNNER_NAME.match(self.runner):
            raise ValueError(f"runner name {self.runner!r} is not a module name")

    @property
    def output_bytes(self) -> int:
        return sum(o.nbytes for o in self.outputs)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "protocol_version": PROTOCOL_VERSION,
            "runner": self.runner,
            "engine": self.engine,
            "platform": self.platform,
            "bits": self.bits,
            "bindings": list(self.bindings),
            "outputs": [o.to_json() for o in self.outputs],
            "output_bytes": self.output_bytes,
            "options": self.options,
        }
        if self.timing is not None:
            t = self.timing
            if not t.resolved:
                raise ValueError("the protocol is resolved per run (TimingConfig.for_run) before a job")
            doc |= {"warmup": t.warmup, "warmup_min_ms": t.warmup_min_s * 1000.0, "min_iterations": t.min_iterations,
                    "max_iterations": t.max_iterations, "min_time_ms": t.min_time_s * 1000.0,
                    "budget_ms": t.page_budget_ms, "steady": t.steady, "steady_cap_ms": t.steady_cap_s * 1000.0,
                    "steady_tolerance": t.steady_tolerance, "batch_ms": t.batch_ms, "record_cap": RECORD_CAP,
                    "least_samples": t.cap_waits, "sample_min_ms": t.sample_min_ms}
        return doc


def probe_spec(webnn_devices: list[str]) -> JobSpec:
    """A job that only reports capabilities (WebNN contexts and their opSupportLimits)."""
    return JobSpec(runner=PROBE_RUNNER, engine=PROBE_RUNNER, platform=PROBE_RUNNER,
                   options={"webnn_devices": list(webnn_devices)})


@dataclass(frozen=True)
class MeterReply:
    """What web/meter.js counted in the page and its workers around the engine's own calls
    (docs/concepts/memory.md): measured, not reported by the engine."""

    gpu_devices: int = 0
    gpu_peak_bytes: int = 0
    """The most bytes of WebGPU buffers live at once (created, not yet destroyed or collected)."""
    gpu_phase_peak_bytes: tuple[int, int, int] = (0, 0, 0)
    """The same in each phase: load (before the first iteration), warm-up (the cold iteration and the
    floor), measured."""
    gpu_peak_buffers: int = 0
    gpu_largest_bytes: int = 0
    """The largest single WebGPU buffer."""
    gpu_collected_bytes: int = 0
    """Bytes of buffers the engine dropped without destroying, which the garbage collector took."""
    wasm_memories: int = 0
    wasm_peak_bytes: int = 0
    """The most bytes of WebAssembly memory at once (every memory an engine created or a module
    exported; a memory never shrinks)."""
    webnn_constant_bytes: int = 0
    """Bytes handed to WebNN as constants (MLGraphBuilder.constant, MLContext.createConstantTensor)."""
    webnn_tensor_peak_bytes: int = 0
    """The most bytes of MLTensors live at once (MLContext.createTensor)."""
    workers: int = 0
    """Workers that answered with their own figures (added in)."""


PHASES = ("load", "warmup", "measured")
MAX_BYTES = 1 << 50
"""More than a petabyte is not a measurement."""


def _meter(value: Any) -> MeterReply | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise PageDataError("meter is not an object")

    def part(name: str) -> dict[str, Any]:
        doc = value.get(name)
        if not isinstance(doc, dict):
            raise PageDataError(f"meter.{name} is not an object")
        return doc

    def count(doc: dict[str, Any], key: str, name: str) -> int:
        raw = doc.get(key)
        if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_BYTES:
            raise PageDataError(f"meter.{name}.{key} is not a count of bytes or objects: {raw!r:.30}")
        return raw

    gpu, wasm, webnn = part("gpu"), part("wasm"), part("webnn")
    phases = gpu.get("phase_peak_bytes")
    if not isinstance(phases, dict):
        raise PageDataError("meter.gpu.phase_peak_bytes is not an object")
    workers = value.get("workers", 0)
    return MeterReply(
        gpu_devices=count(gpu, "devices", "gpu"),
        gpu_peak_bytes=count(gpu, "peak_bytes", "gpu"),
        gpu_phase_peak_bytes=tuple(count(phases, p, "gpu.phase_peak_bytes") for p in PHASES),
        gpu_peak_buffers=count(gpu, "peak_buffers", "gpu"),
        gpu_largest_bytes=count(gpu, "largest_bytes", "gpu"),
        gpu_collected_bytes=count(gpu, "collected_bytes", "gpu"),
        wasm_memories=count(wasm, "memories", "wasm"),
        wasm_peak_bytes=count(wasm, "peak_bytes", "wasm"),
        webnn_constant_bytes=count(webnn, "constant_bytes", "webnn"),
        webnn_tensor_peak_bytes=count(webnn, "tensor_peak_bytes", "webnn"),
        workers=count({"workers": workers}, "workers", "meter"),
    )


@dataclass(frozen=True)
class PageReply:
    """One page's reply, checked. Engine-specific fields are optional here; the engine that
    built the job says which it needs (engines/*.py ``interpret``)."""

    status: str
    reason: str = ""
    stage: str = ""
    """Where a failed page stopped (WebNN: tensor fetch, graph building, build, dispatch)."""
    shader: str = ""
    compute_dtype: str = ""
    """What the page says it computed in; informational (Python decides the tolerance)."""
    weight_buffer_bytes: int | None = None
    """WebGPU: bytes of the weight buffer the shader had bound."""
    weight_operand_dtype: str = ""
    """WebNN: dataType of the graph operand that held the stored weights."""
    executed_on: str = ""
    """ORT: the execution provider that ran the weight-bearing node."""
    fallback: str = ""
    """ORT: what the provider said when CPU fallback was disabled (why it needed the CPU)."""
    placement: str = ""
    """ORT: its own node-placement log, provider by provider, when a fallback was seen."""
    threads: int | None = None
    """ORT: wasm threads in effect."""
    engine_version: str = ""
    backend: str = ""
    """ORT on WebGPU: which implementation ran, as the page read it from ORT (native or jsep)."""
    programs: tuple[str, ...] = ()
    """ORT on WebGPU: the kernel programs its session profile names (distinct, in order)."""
    gpu_note: str = ""
    """Why there are no GPU timestamps, when the page says."""
    timestamp_query: bool = False
    compile_ms: float | None = None
    cold_ms: float | None = None
    wall_ms: tuple[float, ...] = ()
    """Every iteration after the cold one, in order (the floor's first)."""
    start_ms: tuple[float, ...] = ()
    """Each iteration's start, from the first one's."""
    floor_iterations: int = 0
    """How many of the first iterations were the floor (never steady)."""
    stop_reason: str = ""
    """Why the page stopped iterating (STOP_REASONS)."""
    gpu_ms: tuple[float, ...] | None = None
    """GPU timestamps of the last len(gpu_ms) iterations (the ring of max_iterations)."""
    iterations_per_sample: int = 1
    """Iterations each sample of ``wall_ms`` is the mean of (work too fast for the clock)."""
    js_heap_bytes: int | None = None
    js_heap_source: str = ""
    """Where js_heap_bytes came from, or why there is none."""
    meter: MeterReply | None = None
    """Memory counted around the engine's calls (web/meter.js); None from a page without it."""
    probe: dict[str, Any] = field(default_factory=dict)
    layers: tuple[LayerReply, ...] = ()
    """Whole models: what the page says about each linear layer, in forward order."""
    kind_fields: dict[str, Any] = field(default_factory=dict)
    """Reply fields only the run's workload kind has, checked by it (``WorkloadKind.reply_fields``)."""


@dataclass(frozen=True)
class LayerReply:
    """One linear layer of a whole-model run, as the page reports it."""

    name: str
    weight_dtype: str = ""
    """WebNN: dataType of the operand holding the stored weights; WebGPU: the shader's format."""
    weight_bytes: int | None = None
    """Bytes of the weight buffers/constants the page bound for this layer."""
    gpu_ms: float | None = None
    """Median GPU time of this layer's dispatches (timestamp queries), where the adapter has them."""
    act_dtype: str = ""
    """WebNN: dataType of the quantizeLinear output in front of the layer ('' for float inputs)."""
    programs: tuple[str, ...] = ()
    """ORT's native WebGPU implementation: the kernel programs this layer's node ran, as its
    session profile names them (what its MatMulNBits really computed: DP4A programs take int8
    activations)."""


MAX_LAYERS = 4096


def _layers(value: Any) -> tuple[LayerReply, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_LAYERS:
        raise PageDataError(f"layers is not a list of at most {MAX_LAYERS} entries")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise PageDataError(f"layers[{i}] is not an object with a name")
        wb, gpu = item.get("weight_bytes"), item.get("gpu_ms")
        out.append(LayerReply(
            name=item["name"][:200],
            weight_dtype=_short(item.get("weight_dtype"), f"layers[{i}].weight_dtype", 40),
            weight_bytes=None if wb is None else int(_number(wb, f"layers[{i}].weight_bytes")),
            gpu_ms=None if gpu is None else _milliseconds(gpu, f"layers[{i}].gpu_ms"),
            act_dtype=_short(item.get("act_dtype"), f"layers[{i}].act_dtype", 40),
            programs=_programs(item.get("programs"), LAYER_PROGRAMS),
        ))
    return tuple(out)


def _number(value: Any, name: str) -> float:
    try:
        finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        raise PageDataError(f"{name} is not a finite number: {value!r:.80}")
    if value < 0:
        raise PageDataError(f"{name} is negative: {value!r}")
    return float(value)


def _milliseconds(value: Any, name: str) -> float:
    ms = _number(value, name)
    if ms > MAX_SAMPLE_MS:
        raise PageDataError(f"{name} = {value!r:.20} ms is beyond an hour: not a measurement")
    return ms


def _samples(value: Any, name: str, at_most: int, exactly: int | None = None) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise PageDataError(f"{name} is not a list")
    if exactly is not None and len(value) != exactly:
        raise PageDataError(f"{name} has {len(value)} samples, expected {exactly}")
    if not 1 <= len(value) <= at_most:
        raise PageDataError(f"{name} has {len(value)} samples; between 1 and {at_most} are allowed")
    return tuple(_milliseconds(v, f"{name}[{i}]") for i, v in enumerate(value))


def _js_heap(value: Any) -> tuple[int | None, str]:
    if not isinstance(value, dict):
        return None, "not reported"
    raw = value.get("bytes")
    note = _text(value.get("note"))
    if raw is None:
        return None, f"unavailable: {note}" if note else "unavailable"
    return int(_number(raw, "js_heap.bytes")), _text(value.get("source"))[:80]


def _text(value: Any) -> str:
    return str(value)[:MAX_REASON_CHARS] if value is not None else ""


def _short(value: Any, name: str, limit: int = 40) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PageDataError(f"{name} is not a string: {value!r:.40}")
    return value[:limit]


MAX_PROGRAMS = 200
"""The most kernel program names a reply may list (a whole model's distinct programs)."""
LAYER_PROGRAMS = 16
"""The most a layer's node may list (the page keeps its first 16)."""


def _programs(value: Any, most: int = MAX_PROGRAMS) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > most:
        raise PageDataError(f"programs is not a list of at most {most} names: {value!r:.60}")
    return tuple(_short(v, "programs[]", 120) for v in value)


def parse_page_reply(payload: Any, max_samples: int = RECORD_CAP, kind: WorkloadKind | None = None) -> PageReply:
    """Check a posted result; timed runs have 1..max_samples iterations after the cold one (fewer
    than the minimum asked is allowed here and marked by the runner), each with its start offset;
    GPU timestamps cover the last ones (a ring, timing.js). ``kind`` checks its own reply fields."""
    if not isinstance(payload, dict):
        raise PageDataError("result is not a JSON object")
    version = payload.get("protocol_version")
    if version != PROTOCOL_VERSION:
        raise PageDataError(f"protocol version {version!r:.20} is not {PROTOCOL_VERSION}")
    status = payload.get("status")
    if status not in PAGE_STATUSES:
        raise PageDataError(f"unknown status {status!r:.40}")
    probe = payload.get("probe") if isinstance(payload.get("probe"), dict) else {}
    if status != "ok":
        return PageReply(status=status, reason=_text(payload.get("reason")) or "(no message)",
                          stage=_text(payload.get("stage"))[:40], probe=probe, meter=_meter(payload.get("meter")))
    compute_dtype = payload.get("compute_dtype")
    if compute_dtype not in COMPUTE_DTYPES:
        raise PageDataError(f"unknown compute_dtype {compute_dtype!r:.40}")
    weight_buffer = payload.get("weight_buffer_bytes")
    threads = payload.get("threads")
    gpu = payload.get("gpu_ms")
    wall = _samples(payload.get("wall_ms"), "wall_ms", max_samples)
    starts = _samples(payload.get("start_ms"), "start_ms", max_samples, exactly=len(wall))
    if any(b < a for a, b in zip(starts, starts[1:])):
        raise PageDataError("start_ms goes backwards")
    floor = payload.get("floor_iterations")
    if isinstance(floor, bool) or not isinstance(floor, int) or not 0 <= floor <= len(wall):
        raise PageDataError(f"floor_iterations is not a count of at most {len(wall)}: {floor!r:.20}")
    stop = payload.get("stop_reason")
    if stop not in STOP_REASONS:
        raise PageDataError(f"unknown stop_reason {stop!r:.40}")
    per_sample = payload.get("iterations_per_sample")
    if isinstance(per_sample, bool) or not isinstance(per_sample, int) or not 1 <= per_sample <= RECORD_CAP:
        raise PageDataError(f"iterations_per_sample is not a count of 1 to {RECORD_CAP}: {per_sample!r:.20}")
    heap_bytes, heap_source = _js_heap(payload.get("js_heap"))
    return PageReply(
        status=status,
        shader=_text(payload.get("shader")),
        compute_dtype=compute_dtype,
        weight_buffer_bytes=None if weight_buffer is None else int(_number(weight_buffer, "weight_buffer_bytes")),
        weight_operand_dtype=_short(payload.get("weight_operand_dtype"), "weight_operand_dtype", 20),
        executed_on=_short(payload.get("executed_on"), "executed_on"),
        fallback=_text(payload.get("fallback")),
        placement=_text(payload.get("placement")),
        threads=None if threads is None else int(_number(threads, "threads")),
        engine_version=_short(payload.get("engine_version"), "engine_version", 80),
        backend=_short(payload.get("backend"), "backend", 20),
        programs=_programs(payload.get("programs")),
        gpu_note=_text(payload.get("gpu_note")),
        timestamp_query=payload.get("timestamp_query") is True,
        compile_ms=_milliseconds(payload.get("compile_ms"), "compile_ms"),
        cold_ms=_milliseconds(payload.get("cold_ms"), "cold_ms"),
        wall_ms=wall,
        start_ms=starts,
        floor_iterations=floor,
        stop_reason=stop,
        iterations_per_sample=per_sample,
        gpu_ms=None if gpu is None else _samples(gpu, "gpu_ms", len(wall)),
        js_heap_bytes=heap_bytes,
        js_heap_source=heap_source,
        meter=_meter(payload.get("meter")),
        probe=probe,
        layers=_layers(payload.get("layers")),
        kind_fields=kind.reply_fields(payload, max_samples) if kind is not None else {},
    )


def parse_outputs(data: bytes | None, specs: tuple[TensorSpec, ...]) -> dict[str, np.ndarray]:
    """The posted output bytes split into the job's named tensors, checked: the exact size, and
    no NaN or Inf in float tensors."""
    expected = sum(spec.nbytes for spec in specs)
    if data is None:
        raise PageDataError("the page posted no output tensor")
    if len(data) != expected:
        shapes = ", ".join(f"{s.name} {'x'.join(map(str, s.shape))} {s.dtype}" for s in specs)
        raise PageDataError(f"output has {len(data)} bytes, expected {expected} ({shapes})")
    out: dict[str, np.ndarray] = {}
    at = 0
    for spec in specs:
        array = np.frombuffer(data, dtype=TENSOR_DTYPES[spec.dtype], count=spec.nbytes // np.dtype(
            TENSOR_DTYPES[spec.dtype]).itemsize, offset=at).reshape(spec.shape)
        at += spec.nbytes
        if array.dtype.kind == "f":
            bad = int(np.count_nonzero(~np.isfinite(array)))
            if bad:
                raise PageDataError(f"output {spec.name} holds {bad} non-finite values (NaN or Inf)")
        out[spec.name] = array
    return out

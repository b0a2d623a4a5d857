"""What an engine is: who builds the work for the page, and who reads the page's reply.

An engine runs on one platform (the WebGPU WGSL kernels, the WebNN graphs, ONNX Runtime Web on
one execution provider). What it can run is a table of (engine, platform, workload kind) ->
``KindRunner`` in engines/registry.py: each runner lives in the engine's own package
(``engines/wgsl/encoder.py``) with its page runner (web/engines/<runner>.js). For a run the
kind runner turns the prepared workload into a job (spec + tensors), or refuses with a reason
before any page loads; after the page replies it says what ran (bits executed, compute dtype,
provider) and what is wrong with the reply, if anything. A pair the table does not list is
refused when the plan is built. Engines know nothing of statistics, rows or browsers' processes.

Adding an engine: a package here with an ``Engine`` subclass per platform and a ``KindRunner``
per workload kind it runs, their page runners web/engines/<runner>.js, and its lines in
``engines/registry.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from ..models.source import ONNX_WEIGHTS
from ..page_protocol import JobSpec, PageReply
from ..precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ..run_spec import RunSpec, TimingConfig
from ..vocabulary import EngineName, Outcome, Platform
from ..workloads import Prepared, TensorSpec, Workload
from .builds import EngineBuild, choose


class BrowserFacts(Protocol):
    """What an engine may ask of the running browser before it builds a job."""

    async def webnn_context(self, device: str) -> dict[str, Any]:
        """``{"available": bool, "limits": opSupportLimits() | "error": text}`` for a deviceType."""

    async def adapter_limits(self) -> dict[str, int]:
        """The WebGPU adapter's limits (maxBufferSize, maxStorageBufferBindingSize, ...); {} without one."""


@dataclass(frozen=True)
class EngineJob:
    """One run's job for the page, and what its reply is judged by."""

    spec: JobSpec
    tensors: dict[str, bytes | Path]
    prepared: Prepared
    """References (float64), tolerance rule, outputs and weight bytes of this job (the kind's)."""
    weight_format: str
    weight_dtype: str
    scale_dtype: str = ""
    zero_point_dtype: str = ""
    note: str = ""
    """Why what runs differs from the literal request (an upgrade, a cast); goes to the reason."""
    refusal_is_unsupported: bool = False
    """The job asks for something the browser does not list: a refusal while building is the
    browser's answer ('unsupported'), not a failure."""
    details: dict[str, Any] = field(default_factory=dict)
    """Engine facts for samples.jsonl (e.g. the opSupportLimits a choice was made from)."""
    largest_constant: tuple[str, int] = ("", 0)
    """The largest constant of the model the page loads (name, bytes), for engines that hold each
    in one WebGPU buffer (ONNX Runtime's provider: measured, the largest buffer is the largest
    initializer; the harness's step-list kernels, which bind it whole too: ``binds_whole``), checked
    against the adapter's limits before the page; ('', 0) where the page checks its own."""
    graph_form: str = ""
    """The graph form the page builds (the harness's WebNN graphs), for the row; '' for one form."""
    layers_asked: tuple[Any, ...] = ()
    """Whole models whose bytes are held at other bits than asked (WebNN's standard mode): the
    layer plan as asked (models.rules.LayerPrecision), for layers.csv; empty when it is
    ``prepared.layers``."""

    @property
    def layer_plan(self) -> tuple[Any, ...]:
        """Each layer's precision as the user asked for it."""
        return self.layers_asked or tuple(getattr(self.prepared, "layers", ()))


@dataclass(frozen=True)
class Refusal:
    """The run cannot be attempted here; no page is loaded."""

    outcome: Outcome
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Executed:
    """What the page ran, as the engine reads its reply. ``problem`` makes the row invalid."""

    bits: int | None
    compute_dtype: str
    executed_on: str
    problem: str = ""
    note: str = ""
    """A fact for the reason that is not a problem (e.g. ORT placed the node on wasm)."""
    layers: tuple[LayerExecuted, ...] = ()
    """Whole models: what each linear layer held, as the engine reads the reply."""
    kernel_variant: str = ""
    """The harness's own kernels: which kernel and tile ran (e.g. 'quant-w4 tile 16x1')."""
    backend: str = ""
    """Which implementation of the platform ran (ResultRow.backend), as the page read it."""
    act_executed: str = ""
    """What the kernels computed the activations in, where the page can tell (ResultRow.act_executed)."""
    check: Callable[[np.ndarray], tuple[np.ndarray, str]] | None = None
    """The engine's own kernel check of the judged output, where what ran differs from what the
    prepared references assume (ORT's DP4A kernels quantize the activations by their own rule):
    (the float64 reference of what ran, a problem or ''); None: the prepared references."""
    check_slack: float = 0.0
    """With ``check``: added to the tolerance, how far rounding flips alone move the output."""


@dataclass(frozen=True)
class LayerExecuted:
    name: str
    bits_executed: int | None
    weight_dtype: str = ""
    weight_bytes: int | None = None
    gpu_ms: float | None = None
    act_dtype: str = ""
    """The type the layer's input was quantized to (int8 activations), '' for float inputs."""


class Engine(ABC):
    """One engine on one platform. What it runs per workload kind is in engines/registry.py."""

    name: ClassVar[EngineName]
    platform: ClassVar[Platform]
    refusal_stages: ClassVar[tuple[str, ...]] = ()
    """Page stages where a refused data type or operator surfaces (the browser's answer)."""
    dtype_names: ClassVar[Mapping[str, int]] = {}
    """Where its weight formats are dtypes a user names (--dtype: transformers.js's): each name's bits."""
    held_on_request: ClassVar[bool] = False
    """Its HELD_FORMAT runs (the harness's quantizers' codes in the engine's own file format) are
    planned only when asked for: --weight-quant naming a quantizer other than the default, or
    --dtype held (build_plan). Without it (wllama's held GGUF) they are planned at their bits."""

    builds: ClassVar[tuple[EngineBuild, ...]] = ()
    """The releases installed side by side (engines/builds.py), the default first; none for the
    harness's own engines."""

    def assets(self) -> dict[str, Path]:
        """URL prefix -> local folder the server must serve for this engine's page runners."""
        return {b.url: b.directory for b in self.builds}

    def build(self, run: RunSpec) -> EngineBuild:
        """The build ``run`` loads (its ``engine_build``, or the default)."""
        return choose(self.name, self.builds, run.engine_build)

    def graph_forms(self, asked: tuple[str, ...], act_bits: int) -> tuple[str, ...]:
        """Of the graph forms asked for (``RunSpec.graph_form``, '' the default), those this engine
        builds with ``act_bits`` activations, one run each; ('',) for an engine of one form."""
        return ("",)

    def buffer_caches(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        """Of the WebGPU buffer cache modes asked for (``RunSpec.buffer_cache``; none asked: the
        engine's default, named), those this engine runs, one run each; ('',) for an engine without
        the choice."""
        return ("",)

    def backends(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        """Of the implementations asked for (``RunSpec.backend``; none asked: the engine's default,
        named), those this engine runs, one run each; ('',) for an engine of one."""
        return ("",)

    def accuracy_levels(self, asked: tuple[str, ...], bits: int, act_bits: int) -> tuple[str, ...]:
        """Of the MatMulNBits accuracy levels asked for (``RunSpec.accuracy_level``), those that
        apply to a run at ``bits`` with ``act_bits`` activations, one run each; ('',) otherwise."""
        return ("",)

    def what_ran(self, run: RunSpec, job: EngineJob, page: PageReply, executed: Executed) -> Executed:
        """``executed`` (the kind runner's reading) with what the engine itself tells of every reply
        (ORT: which WebGPU implementation ran, and in what its kernels took the activations)."""
        return executed

    def weight_formats(self, workload: Workload, bits: int, act_bits: int = 32) -> tuple[str, ...]:
        """The named weight formats this engine runs at ``bits`` (with ``act_bits`` activations)
        for ``workload``, one run each (``RunSpec.weight_format``); ('',) where the bits alone
        name the format."""
        return ("",)


class KindRunner(ABC):
    """An engine's support for one workload kind: the page runner that executes it, the job it
    builds for a run, and how it reads the page's reply."""

    runner: ClassVar[str]
    """The page module web/engines/<runner>.js that executes these jobs."""
    act_bits: ClassVar[tuple[int, ...]] = (32,)
    """Activation precisions built (32: float; 8: int8 with calibrated parameters)."""
    weight_quants: tuple[str, ...] = (DEFAULT_QUANTIZER,)
    """Weight quantizers whose bytes it holds (precision/quantizers.py; --weight-quant); a class's
    own, or what the registry gives one instance (one provider's runner holding more)."""
    runs_onnx_folders: ClassVar[bool] = False
    """It runs a model folder's ONNX files as given (transformers.js), so a folder with no weights
    of its own (``source.ONNX_WEIGHTS``) is its to run; other runners refuse one."""

    supports: ClassVar[frozenset[str] | None] = None
    """What its lowering of an architecture's op graph runs (architectures/ops.py ``needs``: ops and
    op parameters), declared by the lowering module; None for a runner that lowers no graph."""
    binds_whole: ClassVar[bool] = False
    """Its kernels bind each constant whole, so none may pass maxStorageBufferBindingSize
    (registry.buffer_limit_refusal)."""
    lowered_passes: ClassVar[tuple[str, ...] | None] = None
    """The graph's passes it lowers (None: every one; a page that gets its features another way
    lowers no ``frontend``)."""

    def __init__(self, weight_quants: tuple[str, ...] | None = None) -> None:
        if weight_quants is not None:
            self.weight_quants = weight_quants

    def refusal(self, engine: Engine, run: RunSpec) -> str:
        """Why this run cannot be built, known before any browser starts ('' when it can)."""
        if getattr(run.workload, "weights", "") == ONNX_WEIGHTS and not self.runs_onnx_folders:
            return ("the model folder holds no weights, only transformers.js's ONNX files (--engine transformersjs "
                    "runs them)")
        if run.act_bits not in self.act_bits:
            return (f"{run.act_bits}-bit activations are not built for engine {engine.name} on "
                    f"{engine.platform} for {run.workload.kind} workloads")
        quantizer = QUANTIZERS[run.weight_quant]
        if quantizer.calibrated and not run.workload.calibration_label:
            return (f"the {run.weight_quant} quantizer calibrates on inputs apart from the evaluated ones; "
                    f"{run.workload.kind} workloads have no calibration set yet")
        if run.weight_quant not in self.weight_quants:
            zero = " (a float zero point per block)" if quantizer.float_zero else ""
            return (f"weights made by the {run.weight_quant} quantizer{zero} are not held by engine {engine.name} "
                    f"on {engine.platform} for {run.workload.kind} workloads yet")
        if self.supports is not None and self.lowers_graph(run):
            missing = sorted(run.workload.op_needs(self.lowered_passes) - self.supports)
            if missing:
                return (f"engine {engine.name} on {engine.platform} has no lowering of {', '.join(missing)}, which the "
                        f"{run.workload.architecture().name} graph needs (architectures/ops.py)")
        return ""

    def lowers_graph(self, run: RunSpec) -> bool:
        """Whether ``run`` is built by lowering the workload's op graph (a runner that also runs a
        model's own files as given says no for those)."""
        return True

    @abstractmethod
    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        """Build the page's job for ``run``, or refuse before any page loads."""

    @abstractmethod
    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        """What ran, from the reply's facts; Python, not the page, picks the tolerance. Raises
        PageDataError when the reply lacks a fact this engine needs (the run is then failed)."""

    def spec(self, engine: Engine, run: RunSpec, timing: TimingConfig, tensors: dict[str, bytes | Path],
             outputs: tuple[TensorSpec, ...], options: dict[str, Any], bits: int | None = None) -> JobSpec:
        """The common part of every job; runners add only their own ``options``."""
        return JobSpec(runner=self.runner, engine=engine.name.value, platform=engine.platform.value,
                       bits=run.bits if bits is None else bits, timing=timing, bindings=tuple(tensors),
                       outputs=outputs, options=options)

"""What an engine is: who builds the work for the page, and who reads the page's reply.

An engine runs on one platform (the WebGPU WGSL kernels, the WebNN graphs, ONNX Runtime Web on
one execution provider). For a run it turns the prepared workload into a job (spec + tensors),
or refuses with a reason before any page loads; after the page replies it says what ran
(bits executed, compute dtype, provider) and what is wrong with the reply, if anything. It knows
nothing of statistics, rows or browsers' processes.

Adding an engine: a module here with an ``Engine`` subclass per platform, a page runner
web/engines/<runner>.js, and its lines in ``engines/registry.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ..harness.protocol import JobSpec, PageDataError, PageReply
from ..plan import RunSpec, TimingConfig
from ..vocabulary import EngineName, Outcome, Platform
from ..workloads.matmul import PreparedWorkload


class BrowserFacts(Protocol):
    """What an engine may ask of the running browser before it builds a job."""

    async def webnn_context(self, device: str) -> dict[str, Any]:
        """``{"available": bool, "limits": opSupportLimits() | "error": text}`` for a deviceType."""


@dataclass(frozen=True)
class EngineJob:
    """One run's job for the page, and what its reply is judged by."""

    spec: JobSpec
    tensors: dict[str, bytes]
    prepared: Any
    """References (float64) and the weight bytes this job carries: a matmul's
    workloads.matmul.PreparedWorkload or a model's models.prepared.PreparedModel."""
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
    name: ClassVar[EngineName]
    platform: ClassVar[Platform]
    runner: ClassVar[str]
    """The page module web/engines/<runner>.js that executes this engine's jobs."""
    refusal_stages: ClassVar[tuple[str, ...]] = ()
    """Page stages where a refused data type or operator surfaces (the browser's answer)."""

    def assets(self) -> dict[str, Path]:
        """URL prefix -> local folder the server must serve for this engine's page runner."""
        return {}

    act_bits: tuple[int, ...] = (32,)
    """Activation precisions this engine runs in the matmul sweep (32: float; 8: int8 with
    calibrated parameters)."""
    model_act_bits: tuple[int, ...] = (32,)
    """The same for whole models."""

    async def build(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
        """The job for any workload kind: matmuls by ``job``, whole models by ``model_job``."""
        model = run.workload.kind == "model"
        if run.act_bits not in (self.model_act_bits if model else self.act_bits):
            runs_them = ("the harness's WGSL and WebNN model engines run them" if model
                         else "the harness's WGSL kernels run them on WebGPU")
            return Refusal(Outcome.UNSUPPORTED, f"{run.act_bits}-bit activations are not built for "
                           f"engine {self.name} on {self.platform} {'models' if model else 'matmuls'} "
                           f"({runs_them})")
        if model:
            return await self.model_job(run, timing, browser)
        return await self.job(run, timing, browser)

    def read(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        if run.workload.kind == "model":
            return self.model_interpret(run, job, page)
        return self.interpret(run, job, page)

    async def model_job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
        """Whole models (models/prepared.py gives the bytes and the shared options)."""
        return Refusal(Outcome.UNSUPPORTED, f"engine {self.name} on {self.platform} does not run whole models")

    def model_interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        raise PageDataError(f"engine {self.name} on {self.platform} does not read whole-model replies")

    def model_spec(self, run: RunSpec, prepared: Any, timing: TimingConfig, tensors: dict[str, bytes],
                   options: dict[str, Any]) -> JobSpec:
        """The common part of every whole-model job: the shared options plus the engine's own."""
        return JobSpec(runner=self.runner, engine=self.name.value, platform=self.platform.value,
                       bits=run.bits, timing=timing, bindings=tuple(tensors),
                       output_bytes=prepared.output_bytes, options=prepared.options() | options)

    @abstractmethod
    async def job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
        """Build the page's job for ``run``, or refuse before any page loads."""

    @abstractmethod
    def interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        """What ran, from the reply's facts; Python, not the page, picks the tolerance. Raises
        PageDataError when the reply lacks a fact this engine needs (the run is then failed)."""

    def spec(self, run: RunSpec, prepared: PreparedWorkload, timing: TimingConfig,
             tensors: dict[str, bytes], options: dict[str, Any]) -> JobSpec:
        """The common part of every matmul job; engines add only their own ``options``."""
        w = run.workload
        return JobSpec(runner=self.runner, engine=self.name.value, platform=self.platform.value,
                       bits=prepared.bits, m=w.m, k=w.k, n=w.n, timing=timing,
                       bindings=tuple(tensors), output_bytes=w.m * w.n * 4, options=options)

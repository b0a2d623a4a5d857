"""The runners whose pages run named passes of steps on web/engines/wgsl_steps.js's StepRunner
(the generate loop: decoder.py; the transcribe loop: speech.py): what they share of a job. A
runner says how to prepare its kind's workload, the graph's shapes and its loop's own options; the
architecture's graph is lowered here (lower.py), checked, and what the page ran is read back the
same way for both (linear.executed_steps)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from ...architectures import ops
from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import WgslRunner
from . import kernels as wgsl
from .linear import executed_steps, held_fields, model_zero, unsupported
from .lower import SUPPORTS, Lowering


class StepListRunner(WgslRunner):
    label: ClassVar[str]
    """What the refusal calls the model ('decoder', 'Whisper')."""
    supports = SUPPORTS
    binds_whole = True
    prepare: ClassVar[Callable[..., Any]]
    """The kind's prepare function, (workload, bits, block, seed, weight_quant=) -> its prepared
    workload (``.plan``, ``.held``, ``.config``, ``.tensors()``, ``.outputs``)."""

    def shapes(self, prepared: Any) -> dict[str, int]:
        """The loop's shapes the architecture's graph is built at (Architecture.graph)."""
        return {}

    @abstractmethod
    def loop_options(self, prepared: Any, graph: ops.Graph, lowering: Lowering, steps: dict[str, list[dict[str, Any]]],
                     tensors: dict[str, bytes]) -> dict[str, Any]:
        """The loop's own options: its passes under the name its page reads, its activation
        buffers (bytes, without the dequantize scratch), its caches, prompt and limits."""

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        prepared = self.prepare(run.workload, run.bits, run.weight_block, run.seed, weight_quant=run.weight_quant)
        why = unsupported(prepared.plan, prepared.config.head_dim, prepared.held)
        if why:
            return Refusal(Outcome.UNSUPPORTED, f"the harness's WGSL {self.label} cannot run this model: {why}")
        options, tensors = self.build(prepared)
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, options)
        largest = max(tensors, key=lambda name: len(tensors[name]))
        return EngineJob(spec=spec, tensors=tensors, prepared=prepared, largest_constant=(largest, len(tensors[largest])),
                         **held_fields([layer.held for layer in prepared.held.layers]))

    def build(self, prepared: Any) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The job's options (programs, kernels, buffers, the passes: the graph lowered) and its tensors."""
        graph: ops.Graph = prepared.workload.architecture().graph(prepared.config, **self.shapes(prepared))
        graph.check([p.layer.name for p in prepared.plan])
        lowering = Lowering(prepared.plan, prepared.config.has_bias, model_zero(prepared.held))
        steps = lowering.passes(graph)
        tensors = (prepared.tensors() | {name: a.astype("<f4").tobytes() for name, a in graph.tensors.items()}
                   | lowering.tensors)
        options = self.loop_options(prepared, graph, lowering, steps, tensors)
        if lowering.dequantized:
            options["activations"][wgsl.DEQUANTIZED] = lowering.dequantized
        return {"model": prepared.config.to_json() | {"name": prepared.workload.name},
                "programs": lowering.sources(), "linear_variants": lowering.linear_variants(),
                "tensor_bytes": {name: len(data) for name, data in tensors.items()},
                "weight_tensors": sorted(prepared.held.tensors())} | options, tensors

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return executed_steps(engine, job, page, job.prepared.plan)

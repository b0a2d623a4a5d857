"""The runners whose pages build a loop's passes as WebNN graphs (the generate loop: decoder.py;
the transcribe loop: speech.py; their pages share web/engines/webnn_loop.js): what they share of a
job. A runner says how to prepare its kind's workload and how each pass is lowered (lower.py's
``loop_pass``), with its loop's own options; the data types per layer come from layers.py, and
what the page ran is read back the same way for both."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from ...page_protocol import PageReply
from ...precision.quantizers import QUANTIZERS
from ...run_spec import RunSpec, TimingConfig
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from .forms import MODEL_FORM
from .layers import ModelPlan, executed, plan_model
from .lower import SUPPORTS


class LoopRunner(KindRunner):
    weight_quants = tuple(QUANTIZERS)
    supports = SUPPORTS

    @abstractmethod
    def prepare(self, run: RunSpec, plan: ModelPlan) -> Any:
        """The kind's prepared workload (``plan.workload``) at the bits each layer executes
        (``.plan``, ``.held``, ``.outputs``) and in ``plan``'s signedness and form."""

    @abstractmethod
    def build(self, prepared: Any, layers: Sequence[str]) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The loop's own options (``passes``: each pass lowered, one op list per graph; its
        shapes and limits) and the job's tensors; ``layers``: the linear layers in the job's order."""

    def int8_layers(self, prepared: Any) -> list[dict[str, Any]]:
        """Each linear layer's int8 input and output parameters (``act``, ``out``), in the plan's
        order; none where the kind has no int8 activations."""
        return []

    def quantized_per_graph(self) -> int | None:
        """Weight elements of 8/4/2-bit layers one of the page's graphs may hold (None: no limit);
        a layer past it alone is held in float32 (layers.plan_model)."""
        return None

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        plan = await plan_model(run, browser, MODEL_FORM, self.quantized_per_graph())
        if isinstance(plan, Refusal):
            return plan
        prepared = self.prepare(run, plan)
        options, tensors = self.build(prepared, [p.layer.name for p in prepared.plan])
        options = plan.graph_options(run, prepared.plan, prepared.held.layers) | options
        int8 = self.int8_layers(prepared)
        if int8:
            options["linears"] = [linear | params for linear, params in zip(options["linears"], int8)]
        return EngineJob(spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
                         tensors=tensors, prepared=prepared, **plan.job_fields(prepared.held.layers))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return executed(job, page, job.prepared.held.layers, engine.platform.value)

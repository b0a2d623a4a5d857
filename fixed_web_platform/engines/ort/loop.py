"""The ORT runners of a loop (the generate loop: decoder.py; the transcribe loop: speech.py; their
pages share web/engines/ort_loop.js): what they share of a job. A runner says why it cannot run a
workload (``refuse``), how its model is prepared and exported (``build``, off the event loop: an
export takes seconds to a minute) and what its page gets (``page``); the layers' held types and
what ran where are read the same way for both."""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import Any

from ...formats import onnx_inventory
from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import OrtKindRunner, OrtWebEngine, placement, torch_ops
from .onnx_linears import held_fields, summary


class OrtLoopRunner(OrtKindRunner):
    supports = torch_ops.SUPPORTS

    def refuse(self, run: RunSpec) -> str:
        """Why this run's workload cannot be exported or run here, known before its page ('' when
        it can)."""
        return ""

    @abstractmethod
    def build(self, run: RunSpec) -> tuple[Any, Any]:
        """The prepared workload (unsigned codes: MatMulNBits stores values and zero points shifted
        by 2^(bits-1)) and the rewritten model (``.layers``: LayerNode, ``.weight_bytes``,
        ``.inventories``: each graph's, which the row's samples keep)."""

    @abstractmethod
    def page(self, engine: OrtWebEngine, prepared: Any, model: Any) -> tuple[dict[str, bytes], dict[str, Any],
                                                                               dict[str, Any]]:
        """The job's tensors, the page's own options and the row's details (beside the layers')."""

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        assert isinstance(engine, OrtWebEngine)
        why = self.refuse(run)
        if why:
            return Refusal(Outcome.UNSUPPORTED, why)
        prepared, model = await asyncio.to_thread(self.build, run)
        tensors, options, details = self.page(engine, prepared, model)
        options = {**engine.session_options(run), **options, "weight_bytes": model.weight_bytes,
                   "ort_layers": [layer.to_json() for layer in model.layers]}
        return EngineJob(spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
                         tensors=tensors, prepared=prepared,
                         **held_fields(model.layers, (layer.held for layer in prepared.held.layers)),
                         details={"onnx_layers": summary(model.layers), "onnx_inventory": model.inventories,
                                  **details},
                         largest_constant=onnx_inventory.largest_constant(model.inventories))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return placement.executed(engine, job, page)

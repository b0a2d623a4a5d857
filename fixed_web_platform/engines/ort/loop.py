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
from ...models import rules
from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import QDQ_FORM, OrtKindRunner, OrtWebEngine, placement, torch_ops
from .onnx_linears import held_fields, summary


MATMUL_NBITS_BLOCKS = (16, 32, 64, 128, 256)
"""The blocks along K ORT Web's MatMulNBits takes (1.30: "Only block sizes 16, 32, 64, 128, and 256
are supported for MatMulNBits op, got: 576", SmolLM2's per-channel weights, 2026-12-03)."""


def nbits_block_refusal(run: RunSpec) -> str:
    """Why a model's MatMulNBits layers cannot hold this run's blocks ('' when they can, or when
    int8 activations put the layers in the QDQ form, which takes per-channel weights)."""
    if run.act_bits == 8:
        return ""
    plan = rules.assign(run.workload.config().linear_layers(), run.workload.rules, run.bits, run.weight_block)
    odd = [p for p in plan if p.bits <= 8 and p.block not in MATMUL_NBITS_BLOCKS]
    if not odd:
        return ""
    first = odd[0]
    return (f"{len(odd)} layer(s) would be MatMulNBits with blocks ORT does not take: {first.layer.name}'s "
            f"{first.block} along K ({'per channel' if first.per_channel else 'asked'}); ORT Web's MatMulNBits "
            f"takes {', '.join(map(str, MATMUL_NBITS_BLOCKS))} (per-channel 8-bit weights run on ORT as its int8 QDQ "
            "form: --act-bits 8)")


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
        why = nbits_block_refusal(run) or self.refuse(run)
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
                         largest_constant=onnx_inventory.largest_constant(model.inventories),
                         graph_form=QDQ_FORM if run.act_bits == 8 else "")

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return placement.executed(engine, job, page)

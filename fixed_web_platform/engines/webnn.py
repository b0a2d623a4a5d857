"""The harness's own WebNN graphs: x @ transpose(dequantizeLinear(W_q, scale, zeroPoint)).

Which data types a run uses is decided in Python from the context's opSupportLimits() and the
precision mode (precision/webnn_precision.py); the page builds exactly that graph. What ran is
read from the dataType of the graph operand that held the stored weights.
"""

from __future__ import annotations

from ..harness.protocol import PageDataError, PageReply
from ..plan import RunSpec, TimingConfig
from ..precision.webnn_precision import OPERAND_BITS, WeightPlan, choose_weight_plan
from ..vocabulary import EngineName, Outcome, Platform
from ..workloads.matmul import prepare
from . import webnn_model
from .base import BrowserFacts, Engine, EngineJob, Executed, Refusal


class WebnnEngine(Engine):
    name = EngineName.HARNESS
    platform = Platform.WEBNN
    runner = "webnn"
    refusal_stages = ("graph building", "build")
    model_act_bits = (32, 8)

    async def job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
        context = await browser.webnn_context(run.webnn_device)
        if not context.get("available"):
            return Refusal(Outcome.UNSUPPORTED, f"WebNN {run.webnn_device}: {context.get('error', '')}")
        limits = context.get("limits") or {}
        plan = choose_weight_plan(run.bits, run.precision_mode, limits)
        details = {"op_support_limits": limits}
        if plan.unsupported:
            return Refusal(Outcome.UNSUPPORTED, plan.unsupported, details)
        prepared = prepare(run.workload, plan.bits_executed, run.block_size, run.seed, plan.unsigned)
        options = {
            "device_type": run.webnn_device,
            "weight_dtype": plan.weight_dtype,
            "scale_dtype": plan.scale_dtype,
            "zero_point_dtype": plan.zero_point_dtype,
            "matmul_dtype": plan.matmul_dtype,
            "block_size": prepared.block_size,
        }
        return EngineJob(
            spec=self.spec(run, prepared, timing, prepared.tensors, options),
            tensors=prepared.tensors, prepared=prepared,
            weight_format=prepared.weight_format, weight_dtype=plan.weight_dtype,
            scale_dtype=plan.scale_dtype, zero_point_dtype=plan.zero_point_dtype,
            note=plan.note, refusal_is_unsupported=plan.asks_unlisted,
            details=details | {"weight_plan": _plan_facts(plan)},
        )

    async def model_job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
        """A whole encoder as one WebNN graph (engines/webnn_model.py, web/engines/webnn_model.js)."""
        return await webnn_model.model_job(self, run, timing, browser)

    def model_interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return webnn_model.model_interpret(self, run, job, page)

    def interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        asked = job.weight_dtype
        held = page.weight_operand_dtype
        if not held:
            raise PageDataError("the reply has no weight_operand_dtype (the graph's weight operand)")
        compute = "f16" if job.spec.options.get("matmul_dtype") == "float16" else "f32"
        problem = "" if held == asked else f"the graph held weights as {held or '?'}, not {asked}"
        return Executed(OPERAND_BITS.get(held), compute, self.platform.value, problem)


def _plan_facts(plan: WeightPlan) -> dict[str, object]:
    return {"bits_executed": plan.bits_executed, "weight_dtype": plan.weight_dtype,
            "matmul_dtype": plan.matmul_dtype}

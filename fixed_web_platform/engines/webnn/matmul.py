"""The matmul kind as the harness's own WebNN graph (page: web/engines/webnn.js):
x @ transpose(dequantizeLinear(W_q, scale, zeroPoint)).

Which data types a run uses is decided in Python from the context's opSupportLimits() and the
precision mode (precision/webnn_precision.py); the page builds exactly that graph. What ran is
read from the dataType of the graph operand that held the stored weights.
"""

from __future__ import annotations

from ...harness.protocol import PageDataError, PageReply
from ...precision.webnn_precision import OPERAND_BITS, WeightPlan, choose_weight_plan
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.matmul import MatmulWorkload, prepare
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from . import context_limits


class WebnnMatmul(KindRunner):
    runner = "webnn"

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        limits = await context_limits(run, browser)
        if isinstance(limits, Refusal):
            return limits
        plan = choose_weight_plan(run.bits, run.precision_mode, limits)
        details = {"op_support_limits": limits}
        if plan.unsupported:
            return Refusal(Outcome.UNSUPPORTED, plan.unsupported, details)
        w = run.workload
        assert isinstance(w, MatmulWorkload)
        prepared = prepare(w, plan.bits_executed, run.block_size, run.seed, plan.unsigned)
        options = {
            "m": w.m, "k": w.k, "n": w.n,
            "device_type": run.webnn_device,
            "weight_dtype": plan.weight_dtype,
            "scale_dtype": plan.scale_dtype,
            "zero_point_dtype": plan.zero_point_dtype,
            "matmul_dtype": plan.matmul_dtype,
            "block_size": prepared.block_size,
        }
        return EngineJob(
            spec=self.spec(engine, run, timing, prepared.tensors, prepared.outputs, options, prepared.bits),
            tensors=prepared.tensors, prepared=prepared,
            weight_format=prepared.weight_format, weight_dtype=plan.weight_dtype,
            scale_dtype=plan.scale_dtype, zero_point_dtype=plan.zero_point_dtype,
            note=plan.note, refusal_is_unsupported=plan.asks_unlisted,
            details=details | {"weight_plan": _plan_facts(plan)},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        asked = job.weight_dtype
        held = page.weight_operand_dtype
        if not held:
            raise PageDataError("the reply has no weight_operand_dtype (the graph's weight operand)")
        compute = "f16" if job.spec.options.get("matmul_dtype") == "float16" else "f32"
        problem = "" if held == asked else f"the graph held weights as {held or '?'}, not {asked}"
        return Executed(OPERAND_BITS.get(held), compute, engine.platform.value, problem)


def _plan_facts(plan: WeightPlan) -> dict[str, object]:
    return {"bits_executed": plan.bits_executed, "weight_dtype": plan.weight_dtype,
            "matmul_dtype": plan.matmul_dtype}

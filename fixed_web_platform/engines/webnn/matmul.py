"""The matmul kind as the harness's own WebNN graph (page: web/engines/webnn.js): one linear layer
y = x @ W^T in a graph form of forms.py (``transpose`` by default: matmul(x, transpose(W)), W
dequantizeLinear(W_q, scale, zeroPoint) at 8/4/2 bits). With int8 activations x goes through a
calibrated quantizeLinear -> dequantizeLinear; the ``gemm_qdq`` form (the default for int8
activations with per-channel 8-bit weights) sends the output through int8 too.

Which data types a run uses is decided in Python from the context's opSupportLimits() and the
precision mode (precision/webnn_precision.py); the page builds exactly that graph. What ran is
read from the dataType of the graph operand that held the stored weights.
"""

from __future__ import annotations

from typing import Any

from ...page_protocol import PageDataError, PageReply
from ...precision.quantizers import QUANTIZERS
from ...precision.webnn_precision import (
    OPERAND_BITS,
    WeightPlan,
    choose_activation_plan,
    choose_weight_plan,
    holding_zeros,
)
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.matmul import MatmulWorkload, float_input, prepare
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from . import context_limits
from .forms import MATMUL_FORM, QDQ_FORM, choose_form


class WebnnMatmul(KindRunner):
    runner = "webnn"
    act_bits = (32, 8)
    weight_quants = tuple(QUANTIZERS)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        limits = await context_limits(run, browser)
        if isinstance(limits, Refusal):
            return limits
        details: dict[str, Any] = {"op_support_limits": limits}
        form, form_problem = choose_form(run, MATMUL_FORM)
        if form_problem:
            return Refusal(Outcome.UNSUPPORTED, form_problem, details)
        plan = choose_weight_plan(run.bits, run.precision_mode, limits)
        if plan.unsupported:
            return Refusal(Outcome.UNSUPPORTED, plan.unsupported, details)
        act_plan = choose_activation_plan(run.precision_mode, limits) if run.act_bits == 8 else None
        if act_plan is not None and act_plan.unsupported:
            return Refusal(Outcome.UNSUPPORTED, f"int8 activations: {act_plan.unsupported}", details)
        w = run.workload
        assert isinstance(w, MatmulWorkload)
        prepared = prepare(w, plan.bits_executed, run.weight_block, run.seed, plan.unsigned,
                           act_bits=run.act_bits, observer=run.observer, out_int8=form == QDQ_FORM,
                           weight_quant=run.weight_quant)
        plan = holding_zeros(plan, prepared.zero_point_dtype)
        # The page quantizes x itself (quantizeLinear in the graph): it gets x as float32.
        tensors = prepared.tensors | {"x": float_input(w, run.seed).tobytes()}
        options = {
            "m": w.m, "k": w.k, "n": w.n,
            "device_type": run.webnn_device,
            "graph_form": form,
            "weight_dtype": plan.weight_dtype,
            "scale_dtype": plan.scale_dtype,
            "zero_point_dtype": plan.zero_point_dtype,
            "matmul_dtype": plan.matmul_dtype,
            "block_size": prepared.block_size,
            "act": ({"scale": prepared.act_scale, "zero_point": prepared.act_zero_point}
                    if act_plan else None),
            "out": ({"scale": prepared.out_scale, "zero_point": prepared.out_zero_point}
                    if prepared.out_scale else None),
            "webnn_act": ({"dtype": act_plan.dtype, "zero_point_offset": act_plan.zero_point_offset}
                          if act_plan else None),
        }
        notes = [plan.note, act_plan.note if act_plan else ""]
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options, prepared.bits),
            tensors=tensors, prepared=prepared,
            weight_format=prepared.weight_format, weight_dtype=plan.weight_dtype,
            scale_dtype=plan.scale_dtype, zero_point_dtype=plan.zero_point_dtype,
            note="; ".join(filter(None, notes)),
            refusal_is_unsupported=plan.asks_unlisted or bool(act_plan and act_plan.asks_unlisted),
            details=details | {"weight_plan": _plan_facts(plan)}, graph_form=form,
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        asked = job.weight_dtype
        held = page.weight_operand_dtype
        if not held:
            raise PageDataError("the reply has no weight_operand_dtype (the graph's weight operand)")
        compute = "f16" if job.spec.options.get("matmul_dtype") == "float16" else "f32"
        problem = "" if held == asked else f"the graph held weights as {held or '?'}, not {asked}"
        act_plan = job.spec.options.get("webnn_act")
        if act_plan and not problem:
            quantized = page.layers[0].act_dtype if page.layers else ""
            if quantized != act_plan["dtype"]:
                problem = f"the graph quantized x to {quantized or 'nothing'}, not {act_plan['dtype']}"
        return Executed(OPERAND_BITS.get(held), compute, engine.platform.value, problem)


def _plan_facts(plan: WeightPlan) -> dict[str, object]:
    return {"bits_executed": plan.bits_executed, "weight_dtype": plan.weight_dtype,
            "matmul_dtype": plan.matmul_dtype}

"""The encoder kind as the harness's own WebNN graph (web/engines/webnn_model.js).

One MLGraph runs the whole forward pass: dequantizeLinear -> matmul for every quantized linear
layer, WebNN ops (gather, layerNormalization, gelu, softmax, matmul, reduceSum, reduceL2) for the
rest. Each layer's data types are decided here exactly as for the matmul sweep
(precision/webnn_precision.choose_weight_plan, per distinct layer bits): standard mode runs 4/2-bit
layers as 8-bit and says so; experimental mode asks for int4/int2 and the browser's own error is
the answer. The bytes are prepared at the bits each layer EXECUTES (a workload variant with one
exact-name rule per layer), so the float64 reference is the model the graph really holds; what
each layer was asked for stays in the report.

What ran is read from the page's facts: the dataType of each layer's stored weight operand.

Int8 activations (``--act-bits 8``): the input of each layer with a calibrated scale and zero
point (models/calibration.py: the 8- and 4-bit layers) goes through quantizeLinear ->
dequantizeLinear in int8 (uint8 with the zero point shifted by 128 where the context lists only
that; precision/webnn_precision.choose_activation_plan). The page reports the dataType of each
quantized input, and the float64 reference quantizes the same inputs the same way.

Graph form (how x @ W^T is written; see the page runner): ``FWP_WEBNN_GRAPH_FORM`` =
``pretransposed_gemm`` (default: W^T re-packed in the page, then gemm), ``pretransposed``,
``transpose`` (a transpose op in the graph) or ``gemm`` (bTranspose).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from typing import Any

from ...harness.protocol import PageDataError, PageReply
from ...models import rules as precision_rules
from ...precision.webnn_precision import (
    OPERAND_BITS,
    WeightPlan,
    choose_activation_plan,
    choose_weight_plan,
    listed,
)
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import PreparedModel, prepare_model
from ..base import (
    BrowserFacts,
    Engine,
    EngineJob,
    Executed,
    KindRunner,
    LayerExecuted,
    Refusal,
)
from . import context_limits

RUNNER = "webnn_model"
"""The page module (web/engines/webnn_model.js)."""
GRAPH_FORMS = ("pretransposed", "pretransposed_gemm", "transpose", "gemm", "blockrows", "blockrows_gemm")
DEFAULT_GRAPH_FORM = "pretransposed_gemm"
GRAPH_FORM_ENV = "FWP_WEBNN_GRAPH_FORM"


def graph_form() -> str:
    form = os.environ.get(GRAPH_FORM_ENV, "").strip() or DEFAULT_GRAPH_FORM
    if form not in GRAPH_FORMS:
        raise ValueError(f"{GRAPH_FORM_ENV}={form!r} is not one of {', '.join(GRAPH_FORMS)}")
    return form


def _lists(limits: dict[str, Any], dtype: str) -> bool:
    return (dtype in listed(limits, "dequantizeLinear", "input")
            and dtype in listed(limits, "dequantizeLinear", "zeroPoint"))


def _with_signedness(plan: WeightPlan, unsigned: bool, limits: dict[str, Any], why: str) -> WeightPlan:
    base = plan.weight_dtype.removeprefix("u")
    dtype = f"u{base}" if unsigned else base
    if dtype == plan.weight_dtype:
        return plan
    note = "; ".join(filter(None, [plan.note, why]))
    return dataclasses.replace(plan, weight_dtype=dtype, zero_point_dtype=dtype, note=note,
                               asks_unlisted=plan.asks_unlisted or not _lists(limits, dtype))


def unify_signedness(plans: dict[int, WeightPlan], limits: dict[str, Any]) -> dict[int, WeightPlan]:
    """One signedness for every quantized layer (the page holds one kind of zero point per
    model): the one the context lists for every layer's width, signed if both or neither."""
    integer = {b: p for b, p in plans.items() if p.weight_dtype not in ("float32", "float16")}
    if len({p.unsigned for p in integer.values()}) < 2:
        return plans
    widths = [p.weight_dtype.removeprefix("u") for p in integer.values()]
    signed_ok = all(_lists(limits, w) for w in widths)
    unsigned_ok = all(_lists(limits, "u" + w) for w in widths)
    unsigned = unsigned_ok and not signed_ok
    kind = "unsigned" if unsigned else "signed"
    why = f"every quantized layer stored as {kind} integers (one signedness per model graph)"
    return plans | {b: _with_signedness(p, unsigned, limits, why) for b, p in integer.items()}


def _layer_options(plan: WeightPlan, block_size: int) -> dict[str, Any]:
    return {"weight_dtype": plan.weight_dtype, "scale_dtype": plan.scale_dtype,
            "zero_point_dtype": plan.zero_point_dtype, "matmul_dtype": plan.matmul_dtype,
            "block_size": block_size if plan.bits_executed <= 8 else 0}


def _fallback_note(asked: list[precision_rules.LayerPrecision], layers: list[LayerExecuted],
                   plans: dict[int, dict[str, Any]]) -> str:
    """'24 layers ran as 8-bit (int4 is not a spec-guaranteed WebNN type; ...)', per asked bits."""
    parts = []
    for bits in sorted({a.bits for a in asked}, reverse=True):
        ran = Counter(layer.bits_executed for a, layer in zip(asked, layers) if a.bits == bits)
        for got, count in sorted(ran.items(), key=lambda kv: -(kv[0] or 0)):
            if got == bits:
                continue
            why = str((plans.get(str(bits)) or {}).get("note") or "")
            label = f"{got}-bit" if got is not None else "an unknown type"
            parts.append(f"{count} {bits}-bit layer{'s' if count != 1 else ''} ran as {label}"
                         + (f" ({why})" if why else ""))
    return "; ".join(parts)


class WebnnEncoder(KindRunner):
    """A whole encoder as one WebNN graph."""

    runner = RUNNER
    act_bits = (32, 8)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        limits = await context_limits(run, browser)
        if isinstance(limits, Refusal):
            return limits
        details: dict[str, Any] = {"op_support_limits": limits}
        workload = run.workload
        assert isinstance(workload, EncoderWorkload)
        asked = precision_rules.assign(workload.config().linear_layers(), workload.rules, run.bits, run.block_size)
        plans = {b: choose_weight_plan(b, run.precision_mode, limits) for b in sorted({p.bits for p in asked})}
        refused = [(b, p) for b, p in plans.items() if p.unsupported]
        if refused:
            b, p = refused[0]
            count = sum(1 for a in asked if a.bits == b)
            return Refusal(Outcome.UNSUPPORTED, f"{count} {b}-bit layer(s): {p.unsupported}", details)
        plans = unify_signedness(plans, limits)
        act_plan = choose_activation_plan(run.precision_mode, limits) if run.act_bits == 8 else None
        if act_plan is not None and act_plan.unsupported:
            return Refusal(Outcome.UNSUPPORTED, f"int8 activations: {act_plan.unsupported}", details)
        executed_bits = [plans[a.bits].bits_executed for a in asked]
        if any(e != a.bits for e, a in zip(executed_bits, asked)):
            # Bytes at the bits each layer executes: one exact-name rule per layer.
            exact = tuple(precision_rules.PrecisionRule(match=a.layer.name, bits=e, block_size=a.block_size)
                          for a, e in zip(asked, executed_bits))
            workload = dataclasses.replace(workload, rules=exact)
        unsigned = any(p.unsigned for p in plans.values() if p.weight_dtype not in ("float32", "float16"))
        prepared = prepare_model(workload, run.bits, run.block_size, run.seed, unsigned,
                                 act_bits=run.act_bits, observer=run.observer)
        layer_plans = [plans[a.bits] for a in asked]
        form = graph_form()
        options = {
            "device_type": run.webnn_device,
            "graph_form": form,
            "webnn_layers": [_layer_options(lp, held.precision.block_size)
                             for lp, held in zip(layer_plans, prepared.held.layers)],
            "webnn_act": ({"dtype": act_plan.dtype, "zero_point_offset": act_plan.zero_point_offset}
                          if act_plan else None),
        }
        tensors = prepared.tensors()
        formats = sorted({layer.held.weight_format for layer in prepared.held.layers})
        first = layer_plans[0]
        # The browser's own error answers a request for a type it does not list; the reason names it.
        unlisted_notes = [p.note for p in plans.values() if p.asks_unlisted and p.note]
        if act_plan is not None and act_plan.note:
            unlisted_notes.append(act_plan.note)
        signedness_notes = [n for p in plans.values() for n in p.note.split("; ") if "one signedness" in n]
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, prepared.options() | options),
            tensors=tensors, prepared=prepared,
            weight_format=formats[0] if len(formats) == 1 else "mixed:" + "+".join(formats),
            weight_dtype=first.weight_dtype, scale_dtype=first.scale_dtype, zero_point_dtype=first.zero_point_dtype,
            note="; ".join(dict.fromkeys(unlisted_notes + signedness_notes)),
            refusal_is_unsupported=(any(p.asks_unlisted for p in plans.values())
                                    or bool(act_plan and act_plan.asks_unlisted)),
            details=details | {"graph_form": form, "weight_plans": {
                str(b): {"bits_executed": p.bits_executed, "weight_dtype": p.weight_dtype,
                         "matmul_dtype": p.matmul_dtype, "note": p.note} for b, p in plans.items()}},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        prepared, workload = job.prepared, run.workload
        assert isinstance(prepared, PreparedModel) and isinstance(workload, EncoderWorkload)
        linears = job.spec.options.get("linears") or []
        wanted = job.spec.options.get("webnn_layers") or []
        act_plan = job.spec.options.get("webnn_act")
        if len(page.layers) != len(linears):
            raise PageDataError(f"the reply has {len(page.layers)} layers, the job has {len(linears)}")
        if not page.weight_operand_dtype:
            raise PageDataError("the reply has no weight_operand_dtype (the first layer's weight operand)")
        asked = precision_rules.assign(workload.config().linear_layers(), workload.rules, run.bits, run.block_size)
        layers: list[LayerExecuted] = []
        wrong: list[str] = []
        for linear, plan, reply, held in zip(linears, wanted, page.layers, prepared.held.layers):
            if reply.name != linear["name"]:
                raise PageDataError(f"layer {reply.name!r} is where the job has {linear['name']!r}")
            weight_bytes = reply.weight_bytes if reply.weight_bytes is not None else held.held.weight_bytes
            layers.append(LayerExecuted(reply.name, OPERAND_BITS.get(reply.weight_dtype), reply.weight_dtype,
                                        weight_bytes, None, reply.act_dtype))
            if reply.weight_dtype != plan["weight_dtype"]:
                wrong.append(f"{reply.name} held {reply.weight_dtype or '?'}, not {plan['weight_dtype']}")
            act_dtype = act_plan["dtype"] if act_plan and linear.get("act") else ""
            if reply.act_dtype != act_dtype:
                wrong.append(f"{reply.name} quantized its input to {reply.act_dtype or 'nothing'}, "
                             f"not {act_dtype or 'nothing'}")
        if page.layers[0].weight_dtype != page.weight_operand_dtype:
            raise PageDataError("weight_operand_dtype disagrees with the first layer's weight_dtype")
        problem = ""
        if wrong:
            problem = f"{len(wrong)} layer(s) held other types than asked: {wrong[0]}"
        by_flag = [layer.bits_executed for a, layer in zip(asked, layers) if a.rule == "--bits"]
        pool = by_flag or [layer.bits_executed for layer in layers]
        bits = Counter(pool).most_common(1)[0][0] if pool else None
        f16 = any(p.get("matmul_dtype") == "float16" for p in wanted)
        note = _fallback_note(asked, layers, job.details.get("weight_plans") or {})
        int8_inputs = sum(1 for linear in linears if linear.get("act"))
        if act_plan and int8_inputs < len(linears):
            note = "; ".join(filter(None, [note, f"int8 activations in {int8_inputs} of {len(linears)} linear "
                                                 "layers (the 8- and 4-bit ones; the others kept float inputs)"]))
        return Executed(bits, "f16" if f16 else "f32", engine.platform.value, problem, note, tuple(layers))

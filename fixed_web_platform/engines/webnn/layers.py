"""How the harness's WebNN model graphs (encoder.py, decoder.py) hold their linear layers: the data
types per layer, decided from the context's opSupportLimits() and the precision mode
(precision/webnn_precision.py), and what the page says each layer held.

Each distinct layer bits gets one plan (``choose_weight_plan``): standard mode runs 4/2-bit layers
as 8-bit and says so; experimental mode asks for int4/int2 and the browser's own error is the
answer. Every quantized layer of a graph has one signedness. The bytes are then prepared at the
bits each layer EXECUTES (``executed_rules``: one exact-name rule per layer), so the float64
reference is the model the graph really holds; what each layer was asked for stays in the report.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...models import rules as precision_rules
from ...models.calibration import MAX_FLOAT_CHANNELS
from ...models.quantized import HeldLayer
from ...page_protocol import PageDataError, PageReply
from ...precision.webnn_precision import (
    OPERAND_BITS,
    ActivationPlan,
    WeightPlan,
    choose_activation_plan,
    choose_weight_plan,
    holding_zeros,
    listed,
)
from ...run_spec import RunSpec
from ...vocabulary import Outcome, PrecisionMode
from ..base import BrowserFacts, EngineJob, Executed, LayerExecuted, Refusal
from . import context_limits
from .forms import QDQ_FORM, choose_form


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


def layer_options(plan: WeightPlan, layer: HeldLayer) -> dict[str, Any]:
    """One linear layer's data types for the page: ``plan``'s, with the zero points its bytes hold."""
    plan = holding_zeros(plan, layer.held.zero_point_dtype)
    return {"weight_dtype": plan.weight_dtype, "scale_dtype": plan.scale_dtype,
            "zero_point_dtype": plan.zero_point_dtype, "matmul_dtype": plan.matmul_dtype,
            "block_size": layer.precision.block if plan.bits_executed <= 8 else 0}


def fallback_note(asked: list[precision_rules.LayerPrecision], layers: list[LayerExecuted],
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


@dataclass(frozen=True)
class LayerPlans:
    """The data types of every linear layer of one graph, and the rules that hold its bytes."""

    asked: tuple[precision_rules.LayerPrecision, ...]
    plans: dict[int, WeightPlan]
    """Per asked bits."""
    executed_rules: tuple[precision_rules.PrecisionRule, ...] | None
    """One exact-name rule per layer at the bits it executes; None when every layer runs as asked."""

    @property
    def per_layer(self) -> list[WeightPlan]:
        return [self.plans[a.bits] for a in self.asked]

    @property
    def unsigned(self) -> bool:
        return any(p.unsigned for p in self.plans.values() if p.weight_dtype not in ("float32", "float16"))

    @property
    def asks_unlisted(self) -> bool:
        return any(p.asks_unlisted for p in self.plans.values())

    def notes(self) -> list[str]:
        """Why the job differs from the literal request: types asked unlisted, one signedness."""
        unlisted = [p.note for p in self.plans.values() if p.asks_unlisted and p.note]
        signedness = [n for p in self.plans.values() for n in p.note.split("; ") if "one signedness" in n]
        return list(dict.fromkeys(unlisted + signedness))

    def job_fields(self, held: Sequence[Any]) -> dict[str, Any]:
        """The EngineJob fields every WebNN model job fills alike from its plans and held layers
        (``held``: models.quantized.HeldLayer)."""
        first = holding_zeros(self.per_layer[0], held[0].held.zero_point_dtype)
        formats = sorted({layer.held.weight_format for layer in held})
        return {"weight_format": formats[0] if len(formats) == 1 else "mixed:" + "+".join(formats),
                "weight_dtype": first.weight_dtype, "scale_dtype": first.scale_dtype,
                "zero_point_dtype": first.zero_point_dtype,
                "layers_asked": self.asked if self.executed_rules is not None else ()}

    def details(self) -> dict[str, Any]:
        return {str(b): {"bits_executed": p.bits_executed, "weight_dtype": p.weight_dtype,
                         "matmul_dtype": p.matmul_dtype, "note": p.note} for b, p in self.plans.items()}


def plan_layers(asked: Sequence[precision_rules.LayerPrecision], run: RunSpec,
                limits: dict[str, Any]) -> LayerPlans | Refusal:
    """Each layer's data types for ``run`` in this context, or the refusal of the first bits
    this mode cannot attempt."""
    plans = {b: choose_weight_plan(b, run.precision_mode, limits) for b in sorted({p.bits for p in asked})}
    refused = [(b, p) for b, p in plans.items() if p.unsupported]
    if refused:
        b, p = refused[0]
        count = sum(1 for a in asked if a.bits == b)
        return Refusal(Outcome.UNSUPPORTED, f"{count} {b}-bit layer(s): {p.unsupported}",
                       {"op_support_limits": limits})
    plans = unify_signedness(plans, limits)
    executed = [plans[a.bits].bits_executed for a in asked]
    exact = None
    if any(e != a.bits for e, a in zip(executed, asked)):
        exact = tuple(precision_rules.PrecisionRule(match=a.layer.name, bits=e, block_size=a.block_size)
                      for a, e in zip(asked, executed))
    return LayerPlans(tuple(asked), plans, exact)


def read_layers(linears: Sequence[dict[str, Any]], wanted: Sequence[dict[str, Any]], page: PageReply,
                held_bytes: Sequence[int], act_dtypes: Sequence[str] | None = None
                ) -> tuple[list[LayerExecuted], str]:
    """What each linear layer held, from the page's reply (the dataType of its stored weight
    operand), and a problem when a layer held another type than the job asked for."""
    if len(page.layers) != len(linears):
        raise PageDataError(f"the reply has {len(page.layers)} layers, the job has {len(linears)}")
    if not page.weight_operand_dtype:
        raise PageDataError("the reply has no weight_operand_dtype (the first layer's weight operand)")
    if page.layers[0].weight_dtype != page.weight_operand_dtype:
        raise PageDataError("weight_operand_dtype disagrees with the first layer's weight_dtype")
    act_dtypes = act_dtypes or [""] * len(linears)
    layers: list[LayerExecuted] = []
    wrong: list[str] = []
    for linear, plan, reply, held, act_dtype in zip(linears, wanted, page.layers, held_bytes, act_dtypes):
        if reply.name != linear["name"]:
            raise PageDataError(f"layer {reply.name!r} is where the job has {linear['name']!r}")
        weight_bytes = reply.weight_bytes if reply.weight_bytes is not None else held
        layers.append(LayerExecuted(reply.name, OPERAND_BITS.get(reply.weight_dtype), reply.weight_dtype,
                                    weight_bytes, None, reply.act_dtype))
        if reply.weight_dtype != plan["weight_dtype"]:
            wrong.append(f"{reply.name} held {reply.weight_dtype or '?'}, not {plan['weight_dtype']}")
        if reply.act_dtype != act_dtype:
            wrong.append(f"{reply.name} quantized its input to {reply.act_dtype or 'nothing'}, "
                         f"not {act_dtype or 'nothing'}")
    problem = f"{len(wrong)} layer(s) held other types than asked: {wrong[0]}" if wrong else ""
    return layers, problem


def executed(job: EngineJob, page: PageReply, held: Sequence[Any], platform: str) -> Executed:
    """What a WebNN model graph ran, from the reply: each layer's type (and its input's, with int8
    activations), the bits most layers ran at, the note on layers run at other bits than asked
    and on which layers took int8 inputs and outputs."""
    options = job.spec.options
    linears = options.get("linears") or []
    wanted = options.get("webnn_layers") or []
    act_plan = options.get("webnn_act")
    act_dtypes = [act_plan["dtype"] if act_plan and linear.get("act") else "" for linear in linears]
    asked = job.layer_plan
    layers, problem = read_layers(linears, wanted, page, [h.held.weight_bytes for h in held], act_dtypes)
    f16 = any(p.get("matmul_dtype") == "float16" for p in wanted)
    notes = [fallback_note(asked, layers, job.details.get("weight_plans") or {})]
    int8_inputs = sum(1 for linear in linears if linear.get("act"))
    if act_plan and int8_inputs < len(linears):
        notes.append(f"int8 activations in {int8_inputs} of {len(linears)} linear layers (the 8- and 4-bit ones; "
                     "the others kept float inputs)")
    if job.graph_form == QDQ_FORM:
        outs = [linear["out"] for linear in linears if linear.get("out")]
        split = sum(1 for out in outs if out.get("float_channels"))
        held_snr = [o.sqnr_db for o in getattr(job.prepared, "out_quant", ()) if o]
        snr = f" (calibrated signal-to-noise at least {min(held_snr):.0f} dB)" if held_snr else ""
        notes.append(f"int8 outputs (the fused form) in {len(outs)} of {len(linears)} linear layers, {split} of them "
                     f"with 1-{MAX_FLOAT_CHANNELS} outlier output channels computed in float apart{snr}")
    return Executed(run_bits(asked, layers), "f16" if f16 else "f32", platform, problem,
                    "; ".join(filter(None, notes)), tuple(layers))


def run_bits(asked: Sequence[precision_rules.LayerPrecision], layers: Sequence[LayerExecuted]) -> int | None:
    """The bits most layers set by --bits executed at (all layers when rules set every one)."""
    by_flag = [layer.bits_executed for a, layer in zip(asked, layers) if a.rule == "--bits"]
    pool = by_flag or [layer.bits_executed for layer in layers]
    return Counter(pool).most_common(1)[0][0] if pool else None


@dataclass(frozen=True)
class ModelPlan:
    """What a WebNN model job decides before its bytes are prepared: the context's limits, the
    graph form, each layer's data types, and the workload whose rules hold the executed bits."""

    limits: dict[str, Any]
    form: str
    layers: LayerPlans
    workload: Any
    """The run's workload, with one exact-name rule per layer where layers run at other bits."""
    act: ActivationPlan | None = None
    """int8 activations: their data type in this context (None: float activations)."""
    note: str = ""
    """Layers the plan holds at other bits than the workload's rules (``over_budget``)."""

    def graph_options(self, run: RunSpec, plan: Sequence[precision_rules.LayerPrecision],
                      held: Sequence[Any]) -> dict[str, Any]:
        """The page options every WebNN model graph reads alike: the context's device, the form,
        the linear layers (``plan``: the prepared plan) and each one's data types, and the int8
        activations' type."""
        return {"device_type": run.webnn_device, "graph_form": self.form,
                "linears": [{"name": p.layer.name, "k": p.layer.k, "n": p.layer.n, "bits": p.bits} for p in plan],
                "webnn_layers": [layer_options(lp, h) for lp, h in zip(self.layers.per_layer, held)],
                "webnn_act": ({"dtype": self.act.dtype, "zero_point_offset": self.act.zero_point_offset}
                              if self.act else None)}

    def job_fields(self, held: Sequence[Any]) -> dict[str, Any]:
        """The EngineJob fields every WebNN model job fills alike (``held``: the prepared layers):
        why the job differs from the literal request (the browser's own error answers a type it
        does not list; the reason names it)."""
        notes = [self.note, *self.layers.notes(), *([self.act.note] if self.act and self.act.note else [])]
        return {"note": "; ".join(dict.fromkeys(filter(None, notes))),
                "refusal_is_unsupported": self.layers.asks_unlisted or bool(self.act and self.act.asks_unlisted),
                "details": {"op_support_limits": self.limits, "weight_plans": self.layers.details()},
                "graph_form": self.form, **self.layers.job_fields(held)}


def over_budget(plan: Sequence[precision_rules.LayerPrecision], budget: int) -> tuple[tuple[str, ...], str]:
    """The 8/4/2-bit layers whose weights alone pass ``budget`` quantized elements (what one graph
    of the page may hold), and what the row says of holding them in float32 ('' for none)."""
    big = [p for p in plan if p.bits <= 8 and p.layer.k * p.layer.n > budget]
    if not big:
        return (), ""
    first = big[0]
    return tuple(p.layer.name for p in big), (
        f"{len(big)} layer{'s' if len(big) > 1 else ''} held in float32 ({first.layer.name}'s {first.bits}-bit "
        f"weights, {first.layer.k * first.layer.n:,} elements, pass the {budget:,} one WebNN graph may hold: "
        "Chromium's LiteRT backend crashed the tab building such a graph; --experimental-precision tries it)")


async def plan_model(run: RunSpec, browser: BrowserFacts, default_form: str,
                     quantized_per_graph: int | None = None) -> ModelPlan | Refusal:
    """The WebNN context's limits, the graph form and each linear layer's data types for a model
    run (its workload has ``config()`` and ``rules``), or why it cannot be attempted. In standard
    mode a layer whose quantized weights alone pass ``quantized_per_graph`` is held in float32."""
    limits = await context_limits(run, browser)
    if isinstance(limits, Refusal):
        return limits
    form, form_problem = choose_form(run, default_form)
    if form_problem:
        return Refusal(Outcome.UNSUPPORTED, form_problem, {"op_support_limits": limits})
    act = choose_activation_plan(run.precision_mode, limits) if run.act_bits == 8 else None
    if act is not None and act.unsupported:
        return Refusal(Outcome.UNSUPPORTED, f"int8 activations: {act.unsupported}", {"op_support_limits": limits})
    workload, note = run.workload, ""
    if quantized_per_graph is not None and run.precision_mode is PrecisionMode.STANDARD:
        asked = precision_rules.assign(workload.config().linear_layers(), workload.rules, run.bits, run.weight_block)
        big, note = over_budget(asked, quantized_per_graph)
        if big:
            workload = dataclasses.replace(workload, rules=precision_rules.float32_first(big, workload.rules))
    if act is not None and form == QDQ_FORM and hasattr(workload, "int8_outputs_held"):
        workload = workload.int8_outputs_held(run.bits, run.weight_block, run.seed, run.observer)
    asked = precision_rules.assign(workload.config().linear_layers(), workload.rules, run.bits, run.weight_block)
    plans = plan_layers(asked, run, limits)
    if isinstance(plans, Refusal):
        return plans
    if plans.executed_rules is not None:
        workload = dataclasses.replace(workload, rules=plans.executed_rules)
    return ModelPlan(limits, form, plans, workload, act, note)

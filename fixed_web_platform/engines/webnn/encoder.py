"""The encoder kind as the harness's own WebNN graph (web/engines/webnn_model.js).

One MLGraph runs the whole forward pass: dequantizeLinear -> matmul for every quantized linear
layer, WebNN ops (gather, layerNormalization, gelu, softmax, matmul, reduceSum, reduceL2) for the
rest. Each layer's data types are decided as for the matmul sweep, per distinct layer bits
(layers.py, shared with the decoder): standard mode runs 4/2-bit layers as 8-bit and says so;
experimental mode asks for int4/int2 and the browser's own error is the answer. The bytes are
prepared at the bits each layer EXECUTES, so the float64 reference is the model the graph really
holds; what each layer was asked for stays in the report (layers.csv).

What ran is read from the page's facts: the dataType of each layer's stored weight operand.

Int8 activations (``--act-bits 8``): the input of each layer with a calibrated scale and zero
point (models/calibration.py: the 8- and 4-bit layers) goes through quantizeLinear ->
dequantizeLinear in int8 (uint8 with the zero point shifted by 128 where the context lists only
that; precision/webnn_precision.choose_activation_plan). The page reports the dataType of each
quantized input, and the float64 reference quantizes the same inputs the same way.

Graph form (how x @ W^T is written): forms.py. ``pretransposed_gemm`` by default; int8 activations
with per-channel 8-bit weights build ``gemm_qdq``, the form the browser runs as int8 kernels: each
such layer's output gets a calibrated quantizeLinear -> dequantizeLinear too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...models.calibration import MAX_FLOAT_CHANNELS, OUT_INT8_MIN_SQNR_DB
from ...page_protocol import PageReply
from ...precision.quantizers import QUANTIZERS
from ...precision.webnn_precision import choose_activation_plan
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import PreparedModel, prepare_model
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from .forms import MODEL_FORM, QDQ_FORM
from .layers import executed, layer_options, plan_model
from .lower import SUPPORTS, lowered

RUNNER = "webnn_model"
"""The page module (web/engines/webnn_model.js)."""


class WebnnEncoder(KindRunner):
    """A whole encoder as one WebNN graph."""

    runner = RUNNER
    supports = SUPPORTS
    weight_quants = tuple(QUANTIZERS)
    act_bits = (32, 8)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        plan = await plan_model(run, browser, MODEL_FORM)
        if isinstance(plan, Refusal):
            return plan
        limits, form, layer_plans, workload = plan.limits, plan.form, plan.layers, plan.workload
        assert isinstance(workload, EncoderWorkload)
        details: dict[str, Any] = {"op_support_limits": limits}
        act_plan = choose_activation_plan(run.precision_mode, limits) if run.act_bits == 8 else None
        if act_plan is not None and act_plan.unsupported:
            return Refusal(Outcome.UNSUPPORTED, f"int8 activations: {act_plan.unsupported}", details)
        prepared = prepare_model(workload, run.bits, run.weight_block, run.seed, layer_plans.unsigned,
                                 act_bits=run.act_bits, observer=run.observer, out_int8=form == QDQ_FORM,
                                 weight_quant=run.weight_quant)
        per_layer = layer_plans.per_layer
        batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
        graph = workload.architecture().graph(prepared.config, batch=batch, seq=seq)
        options = {
            "ops": lowered(graph.passes["forward"], [p.layer.name for p in prepared.plan]),
            "result": "pooled",
            "device_type": run.webnn_device,
            "graph_form": form,
            "webnn_layers": [layer_options(lp, held) for lp, held in zip(per_layer, prepared.held.layers)],
            "webnn_act": ({"dtype": act_plan.dtype, "zero_point_offset": act_plan.zero_point_offset}
                          if act_plan else None),
        }
        tensors = prepared.tensors()
        # The browser's own error answers a request for a type it does not list; the reason names it.
        notes = layer_plans.notes()
        if act_plan is not None and act_plan.note:
            notes.append(act_plan.note)
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, prepared.options() | options),
            tensors=tensors, prepared=prepared,
            note="; ".join(dict.fromkeys(notes)),
            refusal_is_unsupported=layer_plans.asks_unlisted or bool(act_plan and act_plan.asks_unlisted),
            details=details | {"weight_plans": layer_plans.details()},
            graph_form=form, **layer_plans.job_fields(prepared.held.layers),
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        prepared = job.prepared
        assert isinstance(prepared, PreparedModel)
        linears = job.spec.options.get("linears") or []
        act_plan = job.spec.options.get("webnn_act")
        act_dtypes = [act_plan["dtype"] if act_plan and linear.get("act") else "" for linear in linears]
        ran = executed(job, page, prepared.held.layers, engine.platform.value, act_dtypes)
        int8_inputs = sum(1 for linear in linears if linear.get("act"))
        if act_plan and int8_inputs < len(linears):
            ran = dataclasses.replace(ran, note="; ".join(filter(None, [
                ran.note, f"int8 activations in {int8_inputs} of {len(linears)} linear layers (the 8- and 4-bit "
                          "ones; the others kept float inputs)"])))
        if job.graph_form == QDQ_FORM:
            outs = [linear["out"] for linear in linears if linear.get("out")]
            split = sum(1 for out in outs if out.get("float_channels"))
            ran = dataclasses.replace(ran, note="; ".join(filter(None, [
                ran.note, f"int8 outputs (the fused form) in {len(outs)} of {len(linears)} linear layers, "
                          f"{split} of them with 1-{MAX_FLOAT_CHANNELS} outlier output channels computed in float "
                          f"apart (calibrated signal-to-noise at least {OUT_INT8_MIN_SQNR_DB:g} dB)"])))
        return ran

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

from ...page_protocol import PageReply
from ...precision.quantizers import QUANTIZERS
from ...run_spec import RunSpec, TimingConfig
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import PreparedModel, prepare_model
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from .forms import MODEL_FORM, QDQ_FORM
from .layers import executed, plan_model
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
        workload = plan.workload
        assert isinstance(workload, EncoderWorkload)
        prepared = prepare_model(workload, run.bits, run.weight_block, run.seed, plan.layers.unsigned,
                                 act_bits=run.act_bits, observer=run.observer, out_int8=plan.form == QDQ_FORM,
                                 weight_quant=run.weight_quant)
        batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
        graph = workload.architecture().graph(prepared.config, batch=batch, seq=seq)
        shared = plan.graph_options(run, prepared.plan, prepared.held.layers)
        shared.pop("linears")  # the prepared model's, with each layer's int8 parameters
        options = prepared.options() | {
            "ops": lowered(graph.passes["forward"], [p.layer.name for p in prepared.plan]),
            "result": "pooled",
        } | shared
        tensors = prepared.tensors()
        return EngineJob(spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
                         tensors=tensors, prepared=prepared, **plan.job_fields(prepared.held.layers))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        assert isinstance(job.prepared, PreparedModel)
        return executed(job, page, job.prepared.held.layers, engine.platform.value)

"""The encoder kind on ONNX Runtime Web (page: web/engines/ort_model.js): the encoder exported to
ONNX with every linear layer rewritten to the harness's bytes for it (onnx_encoder.py); ORT's
placement log says where each layer's node ran, reported per layer as
``layers[i].weight_dtype = '<node weights>@<provider>'`` (e.g. 'MatMulNBits4@wasm').

Int8 activations (``--act-bits 8`` with 8-bit per-channel weights): the linear layers in the int8
QDQ form (onnx_linears.qdq_nodes) with the harness's calibrated input and output parameters, the
numbers of the harness's WebNN ``gemm_qdq`` form, judged on the same references.
"""

from __future__ import annotations

import asyncio

from ...formats import onnx_inventory
from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import PreparedModel, prepare_model
from ..base import (
    BrowserFacts,
    Engine,
    EngineJob,
    Executed,
    Refusal,
)
from . import QDQ_FORM, OrtKindRunner, OrtWebEngine, holding, onnx_encoder, placement, torch_ops


class OrtEncoder(OrtKindRunner):
    runner = "ort_model"
    supports = torch_ops.SUPPORTS
    act_bits = (32, 8)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        """The encoder exported to ONNX (cached), every linear layer rewritten to the harness's
        bytes for it (onnx_encoder.py); the page runs the whole graph with ORT."""
        assert isinstance(engine, OrtWebEngine)
        workload = run.workload
        assert isinstance(workload, EncoderWorkload)

        qdq = run.act_bits == 8

        def build() -> tuple[PreparedModel, onnx_encoder.EncoderModel]:
            prepared = prepare_model(workload, run.bits, run.weight_block, run.seed, **holding(run))
            return prepared, onnx_encoder.encoder_model(prepared)

        prepared, encoder = await asyncio.to_thread(build)  # an export takes seconds
        b = prepared.batches
        tensors = prepared.input_tensors() | {"onnx_model": encoder.data}
        options = {
            **engine.session_options(run),
            "onnx_model": "onnx_model",
            "input_dtype": "int64",
            "output": onnx_encoder.OUTPUT_NAME,
            "dims": {onnx_encoder.BATCH_DIM: int(b.input_ids.shape[1]),
                     onnx_encoder.SEQUENCE_DIM: int(b.input_ids.shape[2])},
            "ort_layers": [layer.to_json() for layer in encoder.layers],
        }
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, prepared.options() | options)
        first = encoder.layers[0]
        nbits = first.op in ("MatMulNBits", "Gemm")
        kinds = sorted({layer.weight_dtype for layer in encoder.layers})
        return EngineJob(
            spec=spec, tensors=tensors, prepared=prepared,
            weight_format=kinds[0] if len(kinds) == 1 else "mixed:" + "+".join(kinds),
            weight_dtype=prepared.held.layers[0].held.weight_dtype,
            scale_dtype="float32" if nbits else "",
            zero_point_dtype=prepared.held.layers[0].held.zero_point_dtype if nbits else "",
            details={"onnx_layers": onnx_encoder.summary(encoder.layers), "model_bytes": len(encoder.data),
                     "onnx_opset": onnx_encoder.OPSET,
                     "onnx_inventory": encoder.inventories},
            graph_form=QDQ_FORM if qdq else "",
            largest_constant=onnx_inventory.largest_constant(encoder.inventories),
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return placement.executed(engine, job, page)

"""The decoder kind on ONNX Runtime Web (page: web/engines/ort_decoder.js): the model exported
with its KV cache (onnx_decoder.py: a fixed-length cache, greedy id in the graph), every linear
layer rewritten to the harness's bytes for it (MatMulNBits for 8/4/2 bits). WebNN runs one
session per pass with every dimension fixed; WebGPU and wasm one session with free dimensions.
Where each layer's node ran comes from ORT's placement log (placement.py).
"""

from __future__ import annotations

import asyncio

from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome, Platform
from ...workloads.decoder import DecoderWorkload
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import OrtKindRunner, OrtWebEngine, onnx_decoder, placement
from .onnx_linears import held_fields, summary

RUNNER = "ort_decoder"
"""The page module (web/engines/ort_decoder.js)."""
MAX_MODEL_BYTES = 2**31 - 2**26
"""One ONNX file (protobuf) holds less than 2 GiB; the export keeps every float32 weight in it
(an untied head copy included), with some room for the graph."""


class OrtDecoder(OrtKindRunner):
    runner = RUNNER

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        assert isinstance(engine, OrtWebEngine)
        workload = run.workload
        assert isinstance(workload, DecoderWorkload)
        cfg = workload.config()
        fp32_bytes = 4 * (cfg.parameters + (cfg.vocab * cfg.hidden if cfg.tied else 0))
        if fp32_bytes > MAX_MODEL_BYTES:
            return Refusal(Outcome.UNSUPPORTED, f"the float32 export of {workload.name} would hold "
                           f"{fp32_bytes / 2**30:.1f} GiB of weights; one ONNX file holds under 2 GiB "
                           "(external data files are not built here)")

        def build() -> tuple[PreparedDecoder, onnx_decoder.DecoderModel]:
            # unsigned: MatMulNBits stores values and zero points shifted by 2^(bits-1)
            prepared = prepare_decoder(workload, run.bits, run.weight_block, run.seed, unsigned=True,
                                       weight_quant=run.weight_quant)
            return prepared, onnx_decoder.decoder_model(prepared)

        prepared, model = await asyncio.to_thread(build)  # an export takes seconds to a minute
        texts, eval_len = prepared.tokens.eval_ids.shape
        tensors = prepared.input_tensors() | {"onnx_model": model.data}
        static = engine.platform is Platform.WEBNN
        options = {
            **engine.session_options(run),
            "onnx_model": "onnx_model",
            "model": prepared.config.to_json() | {"name": workload.name},
            "context": prepared.context,
            "prompt": {"tensor": "prompt_ids", "rows": workload.prompt_len},
            "new_tokens": workload.new_tokens,
            "score": {"tensor": "eval_ids", "texts": texts, "rows": eval_len},
            "static_shapes": static,
            "weight_bytes": model.weight_bytes,
            "ort_layers": [layer.to_json() for layer in model.layers],
        }
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
            tensors=tensors, prepared=prepared,
            **held_fields(model.layers, (layer.held for layer in prepared.held.layers)),
            details={"onnx_layers": summary(model.layers), "model_bytes": len(model.data),
                     "onnx_opset": onnx_decoder.OPSET, "onnx_export": "torch.onnx.export (dynamo), static KV cache",
                     "sessions": "one per pass, static shapes" if static else "one, free dimensions"},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return placement.executed(engine, job, page)

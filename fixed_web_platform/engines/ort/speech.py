"""The speech kind (Whisper) on ONNX Runtime Web (page: web/engines/ort_speech.js): the encoder
(with every decoder layer's cross-attention keys and values) and a decoder step with a fixed-length
KV cache, exported per model (onnx_speech.py), every linear layer rewritten to the harness's bytes
for it (MatMulNBits for 8/4/2 bits). The page feeds Python's log-mel features (ORT has no front
end: the row's front-end figures are blank). WebNN runs one decoder session per pass shape with
every dimension fixed; WebGPU and wasm one session with free dimensions. Where each layer's node
ran comes from ORT's placement log (placement.py).
"""

from __future__ import annotations

import asyncio
import dataclasses

from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Platform
from ...workloads.speech import SpeechWorkload
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import OrtKindRunner, OrtWebEngine, onnx_speech, placement
from .onnx_linears import held_fields, summary

RUNNER = "ort_speech"


class OrtSpeech(OrtKindRunner):
    runner = RUNNER

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        assert isinstance(engine, OrtWebEngine)
        workload = run.workload
        assert isinstance(workload, SpeechWorkload)

        def build() -> tuple[PreparedSpeech, onnx_speech.SpeechModel]:
            prepared = prepare_speech(workload, run.bits, run.weight_block, run.seed, unsigned=True,
                                      weight_quant=run.weight_quant)
            prepared = dataclasses.replace(prepared, front_end_on_device=False)
            return prepared, onnx_speech.speech_model(prepared)

        prepared, model = await asyncio.to_thread(build)  # an export takes seconds to a minute
        cfg = prepared.config
        tensors = {"features": prepared.features_tensor(), **prepared.suppress_tensors(),
                   "encoder_model": model.encoder, "decoder_model": model.decoder}
        options = {
            **engine.session_options(run),
            "model": cfg.to_json() | {"name": workload.name, "head_dim": cfg.head_dim},
            "clips": len(prepared.pcm),
            "context": len(cfg.prompt) + workload.max_tokens,
            "prompt": {"tensor": "prompt_ids", "rows": len(cfg.prompt)},
            "max_tokens": workload.max_tokens,
            "eot": cfg.eot,
            "static_shapes": engine.platform is Platform.WEBNN,
            "weight_bytes": model.weight_bytes,
            "ort_layers": [layer.to_json() for layer in model.layers],
            "encoder_layers": list(model.encoder_layers),
        }
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
            tensors=tensors, prepared=prepared,
            **held_fields(model.layers, (layer.held for layer in prepared.held.layers)),
            details={"onnx_layers": summary(model.layers), "model_bytes": len(model.encoder) + len(model.decoder),
                     "onnx_opset": onnx_speech.OPSET,
                     "onnx_export": "torch.onnx.export (dynamo): encoder + cross keys/values, decoder step with a "
                                    "static KV cache",
                     "sessions": "decoder: one per pass, static shapes" if engine.platform is Platform.WEBNN
                     else "one per graph, free dimensions"},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        return placement.executed(engine, job, page)

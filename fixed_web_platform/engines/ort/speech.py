"""The speech kind (Whisper) on ONNX Runtime Web (page: web/engines/ort_speech.js): the encoder
(with every decoder layer's cross-attention keys and values) and a decoder step with a fixed-length
KV cache, exported per model (onnx_speech.py), every linear layer rewritten to the harness's bytes
for it (MatMulNBits for 8/4/2 bits). The page feeds Python's log-mel features (ORT has no front
end: the row's front-end figures are blank). WebNN runs one decoder session per pass shape with
every dimension fixed; WebGPU and wasm one session with free dimensions. Where each layer's node
ran comes from ORT's placement log (placement.py). Int8 activations (``--act-bits 8`` with 8-bit
per-channel weights): every linear layer in ORT's int8 QDQ form with the parameters of the
harness's WebNN ``gemm_qdq`` graphs, judged on the same float64 Whisper.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...run_spec import RunSpec
from ...vocabulary import Platform
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from . import OrtWebEngine, held_workload, holding, may_run_dp4a, onnx_speech
from .loop import OrtLoopRunner

RUNNER = "ort_speech"


class OrtSpeech(OrtLoopRunner):
    runner = RUNNER
    lowered_passes = ("encoder", "decode")
    act_bits = (32, 8)

    def refuse(self, run: RunSpec) -> str:
        if may_run_dp4a(run):
            return ("accuracy_level 4 on ORT's native WebGPU: its MatMulNBits may quantize the activations to int8 "
                    "(DP4A), and the speech page does not read which layers did, so the stage-by-stage kernel check "
                    "would have no reference of what ran (encoders and decoders read it)")
        return ""

    def build(self, run: RunSpec) -> tuple[PreparedSpeech, onnx_speech.SpeechModel]:
        prepared = prepare_speech(held_workload(run), run.bits, run.weight_block, run.seed, **holding(run))
        prepared = dataclasses.replace(prepared, front_end_on_device=False)
        return prepared, onnx_speech.speech_model(prepared)

    def page(self, engine: OrtWebEngine, prepared: PreparedSpeech,
             model: onnx_speech.SpeechModel) -> tuple[dict[str, bytes], dict[str, Any], dict[str, Any]]:
        cfg, workload = prepared.config, prepared.workload
        static = engine.platform is Platform.WEBNN
        tensors = {"features": prepared.features_tensor(), **prepared.suppress_tensors(),
                   "encoder_model": model.encoder, "decoder_model": model.decoder}
        options = {
            "model": cfg.to_json() | {"name": workload.name, "head_dim": cfg.head_dim},
            "clips": len(prepared.pcm),
            "context": len(cfg.prompt) + workload.max_tokens,
            "prompt": {"tensor": "prompt_ids", "rows": len(cfg.prompt)},
            "max_tokens": workload.max_tokens,
            "eot": cfg.eot,
            "static_shapes": static,
            "encoder_layers": list(model.encoder_layers),
        }
        details = {"model_bytes": len(model.encoder) + len(model.decoder), "onnx_opset": onnx_speech.OPSET,
                   "onnx_export": "torch.onnx.export (dynamo): encoder + cross keys/values, decoder step with a "
                                  "static KV cache",
                   "sessions": "decoder: one per pass, static shapes" if static else "one per graph, free dimensions"}
        return tensors, options, details

"""The decoder kind on ONNX Runtime Web (page: web/engines/ort_decoder.js): the model exported
with its KV cache (onnx_decoder.py: a fixed-length cache, greedy id in the graph), every linear
layer rewritten to the harness's bytes for it (MatMulNBits for 8/4/2 bits). WebNN runs one
session per pass with every dimension fixed; WebGPU and wasm one session with free dimensions.

Int8 activations (``--act-bits 8`` with 8-bit per-channel weights): the linear layers in ORT's
int8 QDQ form with the calibrated input and output parameters of the harness's WebNN ``gemm_qdq``
graphs (onnx_linears.qdq_nodes), judged on the same float64 decoder with int8 activations.
Where each layer's node ran comes from ORT's placement log (placement.py).
"""

from __future__ import annotations

from typing import Any

from ...models import rules
from ...run_spec import RunSpec
from ...vocabulary import Platform, PrecisionMode
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from ..webnn.decoder import QUANTIZED_PER_GRAPH
from . import OrtWebEngine, held_workload, holding, onnx_decoder
from .loop import OrtLoopRunner

RUNNER = "ort_decoder"
"""The page module (web/engines/ort_decoder.js)."""
MAX_MODEL_BYTES = 2**31 - 2**26
"""One ONNX file (protobuf) holds less than 2 GiB; the export keeps every float32 weight in it
(an untied head copy included), with some room for the graph."""


class OrtDecoder(OrtLoopRunner):
    runner = RUNNER
    act_bits = (32, 8)

    def refuse(self, run: RunSpec) -> str:
        workload = run.workload
        cfg = workload.config()
        fp32_bytes = 4 * (cfg.parameters + (cfg.vocab * cfg.hidden if cfg.tied else 0))
        if fp32_bytes > MAX_MODEL_BYTES:
            return (f"the float32 export of {workload.name} would hold {fp32_bytes / 2**30:.1f} GiB of weights; "
                    "one ONNX file holds under 2 GiB (external data files are not built here)")
        if run.platform is Platform.WEBNN and run.precision_mode is PrecisionMode.STANDARD:
            plan = rules.assign(cfg.linear_layers(), workload.rules, run.bits, run.weight_block)
            int8 = sum(p.layer.k * p.layer.n for p in plan if p.bits == 8)
            if int8 > QUANTIZED_PER_GRAPH:
                return (f"ONNX Runtime's WebNN graph would hold {int8:,} int8 weight elements (its 8-bit "
                        f"layers: MatMulNBits, or QDQ with int8 activations), past the {QUANTIZED_PER_GRAPH:,} one "
                        "WebNN graph may hold: Chromium's LiteRT backend crashed the tab building SmolLM2-135M's and "
                        "Gemma 3 270M's (2026-12-02/03; engines/webnn/decoder.py); --experimental-precision tries it")
        return ""

    def build(self, run: RunSpec) -> tuple[PreparedDecoder, onnx_decoder.DecoderModel]:
        prepared = prepare_decoder(held_workload(run), run.bits, run.weight_block, run.seed, **holding(run))
        return prepared, onnx_decoder.decoder_model(prepared)

    def page(self, engine: OrtWebEngine, prepared: PreparedDecoder,
             model: onnx_decoder.DecoderModel) -> tuple[dict[str, bytes], dict[str, Any], dict[str, Any]]:
        workload = prepared.workload
        texts, eval_len = prepared.tokens.eval_ids.shape
        static = engine.platform is Platform.WEBNN
        options = {
            "onnx_model": "onnx_model",
            "model": prepared.config.to_json() | {"name": workload.name},
            "context": prepared.context,
            "prompt": {"tensor": "prompt_ids", "rows": workload.prompt_len},
            "new_tokens": workload.new_tokens,
            "score": {"tensor": "eval_ids", "texts": texts, "rows": eval_len},
            "static_shapes": static,
        }
        details = {"model_bytes": len(model.data), "onnx_opset": onnx_decoder.OPSET,
                   "onnx_export": "torch.onnx.export (dynamo), static KV cache",
                   "sessions": "one per pass, static shapes" if static else "one, free dimensions"}
        return prepared.input_tensors() | {"onnx_model": model.data}, options, details

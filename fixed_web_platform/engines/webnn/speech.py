"""The speech kind (Whisper) as the harness's own WebNN graphs (web/engines/webnn_speech.js).

Three graphs with static shapes, built in the page from the same tensors:

- ``encoder``: Python's log-mel features [1, mels, 1, frames] -> the two convolutions as WebNN
  conv2d (kernel 1 x 3, padding 1; the second strides by 2) with GELU, the sinusoidal positions,
  the pre-norm layers, the final layer norm; then every decoder layer's cross-attention keys and
  values ([heads, positions, head_dim] MLTensors), once per clip;
- ``prompt``: the prompt's rows from position 0 (their keys and values padded to the cache's
  length), the final norm and the output projection on the last row, the greedy id (argMax in
  the graph over decoding.py's first-position suppress bias) and the logits;
- ``decode``: one row at a position: the caches in, the caches with that row written out
  (masked beyond it), the greedy id over the later positions' bias.

The KV cache, the cross keys and values and each new id stay MLTensors; the page reads the id
back after every step (the per-token timestamps). WebNN has no front end here: the page is fed
Python's features (the WGSL engine computes its own), so the row's front-end figures are blank.

Each linear layer's data types are chosen as for the encoder and decoder kinds (layers.py):
standard mode runs 4/2-bit layers as 8-bit and says so; experimental mode asks for int4/int2 and
the browser's own error is the answer. The bytes are prepared at the bits each layer executes, so
the float64 Whisper runs the model the graphs hold. The convolutions stay float32. With int8
activations (W8A8, ``--act-bits 8``) the 8- and 4-bit layers take int8 inputs calibrated on the
calibration clips (workloads/speech/calibration.py), and in the fused form (per-channel 8-bit
weights: gemm_qdq) give int8 outputs too, as the decoder's do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...run_spec import RunSpec
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from .forms import QDQ_FORM
from .layers import ModelPlan
from .loop import LoopRunner
from .lower import loop_pass

RUNNER = "webnn_speech"
"""The page module (web/engines/webnn_speech.js)."""


class WebnnSpeech(LoopRunner):
    """Whisper as an encoder graph and prompt / decode-step graphs."""

    runner = RUNNER
    lowered_passes = ("encoder", "prompt", "decode")
    act_bits = (32, 8)

    def prepare(self, run: RunSpec, plan: ModelPlan) -> PreparedSpeech:
        prepared = prepare_speech(plan.workload, run.bits, run.weight_block, run.seed, plan.layers.unsigned,
                                  run.weight_quant, act_bits=run.act_bits, observer=run.observer,
                                  out_int8=plan.form == QDQ_FORM)
        return dataclasses.replace(prepared, front_end_on_device=False)

    def int8_layers(self, prepared: PreparedSpeech) -> list[dict[str, Any]]:
        return prepared.linear_int8() if prepared.act_bits == 8 else []

    def build(self, prepared: PreparedSpeech, layers: Sequence[str]) -> tuple[dict[str, Any], dict[str, bytes]]:
        workload, cfg = prepared.workload, prepared.config
        tensors = {"features": prepared.features_tensor(), **prepared.suppress_tensors(), **prepared.held.tensors()}
        graph = workload.architecture().graph(cfg)
        context = len(cfg.prompt) + workload.max_tokens  # the workload keeps it within the positions
        cross = {f"cross.{i}.{part}": f"cross.{i}.{part}" for i in range(cfg.decoder_layers) for part in ("k", "v")}
        passes = {
            "encoder": loop_pass(graph.passes["encoder"], layers, cache="", outputs={"encoder_out": "enc"} | cross,
                                 split_heads=dict.fromkeys(cross, cfg.heads), probe="enc"),
            "prompt": loop_pass(graph.passes["prompt"], layers, cache="pad", context=context,
                                outputs={"logits": "logits"}, argmax_bias="suppress.first"),
            "decode": loop_pass(graph.passes["decode"], layers, cache="write", context=context,
                                argmax_bias="suppress.rest"),
        }
        return {
            "model": cfg.to_json() | {"name": workload.name, "head_dim": cfg.head_dim},
            "passes": passes,
            "clips": len(prepared.pcm),
            "context": context,
            "prompt": {"tensor": "prompt_ids", "rows": len(cfg.prompt)},
            "max_tokens": workload.max_tokens,
            "eot": cfg.eot,
        }, tensors

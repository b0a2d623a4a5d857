"""The speech kind (Whisper) on the harness's own WGSL kernels (engine ``harness``, platform
``webgpu``).

Python writes four passes as step lists, and the page (web/engines/wgsl_speech.js) runs them as
told, per clip:

- ``frontend``: the clip's PCM to 80 x 3000 log-mel features on the device (a direct DFT of each
  Hann-windowed frame, the mel filter bank, log10, the clamp to 8 below the maximum):
  shaders/ops/stft_power, mel_log, mel_norm;
- ``encoder``: the two convolutions with GELU (+ sinusoidal positions), the pre-norm layers
  (layer norm, q/k/v linears, attention over the 1500 positions, output linear, layer norm, fc1
  with GELU, fc2), the final layer norm; then every decoder layer's cross-attention keys and
  values from the encoder's output, once per clip;
- ``prompt``: the decoder over the prompt's ids (their keys and values into the KV cache), the
  final norm and the output projection on the last row, the greedy argmax on the device;
- ``decode``: one row (the id the last argmax wrote) at the position the cache has reached.

One command submission per pass and per decode step, the new id read back after each (the
per-token timestamps). The KV cache, the cross-attention keys and values, the position and the
generated ids stay on the device. The linear layers are the matmul kernels (shaders/matmul_*.wgsl
behind the model's linear prelude, linear.py), their tile chosen per pass from its rows (1500 for
the encoder and cross keys/values, the prompt's length, 1 for decode). The convolutions stay
float32 (precision applies to the linear layers).
"""

from __future__ import annotations

from typing import Any

from ...architectures import ops
from ...architectures.whisper.config import N_FFT
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from .lower import POWER, ZEROS, Lowering
from .steps import StepListRunner

RUNNER = "wgsl_speech"
BINS = N_FFT // 2 + 1


class WgslSpeech(StepListRunner):
    """Whisper's passes as step lists the page executes (web/engines/wgsl_speech.js)."""

    runner = RUNNER
    label = "Whisper"

    prepare = staticmethod(prepare_speech)

    def loop_options(self, prepared: PreparedSpeech, graph: ops.Graph, lowering: Lowering,
                     steps: dict[str, list[dict[str, Any]]], tensors: dict[str, bytes]) -> dict[str, Any]:
        cfg, w = prepared.config, prepared.workload
        d, rows, prompt_rows = cfg.d_model, cfg.source_positions, len(cfg.prompt)
        activations = {"clip": 8, POWER: cfg.frames * BINS * 4, "features": cfg.mels * cfg.frames * 4,
                       "conv": cfg.frames * d * 4, "enc": rows * d * 4,
                       **{name: rows * d * 4 for name in ("x", "h", "q", "k", "v", "ctx", "y")},
                       "f": rows * cfg.ffn * 4, "logits": cfg.vocab * 4, "ids": prompt_rows * 4, "pos": 4,
                       "count": 4, "generated": w.max_tokens * 4, ZEROS: d * 4}
        context = prompt_rows + w.max_tokens
        cache = {f"cache.{i}.{part}": context * d * 4 for i in range(cfg.decoder_layers) for part in ("k", "v")}
        cross = {f"cross.{i}.{part}": rows * d * 4 for i in range(cfg.decoder_layers) for part in ("k", "v")}
        offsets, at = [], 0
        for pcm in prepared.pcm:
            offsets.append([at, len(pcm)])
            at += len(pcm)
        return {"activations": activations | cache | cross, "kv_cache": sorted(cache | cross),
                "layer_order": [p.layer.name for p in prepared.plan], "passes": steps, "clips": offsets,
                "prompt": {"tensor": "prompt_ids", "rows": prompt_rows}, "max_tokens": w.max_tokens, "eot": cfg.eot}

"""The speech kind (Whisper) on the harness's own WGSL kernels (engine ``harness``, platform
``webgpu``).

Python writes four passes as step lists, and the page (web/engines/wgsl_speech.js) runs them as
told, per clip:

- ``frontend``: the clip's PCM to 80 x 3000 log-mel features on the device (a direct DFT of each
  Hann-windowed frame, the mel filter bank, log10, the clamp to 8 below the maximum):
  shaders/model/speech/stft_power, mel_log, mel_norm;
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

from ...architectures.whisper.config import N_FFT
from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.speech import SpeechWorkload
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import WgslRunner
from . import kernels as wgsl
from .linear import MIXED_ZERO, executed_steps, held_fields, model_zero
from .lower import POWER, ZEROS, Lowering

RUNNER = "wgsl_speech"
BINS = N_FFT // 2 + 1


def _unsupported(prepared: PreparedSpeech) -> str:
    cfg = prepared.config
    if cfg.head_dim % 4:
        return f"head size {cfg.head_dim} is not a multiple of 4 (the attention kernels read vec4s)"
    for p in prepared.plan:
        if p.layer.k % 4:
            return f"{p.layer.name}: K = {p.layer.k} is not a multiple of 4 (the linear kernels read vec4s)"
        if p.bits <= 8 and (p.block <= 0 or p.layer.k % p.block or p.block % (32 // p.bits)):
            return (f"{p.layer.name}: block size {p.block} does not divide K = {p.layer.k} into whole "
                    f"{32 // p.bits}-value words (the packed kernel's layout)")
    return "" if model_zero(prepared.held) else MIXED_ZERO


def build(prepared: PreparedSpeech) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The job's options (programs, kernels, buffers, the four passes: the architecture's graph
    lowered) and its tensors."""
    cfg, w = prepared.config, prepared.workload
    graph = w.architecture().graph(cfg)
    graph.check([p.layer.name for p in prepared.plan])
    lowering = Lowering(prepared.plan, cfg.has_bias, model_zero(prepared.held))
    steps = lowering.passes(graph)
    tensors = prepared.tensors() | lowering.tensors
    d, rows, prompt_rows = cfg.d_model, cfg.source_positions, len(cfg.prompt)
    context = prompt_rows + w.max_tokens
    activations = {"clip": 8, POWER: cfg.frames * BINS * 4, "features": cfg.mels * cfg.frames * 4,
                   "conv": cfg.frames * d * 4, "enc": rows * d * 4,
                   **{name: rows * d * 4 for name in ("x", "h", "q", "k", "v", "ctx", "y")},
                   "f": rows * cfg.ffn * 4, "logits": cfg.vocab * 4, "ids": prompt_rows * 4, "pos": 4, "count": 4,
                   "generated": w.max_tokens * 4, ZEROS: d * 4}
    if lowering.dequantized:
        activations[wgsl.DEQUANTIZED] = lowering.dequantized
    cache = {f"cache.{i}.{part}": context * d * 4 for i in range(cfg.decoder_layers) for part in ("k", "v")}
    cross = {f"cross.{i}.{part}": rows * d * 4 for i in range(cfg.decoder_layers) for part in ("k", "v")}
    offsets, at = [], 0
    for pcm in prepared.pcm:
        offsets.append([at, len(pcm)])
        at += len(pcm)
    options = {
        "model": cfg.to_json() | {"name": w.name},
        "programs": lowering.sources(),
        "linear_variants": lowering.linear_variants(),
        "activations": activations | cache | cross,
        "tensor_bytes": {name: len(data) for name, data in tensors.items()},
        "kv_cache": sorted(cache | cross),
        "weight_tensors": sorted(prepared.held.tensors()),
        "layer_order": [p.layer.name for p in prepared.plan],
        "passes": steps,
        "clips": offsets,
        "prompt": {"tensor": "prompt_ids", "rows": prompt_rows},
        "max_tokens": w.max_tokens,
        "eot": cfg.eot,
    }
    return options, tensors


class WgslSpeech(WgslRunner):
    """Whisper's passes as step lists the page executes (web/engines/wgsl_speech.js)."""

    runner = RUNNER

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        workload = run.workload
        assert isinstance(workload, SpeechWorkload)
        prepared = prepare_speech(workload, run.bits, run.weight_block, run.seed, weight_quant=run.weight_quant)
        why = _unsupported(prepared)
        if why:
            return Refusal(Outcome.UNSUPPORTED, f"the harness's WGSL Whisper cannot run this model: {why}")
        options, tensors = build(prepared)
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, options)
        return EngineJob(spec=spec, tensors=tensors, prepared=prepared,
                         **held_fields([layer.held for layer in prepared.held.layers]))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        assert isinstance(job.prepared, PreparedSpeech)
        return executed_steps(engine, job, page, job.prepared.plan)

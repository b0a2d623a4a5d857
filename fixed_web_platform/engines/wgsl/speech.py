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

import numpy as np

from ...architectures.whisper.config import CHUNK_SECONDS, HEAD, N_FFT, SAMPLE_RATE
from ...page_protocol import PageReply
from ...paths import SHADERS_DIR
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.speech import SpeechWorkload
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import WgslRunner
from . import kernels as wgsl
from .linear import (
    BIAS_BINDING,
    MIXED_ZERO,
    MODEL_SHADERS,
    dequantize_program,
    executed_steps,
    held_fields,
    model_zero,
    prologue,
    variants,
)

RUNNER = "wgsl_speech"
SPEECH_SHADERS = SHADERS_DIR / "model" / "speech"
PROGRAMS = {name: SPEECH_SHADERS / f"{name}.wgsl" for name in
            ("stft_power", "mel_log", "mel_norm", "conv_gelu", "layer_norm", "embed_pos", "kv_store",
             "cross_attention", "argmax")} | {
    "attention": MODEL_SHADERS / "attention.wgsl",  # the encoder's, as BERT's (a mask of ones)
    "attention_kv": MODEL_SHADERS / "decoder" / "attention_kv.wgsl"}  # causal over the KV cache
WORKGROUP = 64
ZEROS = "zeros"
"""A zero-filled buffer bound as the bias of the key projections (Whisper's have none)."""
BINS = N_FFT // 2 + 1
EPS = 1e-5


def _groups(count: int, size: int = WORKGROUP) -> int:
    return -(-count // size)


def program_source(name: str, head_dim: int) -> str:
    return PROGRAMS[name].read_text().replace("{HEAD_DIM}", str(head_dim))


def kernel_key(bits: int, rows: int) -> str:
    return f"{bits}r{rows}"


def _tiling(prepared: PreparedSpeech, rows: int) -> wgsl.Tiling:
    return wgsl.tiling_for(rows, min(p.layer.n for p in prepared.plan))


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


class _Passes:
    """The step lists; ``kernels`` collects the (bits, rows) of every linear step."""

    def __init__(self, prepared: PreparedSpeech) -> None:
        self.p = prepared
        self.cfg = prepared.config
        self.at = {p.layer.name: i for i, p in enumerate(prepared.plan)}
        self.kernels: set[tuple[int, int]] = set()

    def linear(self, name: str, x: str, out: str, rows: int, gelu: bool = False) -> dict[str, Any]:
        index = self.at[name]
        p = self.p.plan[index]
        k, n = p.layer.k, p.layer.n
        tiling = _tiling(self.p, rows)
        weights = [f"{name}.w"] + ([f"{name}.scales", f"{name}.zero_points"] if p.bits <= 8 else [])
        dequantize_first = prologue(p.bits, 32, tiling, rows)
        bindings: list[str | None] = [x, out, *([wgsl.DEQUANTIZED] if dequantize_first else weights)]
        bias = f"{name}.bias" if self.cfg.has_bias(name) else ZEROS
        bindings += [None] * (BIAS_BINDING - len(bindings)) + [bias]
        constants: dict[str, Any] = {"M": rows, "K": k, "N": n} | ({"GELU": 1} if gelu else {})
        if p.bits <= 8 and not dequantize_first:
            constants |= {"BITS": p.bits, "BLOCK_SIZE": p.block}
        self.kernels.add((p.bits, rows))
        step: dict[str, Any] = {"op": "linear", "linear": index, "name": name, "bits": p.bits,
                                "kernel": kernel_key(p.bits, rows), "weights": weights[0], "bindings": bindings,
                                "constants": constants, "workgroups": [*tiling.workgroups(rows, n), 1]}
        if dequantize_first:
            step["prologue"] = {"op": "dequantize", "program": dequantize_program(p.bits),
                                "bindings": [*weights, wgsl.DEQUANTIZED],
                                **wgsl.dequantize_dispatch(k, n, p.bits, p.block)}
            step["prologue"]["workgroups"].append(1)
        return step

    def norm(self, name: str, rows: int, add: bool, last_only: bool = False, out: str = "h") -> dict[str, Any]:
        rows_out = 1 if last_only else rows
        return {"op": "layer_norm", "program": "layer_norm",
                "bindings": ["y", "x", f"{name}.weight", f"{name}.bias", out],
                "constants": {"ROWS": rows, "ROWS_OUT": rows_out, "ROW0": rows - rows_out, "HIDDEN": self.cfg.d_model,
                              "EPS": EPS, "ADD": int(add)},
                "workgroups": [_groups(rows), 1, 1]}

    def frontend(self) -> list[dict[str, Any]]:
        cfg = self.cfg
        frames = cfg.frames
        return [
            {"op": "stft_power", "program": "stft_power",
             "bindings": ["audio", "clip", "frontend.window", "frontend.cos", "frontend.sin", "power"],
             "constants": {"FRAMES": frames, "TOTAL": CHUNK_SECONDS * SAMPLE_RATE},
             "workgroups": [_groups(frames * BINS), 1, 1]},
            {"op": "mel_log", "program": "mel_log", "bindings": ["power", "frontend.mel_filters", "features"],
             "constants": {"FRAMES": frames, "MELS": cfg.mels}, "workgroups": [_groups(frames * cfg.mels), 1, 1]},
            {"op": "mel_norm", "program": "mel_norm", "bindings": ["features"],
             "constants": {"COUNT": frames * cfg.mels}, "workgroups": [1, 1, 1]},
        ]

    def encoder(self) -> list[dict[str, Any]]:
        cfg = self.cfg
        rows, d = cfg.source_positions, cfg.d_model
        steps: list[dict[str, Any]] = [
            {"op": "conv", "program": "conv_gelu",
             "bindings": ["features", "model.encoder.conv1.weight", "model.encoder.conv1.bias", ZEROS, "conv"],
             "constants": {"FRAMES_IN": cfg.frames, "FRAMES_OUT": cfg.frames, "IN": cfg.mels, "OUT": d, "STRIDE": 1,
                           "IN_TIME_MAJOR": 0, "ADD_POS": 0},
             "workgroups": [_groups(cfg.frames * d), 1, 1]},
            {"op": "conv", "program": "conv_gelu",
             "bindings": ["conv", "model.encoder.conv2.weight", "model.encoder.conv2.bias",
                          "model.encoder.embed_positions.weight", "x"],
             "constants": {"FRAMES_IN": cfg.frames, "FRAMES_OUT": rows, "IN": d, "OUT": d, "STRIDE": 2,
                           "IN_TIME_MAJOR": 1, "ADD_POS": 1},
             "workgroups": [_groups(rows * d), 1, 1]},
        ]
        for i in range(cfg.encoder_layers):
            pre = f"model.encoder.layers.{i}."
            steps += [
                self.norm(pre + "self_attn_layer_norm", rows, add=i > 0),
                self.linear(pre + "self_attn.q_proj", "h", "q", rows),
                self.linear(pre + "self_attn.k_proj", "h", "k", rows),
                self.linear(pre + "self_attn.v_proj", "h", "v", rows),
                {"op": "attention", "program": "attention", "bindings": ["q", "k", "v", "ones", "ctx"],
                 "constants": {"BATCH": 1, "SEQ": rows, "HEADS": cfg.heads, "HIDDEN": d},
                 "workgroups": [_groups(cfg.heads * rows), 1, 1]},
                self.linear(pre + "self_attn.out_proj", "ctx", "y", rows),
                self.norm(pre + "final_layer_norm", rows, add=True),
                self.linear(pre + "fc1", "h", "f", rows, gelu=True),
                self.linear(pre + "fc2", "f", "y", rows),
            ]
        steps.append(self.norm("model.encoder.layer_norm", rows, add=True, out="enc"))
        for i in range(cfg.decoder_layers):
            pre = f"model.decoder.layers.{i}.encoder_attn."
            steps += [self.linear(pre + "k_proj", "enc", f"cross.{i}.k", rows),
                      self.linear(pre + "v_proj", "enc", f"cross.{i}.v", rows)]
        return steps

    def decoder(self, rows: int) -> list[dict[str, Any]]:
        cfg = self.cfg
        d = cfg.d_model
        heads = {"ROWS": rows, "HEADS": cfg.heads}
        steps: list[dict[str, Any]] = [
            {"op": "embed", "program": "embed_pos",
             "bindings": ["ids", "model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight",
                          "pos", "x"],
             "constants": {"ROWS": rows, "HIDDEN": d, "VOCAB": cfg.vocab}, "workgroups": [_groups(rows * d), 1, 1]}]
        for i in range(cfg.decoder_layers):
            pre = f"model.decoder.layers.{i}."
            steps += [
                self.norm(pre + "self_attn_layer_norm", rows, add=i > 0),
                self.linear(pre + "self_attn.q_proj", "h", "q", rows),
                self.linear(pre + "self_attn.k_proj", "h", "k", rows),
                self.linear(pre + "self_attn.v_proj", "h", "v", rows),
                {"op": "kv_store", "program": "kv_store",
                 "bindings": ["k", "v", "pos", f"cache.{i}.k", f"cache.{i}.v"],
                 "constants": {"ROWS": rows, "WIDTH": d}, "workgroups": [_groups(rows * d), 1, 1]},
                {"op": "attention", "program": "attention_kv",
                 "bindings": ["q", f"cache.{i}.k", f"cache.{i}.v", "pos", "ctx"],
                 "constants": heads | {"KV_HEADS": cfg.heads}, "workgroups": [_groups(rows * cfg.heads), 1, 1]},
                self.linear(pre + "self_attn.out_proj", "ctx", "y", rows),
                self.norm(pre + "encoder_attn_layer_norm", rows, add=True),
                self.linear(pre + "encoder_attn.q_proj", "h", "q", rows),
                {"op": "cross_attention", "program": "cross_attention",
                 "bindings": ["q", f"cross.{i}.k", f"cross.{i}.v", "ctx"],
                 "constants": heads | {"KEYS": cfg.source_positions},
                 "workgroups": [_groups(rows * cfg.heads), 1, 1]},
                self.linear(pre + "encoder_attn.out_proj", "ctx", "y", rows),
                self.norm(pre + "final_layer_norm", rows, add=True),
                self.linear(pre + "fc1", "h", "f", rows, gelu=True),
                self.linear(pre + "fc2", "f", "y", rows),
            ]
        steps += [self.norm("model.decoder.layer_norm", rows, add=True, last_only=True),
                  self.linear(HEAD, "h", "logits", 1),
                  {"op": "argmax", "program": "argmax", "bindings": ["logits", "ids", "generated", "pos", "count"],
                   "constants": {"VOCAB": cfg.vocab, "ROWS": rows, "SUPPRESS_FROM": cfg.timestamp_begin,
                                 "BEGIN_A": cfg.begin_suppress[0], "BEGIN_B": cfg.begin_suppress[1]},
                   "workgroups": [1, 1, 1]}]
        return steps


def build(prepared: PreparedSpeech) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The job's options (programs, kernels, buffers, the four passes) and its tensors."""
    cfg, w, zero = prepared.config, prepared.workload, model_zero(prepared.held)
    passes = _Passes(prepared)
    prompt_rows = len(cfg.prompt)
    steps = {"frontend": passes.frontend(), "encoder": passes.encoder(), "prompt": passes.decoder(prompt_rows),
             "decode": passes.decoder(1)}
    kernels = passes.kernels
    tensors = prepared.tensors() | {"ones": np.ones(cfg.source_positions, "<i4").tobytes()}
    d, rows = cfg.d_model, cfg.source_positions
    context = len(cfg.prompt) + w.max_tokens
    activations = {"clip": 8, "power": cfg.frames * BINS * 4, "features": cfg.mels * cfg.frames * 4,
                   "conv": cfg.frames * d * 4, "enc": rows * d * 4,
                   **{name: rows * d * 4 for name in ("x", "h", "q", "k", "v", "ctx", "y")},
                   "f": rows * cfg.ffn * 4, "logits": cfg.vocab * 4, "ids": prompt_rows * 4, "pos": 4, "count": 4,
                   "generated": w.max_tokens * 4, ZEROS: d * 4}
    dequantized = [p.layer.n * p.layer.k * 4 for p in prepared.plan for b, r in kernels
                   if b == p.bits and prologue(b, 32, _tiling(prepared, r), r)]
    if dequantized:
        activations[wgsl.DEQUANTIZED] = max(dequantized)
    cache = {f"cache.{i}.{part}": context * d * 4 for i in range(cfg.decoder_layers) for part in ("k", "v")}
    cross = {f"cross.{i}.{part}": rows * d * 4 for i in range(cfg.decoder_layers) for part in ("k", "v")}
    offsets, at = [], 0
    for pcm in prepared.pcm:
        offsets.append([at, len(pcm)])
        at += len(pcm)
    options = {
        "model": cfg.to_json() | {"name": w.name},
        "programs": {name: program_source(name, cfg.head_dim) for name in PROGRAMS}
        | {dequantize_program(b): wgsl.dequantize_source(b, zero) for b, r in kernels
           if prologue(b, 32, _tiling(prepared, r), r)},
        "linear_variants": {kernel_key(b, r): variants(b, 32, _tiling(prepared, r), r, zero)
                            for b, r in sorted(kernels)},
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

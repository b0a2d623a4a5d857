"""Whisper's passes as ops (architectures/ops.py), for the transcribe loop: ``frontend`` (a clip's
PCM to log-mel features), ``encoder`` (two GELU convolutions, the second adding the positions,
pre-norm layers, the final layer norm into ``enc``, then every decoder layer's cross-attention
keys and values from it, once per clip), ``prompt`` (the decoder over the prompt's ids into the
KV cache, the greedy next id) and ``decode`` (one row at the position the cache has reached).
Pre-norm residuals: a norm adds the previous branch's output ``y`` into the stream ``x`` first."""

from __future__ import annotations

from ..ops import Argmax, Attention, Conv1d, Embed, Graph, KvWrite, Linear, LogMel, Norm, Op, Pass
from .config import CHUNK_SECONDS, HEAD, N_FFT, SAMPLE_RATE, WhisperConfig

EPS = 1e-5


def _norm(cfg: WhisperConfig, name: str, rows: int, add: bool, out: str = "h", last: bool = False) -> Norm:
    return Norm("layer", "x", out, f"{name}.weight", rows, cfg.d_model, EPS, bias=f"{name}.bias",
                residual="y" if add else "", last=last)


def _encoder(cfg: WhisperConfig) -> Pass:
    rows, d = cfg.source_positions, cfg.d_model
    ops: list[Op] = [
        Conv1d("features", "model.encoder.conv1.weight", "model.encoder.conv1.bias", "conv", cfg.frames, cfg.frames,
               cfg.mels, d),
        Conv1d("conv", "model.encoder.conv2.weight", "model.encoder.conv2.bias", "x", cfg.frames, rows, d, d,
               stride=2, positions="model.encoder.embed_positions.weight", time_major_in=True),
    ]
    for i in range(cfg.encoder_layers):
        pre = f"model.encoder.layers.{i}."
        ops += [
            _norm(cfg, pre + "self_attn_layer_norm", rows, add=i > 0),
            Linear(pre + "self_attn.q_proj", "h", "q", rows),
            Linear(pre + "self_attn.k_proj", "h", "k", rows),
            Linear(pre + "self_attn.v_proj", "h", "v", rows),
            Attention("self", "q", "k", "v", "ctx", rows, cfg.heads, cfg.heads, d, seq=rows),
            Linear(pre + "self_attn.out_proj", "ctx", "y", rows),
            _norm(cfg, pre + "final_layer_norm", rows, add=True),
            Linear(pre + "fc1", "h", "f", rows, gelu=True),
            Linear(pre + "fc2", "f", "y", rows),
        ]
    ops.append(_norm(cfg, "model.encoder.layer_norm", rows, add=True, out="enc"))
    for i in range(cfg.decoder_layers):
        pre = f"model.decoder.layers.{i}.encoder_attn."
        ops += [Linear(pre + "k_proj", "enc", f"cross.{i}.k", rows),
                Linear(pre + "v_proj", "enc", f"cross.{i}.v", rows)]
    return Pass("encoder", rows, tuple(ops))


def _decoder(cfg: WhisperConfig, name: str, rows: int) -> Pass:
    d = cfg.d_model
    ops: list[Op] = [Embed("ids", "model.decoder.embed_tokens.weight", "x", rows, d, cfg.vocab,
                           positions="model.decoder.embed_positions.weight", at_pos=True)]
    for i in range(cfg.decoder_layers):
        pre = f"model.decoder.layers.{i}."
        cache = (f"cache.{i}.k", f"cache.{i}.v")
        ops += [
            _norm(cfg, pre + "self_attn_layer_norm", rows, add=i > 0),
            Linear(pre + "self_attn.q_proj", "h", "q", rows),
            Linear(pre + "self_attn.k_proj", "h", "k", rows),
            Linear(pre + "self_attn.v_proj", "h", "v", rows),
            KvWrite("k", "v", *cache, rows, d),
            Attention("cache", "q", *cache, "ctx", rows, cfg.heads, cfg.heads, d),
            Linear(pre + "self_attn.out_proj", "ctx", "y", rows),
            _norm(cfg, pre + "encoder_attn_layer_norm", rows, add=True),
            Linear(pre + "encoder_attn.q_proj", "h", "q", rows),
            Attention("cross", "q", f"cross.{i}.k", f"cross.{i}.v", "ctx", rows, cfg.heads, cfg.heads, d,
                      keys=cfg.source_positions),
            Linear(pre + "encoder_attn.out_proj", "ctx", "y", rows),
            _norm(cfg, pre + "final_layer_norm", rows, add=True),
            Linear(pre + "fc1", "h", "f", rows, gelu=True),
            Linear(pre + "fc2", "f", "y", rows),
        ]
    ops += [_norm(cfg, "model.decoder.layer_norm", rows, add=True, last=True), Linear(HEAD, "h", "logits", 1),
            Argmax("logits", rows, cfg.vocab, suppress_from=cfg.timestamp_begin, begin=tuple(cfg.begin_suppress[:2]))]
    return Pass(name, rows, tuple(ops))


def transcribe(cfg: WhisperConfig) -> Graph:
    frontend = LogMel("audio", "clip", "features", cfg.frames, cfg.mels, CHUNK_SECONDS * SAMPLE_RATE, N_FFT)
    return Graph({"frontend": Pass("frontend", cfg.frames, (frontend,)), "encoder": _encoder(cfg),
                  "prompt": _decoder(cfg, "prompt", len(cfg.prompt)), "decode": _decoder(cfg, "decode", 1)})

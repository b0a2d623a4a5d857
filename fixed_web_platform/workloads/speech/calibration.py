"""The speech kind's calibration split: what int8 activations and a calibrated weight quantizer
(gptq) see of Whisper.

The clips are the built-in calibration sentences (models/data/calibration_sentences.txt, none of
them in this kind's evaluation set, data/sentences.txt) spoken by espeak-ng as the evaluation
clips are (audio.spoken). Each goes through the float model (PyTorch, the original weights) as a
run transcribes it: the encoder over its 30-second window, then greedy decoding by
decoding.py's rule with the KV cache, so every linear layer sees the rows it sees when scored
(the encoder's 1500 positions, the cross-attention keys and values of the encoder's output once,
the decoder's prompt and one row per generated id).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...architectures.whisper import torch_module
from ...models import rules, smoothing, source
from ...models.calibration import DECODER_OUT_INT8_MIN_SQNR_DB, builtin_calibration_texts, input_moments, output_misses
from ...models.source import LoadedModel
from ...prepared_caches import per_configuration
from . import audio


def calibration_clips(count: int | None = None) -> tuple[audio.Clip, ...]:
    """The first ``count`` (all by default) calibration sentences, spoken."""
    return audio.spoken(builtin_calibration_texts())[:count]


@dataclass(frozen=True)
class SpeechClips:
    """Whisper's calibration inputs (models/calibration.CalibrationInputs): the first ``clips``
    calibration clips (all: None), each encoded and transcribed by the float model up to
    ``max_tokens``; every row of every call counts."""

    max_tokens: int
    clips: int | None = None
    out_min_sqnr_db: ClassVar[float] = DECODER_OUT_INT8_MIN_SQNR_DB
    """The decoders' floor (errors compound over the blocks and every generated id); the layers
    missing it are held in float32 (``int8_output_misses``)."""
    per_token: ClassVar[bool] = True

    def run(self, model: LoadedModel, net: Any, counted: list[np.ndarray | None], before: Any = None) -> None:
        cfg = model.config
        for clip in calibration_clips(self.clips):
            counted.append(None)
            if before:
                before()
            encoded = torch_module.encode(net, audio.features(audio.read_wav(clip.path), cfg.mels))
            torch_module.greedy(cfg, net, encoded, self.max_tokens)


@functools.lru_cache(maxsize=2)
def clip_moments(model: LoadedModel, max_tokens: int, layers: tuple[str, ...],
                 clips: int | None = None) -> dict[str, np.ndarray]:
    """E[x x^T] of each named linear layer's input over the calibration clips (the first
    ``clips`` of them, all by default), transcribed by the float model up to ``max_tokens``."""
    return input_moments(model, SpeechClips(max_tokens, clips), layers)


def int8_model(workload: Any, seed: int) -> tuple[LoadedModel, SpeechClips]:
    """The float model a speech workload's int8 activations are calibrated on (smoothed:
    models/smoothing.py) and its calibration inputs (``workload``: a SpeechWorkload)."""
    clips = SpeechClips(workload.max_tokens)
    resolved = source.resolve(workload.model, workload.random_weights)
    return smoothing.smoothed(source.load(resolved, workload.random_weights, seed), clips), clips


@per_configuration(maxsize=4)
def int8_output_misses(workload: Any, bits: int, block_size: int, seed: int, observer: str) -> tuple[str, ...]:
    """The 8-bit layers whose x @ W^T int8 cannot hold at SpeechClips' floor
    (models/calibration.output_misses)."""
    model, clips = int8_model(workload, seed)
    plan = rules.assign(model.config.linear_layers(), workload.rules, bits, block_size)
    return output_misses(model, clips, plan, observer)

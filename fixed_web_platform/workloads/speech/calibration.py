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
from ...models.calibration import builtin_calibration_texts, input_moments
from ...models.source import LoadedModel
from ..int8_activations import output_misses, smoothed_model
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
    out_min_sqnr_db: ClassVar[float] = 38.0
    """Whisper's floor: the layers missing it are held in float32 (``int8_output_misses``). A
    transcript is judged word by word, and errors compound over the encoder's blocks, the decoder's
    and every generated id. whisper-tiny.en W8A8 (per-token inputs, smoothed) on Chromium 153's
    WebNN, 30 clips, 2026-12-04: the floor, layers with int8 outputs of 65, decode ids/s over
    float32's 71.1 in the same sweep, WER against fp32's transcripts, clips equal to fp32's:
    - 35 dB (the decoders' floor, commit 10b5be3): 54, 159 (2.24x), 2.5%, 26;
      with the encoder held in float32 by a rule: 158 (2.22x), 1.7%, 26; the decoder so: 74.1, 2.1%, 27;
    - 38 dB: 28, 129 (1.81x), 0.8%, 28;
    - 41 dB: 2, 65.6 (0.92x), 0.0%, 30.
    The encoder's 1500 positions gain little from int8 (401 ms at 35 dB, 432 in float32)."""
    per_token: ClassVar[bool] = True
    """As a decoder's. At the old 25 dB floor with the missing layers' outputs float (2026-12-04,
    commit 74f5698, 30 clips on Chromium 153) per-token inputs took WER against fp32 from 7.5% to
    5.4% (harness WebNN), 8.8% to 3.3% (ORT's WebNN), 5.9% to 5.0% (ORT wasm)."""

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
    """The float model a speech workload's int8 activations are calibrated on (smoothed) and its
    calibration inputs (``workload``: a SpeechWorkload)."""
    clips = SpeechClips(workload.max_tokens)
    return smoothed_model(workload, seed, clips), clips


def int8_output_misses(workload: Any, bits: int, block_size: int, seed: int, observer: str) -> tuple[str, ...]:
    """The 8-bit layers whose x @ W^T int8 cannot hold at SpeechClips' floor."""
    return output_misses(workload, SpeechClips(workload.max_tokens), bits, block_size, seed, observer)

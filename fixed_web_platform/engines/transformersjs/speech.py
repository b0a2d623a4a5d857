"""The speech kind (Whisper) on transformers.js (page: web/engines/tjs_speech.js): the model's
folder in transformers.js's layout (exports.py: ``encoder_model`` and ``decoder_model_merged``;
folders.py: a ``generation_config.json`` pinned to the harness's decoding rule) at the run's
dtype, loaded by its ``automatic-speech-recognition`` pipeline.

- Timing: the pipeline as users call it on each clip's samples (its own log-mel front end, the
  encoder, greedy decoding without timestamps), one clip end to end per timed iteration; the
  page times the library's front end and its encoder session from inside the pipeline, and each
  new token from a streamer.
- Accuracy: the transcripts' ids (from the streamer) against PyTorch fp32's and the clips'
  references (WER); the first logits (the pipeline's model called on Python's features of the
  first clip and the prompt) and the encoder's output on them: whether the browser is right,
  against onnxruntime on the CPU running the same dtype files (prepared.py); the library's own
  features against Python's (``frontend_error``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...precision.quantizers import DEFAULT_QUANTIZER
from ...run_spec import RunSpec
from ...workloads.speech import SpeechWorkload
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from . import TjsKindRunner, exports, folders
from .prepared import PreparedTjs, RunFile, judge_files, run_graph

ENCODER, DECODER = "encoder_model", "decoder_model_merged"


class PreparedTjsSpeech(PreparedTjs):
    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> Any:
        return self.base.output_arrays(outputs)  # one record per clip (a .json file), as every engine's


def _first_logits(base: PreparedSpeech) -> RunFile:
    """The dtype files' first logits: the encoder on Python's features of the first clip, then
    the merged decoder's first step (no cache) on the prompt."""
    cfg = base.config
    names = exports.speech_names(cfg.decoder_layers)
    empty = np.zeros((1, cfg.heads, 0, cfg.head_dim), np.float32)

    def run(files: Mapping[str, Path], how: str) -> np.ndarray:
        encoder, decoder = (next(p for n, p in files.items() if f"/{g}" in n) for g in (ENCODER, DECODER))
        hidden = run_graph(encoder, {exports.SPEECH_INPUT: base.features[None].astype(np.float32)},
                           how)[exports.ENCODER_OUTPUT]
        feeds = {"input_ids": np.array([list(cfg.prompt)], np.int64), "encoder_hidden_states": hidden,
                 "use_cache_branch": np.array([False])} | {n: empty for n in names["past"] + names["past_cross"]}
        return np.asarray(run_graph(decoder, feeds, how)[exports.LOGITS][0, -1], np.float64)
    return run


@functools.lru_cache(maxsize=4)
def prepare(workload: SpeechWorkload, dtype: str, seed: int, quantizer: str = DEFAULT_QUANTIZER
            ) -> tuple[PreparedTjs, folders.ModelFolder]:
    base = dataclasses.replace(prepare_speech(workload, 32, 32, seed), front_end_on_device=True)
    user = folders.user_folder(workload.model, "speech")
    folder, dtype = folders.at_dtype(folders.pinned(user, base.held.model, "speech") if user is not None else
                                     folders.made_folder(base.held.model, "speech", base.tokenizer), dtype, quantizer,
                                     make=user is None)
    return judge_files(base, dtype, folder.graph_files(dtype), _first_logits(base), PreparedTjsSpeech), folder


class TjsSpeech(TjsKindRunner):
    runner = "tjs_speech"
    lowered_passes = ("encoder", "decode")
    preparer = staticmethod(prepare)

    def page(self, run: RunSpec, prepared: PreparedTjs) -> tuple[dict[str, bytes], dict[str, Any]]:
        base = prepared.base
        assert isinstance(base, PreparedSpeech)
        cfg = base.config
        lengths = [len(p) for p in base.pcm]
        positions = len(cfg.prompt) + base.workload.max_tokens
        tensors = {"audio": np.concatenate(base.pcm).astype("<f4").tobytes(),
                   "features": base.features.astype("<f4").tobytes(),
                   "prompt_ids": np.array(cfg.prompt, dtype="<i4").tobytes()}
        return tensors, {
            "model": cfg.to_json() | {"head_dim": cfg.head_dim, "frames": cfg.frames},
            "clips": len(base.pcm), "clip_samples": lengths, "max_tokens": base.workload.max_tokens,
            "eot": cfg.eot, "prompt": {"tensor": "prompt_ids", "rows": len(cfg.prompt)},
            "kv_cache_bytes": 2 * cfg.decoder_layers * cfg.d_model * (positions + cfg.source_positions) * 4,
        }

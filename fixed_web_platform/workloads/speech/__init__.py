"""The ``speech`` workload kind: a speech-recognition model (an architecture whose ``kind`` is
'speech', Whisper today) transcribing clips greedily, timed per stage and per token, scored by
word error rate against the clips' transcripts and against PyTorch fp32's.

workload.py: the workload (model, clips, token limit, precision rules); audio.py: the built-in
espeak-ng clips, a user's WAV folder, reading WAVs, the Python log-mel features; prepared.py: a
run prepared in Python (page tensors, PyTorch fp32 and float64 references); accuracy.py: the
normalised word error rate; timing.py: the page's per-clip times, checked, and the row's speed
figures.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from ...models.source import RANDOM_WEIGHTS_FLAG
from ..base import Column, KindTiming, PageIterations, Workload, WorkloadKind, integer_text, positive_count
from ..model_columns import (
    DECODE_STEADY_CLASS,
    DECODE_TOKENS_PER_S,
    DEVICE_MEMORY,
    LOAD_WEIGHTS_MS,
    MODEL_COLUMNS,
    MODEL_IDENTITY,
    MODEL_PRECISION_IDENTITY,
)
from . import timing
from .audio import builtin_sentences, read_wav
from .workload import DEFAULT_CLIPS, DEFAULT_MAX_TOKENS, SpeechWorkload


class SpeechKind(WorkloadKind):
    name = SpeechWorkload.kind
    kind_timing = KindTiming(warmup=0, min_iterations=10, steady_cap_s=60.0, cap_waits=10)
    """An iteration is one clip end to end, the clips in turn: Whisper tiny.en's take 24 s each
    on the harness's WebGPU kernels on SwiftShader (Chrome; 2026-12-02). The cap never stops a
    page before every clip is timed once and 10 in all (web/transcription.js), so 60 s only
    bounds the faster engines."""
    iteration_lists = ((timing.FIELD, "clips"), (timing.FIELD, "totals"))
    columns = (
        *MODEL_COLUMNS,
        Column("clips", int, "Clips transcribed (each one 30-second window)."),
        Column("max_tokens", int, "Most ids decoded per clip (greedy; end of text stops sooner)."),
        Column("frontend_ms", float, "Log-mel front end on the device per clip (median; the harness's WebGPU, and "
                                     "transformers.js, whose pipeline has its own).",
               performance=True),
        Column("encoder_ms", float, "Encoder per 30-s window, with the cross-attention keys and values (median).",
               performance=True),
        Column("first_token_ms", float, "The prompt's step to the first id read back (median).", performance=True),
        DECODE_TOKENS_PER_S,
        DECODE_STEADY_CLASS,
        Column("clip_s", float, "Seconds per clip end to end: PCM in, transcript ids out (median).",
               performance=True),
        Column("real_time_factor", float, "clip_s / the clip's audio seconds (median; below 1 is faster than "
                                          "real time).", performance=True),
        LOAD_WEIGHTS_MS,
        *DEVICE_MEMORY,
        Column("wer", float, "Word error rate vs the clips' transcripts (Whisper's English normaliser, jiwer)."),
        Column("wer_fp32", float, "The same for PyTorch fp32's transcripts (what the model itself gets)."),
        Column("wer_vs_fp32", float, "Word error rate of the engine's transcripts against PyTorch fp32's."),
        Column("clips_equal_fp32", int, "Clips whose transcript ids are exactly PyTorch fp32's."),
        Column("encoder_cosine_vs_fp32", float, "Cosine of the first clip's encoder output vs PyTorch fp32's."),
        Column("encoder_error_vs_reference", float, "Relative RMS error of the first clip's encoder output vs the "
                                                    "float64 encoder with the held weights."),
        Column("frontend_error", float, "Largest absolute difference of the page's log-mel features of the first "
                                        "clip from WhisperFeatureExtractor's (harness WebGPU only)."),
        Column("transcript", str, "The first clip's transcript."),
    )
    identity = (*MODEL_IDENTITY, "clips", "max_tokens")
    precision_identity = MODEL_PRECISION_IDENTITY

    def from_json(self, doc: Mapping[str, Any]) -> SpeechWorkload:
        return SpeechWorkload.from_json(dict(doc))

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--clips", type=positive_count, default=DEFAULT_CLIPS,
                            help=f"with a speech --model: built-in clips to transcribe (default {DEFAULT_CLIPS} of "
                                 f"{len(builtin_sentences())}); --inputs DIR transcribes a folder of WAV files")
        parser.add_argument("--max-tokens", type=positive_count, default=DEFAULT_MAX_TOKENS,
                            help=f"with a speech --model: most ids decoded per clip (default {DEFAULT_MAX_TOKENS})")

    def model_workloads(self, model: str, options: Mapping[str, Any]) -> tuple[Workload, ...]:
        return (SpeechWorkload.from_options(
            model, clips=int(options.get("clips", DEFAULT_CLIPS)),
            max_tokens=int(options.get("max_tokens", DEFAULT_MAX_TOKENS)),
            random_weights=bool(options.get("random_weights")), inputs=options.get("inputs"),
            mixed_precision=bool(options.get("mixed_precision")), precision_rules=options.get("precision_rules"),
            random_weights_hint=options.get("random_weights_hint") or RANDOM_WEIGHTS_FLAG),)

    def shape(self, row: Mapping[str, Any]) -> str:
        """'8 clips'."""
        return f"{integer_text(row.get('clips'))} clips"

    def reply_fields(self, payload: Mapping[str, Any], max_iterations: int) -> dict[str, Any]:
        return timing.reply_fields(payload, max_iterations)

    def judged_wall(self, fields: Mapping[str, Any], wall_ms: Sequence[float]) -> Sequence[float]:
        """Each clip end to end over the median of that clip's (times the page's median): the clips
        differ in length, and a page takes them in turn."""
        return timing.per_clip_level(fields, wall_ms)

    def speed_figures(self, workload: Workload, pages: Sequence[PageIterations]) -> dict[str, Any]:
        assert isinstance(workload, SpeechWorkload)
        durations = [len(read_wav(c.path)) / 16000.0 for c in workload.clips]
        return timing.speed_figures(durations, pages)



SPEECH = SpeechKind()

__all__ = ["SPEECH", "SpeechKind", "SpeechWorkload"]

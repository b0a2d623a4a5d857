"""The one greedy rule every Whisper engine and reference follows: the next id is the argmax of
the logits (the lowest id among equal maxima) with timestamp tokens suppressed (the prompt asks
for none) and, at the first position, a blank and the end of text suppressed, as Whisper's
generation config does; decoding stops at the end of text or after ``max_tokens`` ids."""

from __future__ import annotations

import numpy as np

from .config import WhisperConfig


def choose(cfg: WhisperConfig, logits: np.ndarray, first: bool) -> int:
    row = np.array(logits, dtype=np.float64, copy=True)
    row[cfg.timestamp_begin:] = -np.inf
    if first:
        row[list(cfg.begin_suppress)] = -np.inf
    return int(np.argmax(row))

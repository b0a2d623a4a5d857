"""Word error rate as Whisper's papers count it: both sides through transformers' Whisper English
text normaliser (its spelling map left empty: the British-to-American list ships with OpenAI's
package, not here), then jiwer's word-level edit distance pooled over the clips."""

from __future__ import annotations

import functools
from collections.abc import Sequence


@functools.cache
def _normaliser():  # noqa: ANN202 - transformers' class
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    return EnglishTextNormalizer({})


def normalise(text: str) -> str:
    return _normaliser()(text)


def wer(references: Sequence[str], hypotheses: Sequence[str]) -> float | None:
    """Word errors / reference words over every pair with a non-empty normalised reference
    (None when there is none)."""
    import jiwer

    pairs = [(normalise(r), normalise(h)) for r, h in zip(references, hypotheses, strict=True)]
    pairs = [(r, h) for r, h in pairs if r.strip()]
    if not pairs:
        return None
    return float(jiwer.wer([r for r, _ in pairs], [h for _, h in pairs]))

"""The texts a whole-model run embeds, and their token ids.

The built-in set (data/eval_sentences.txt, written for this project) or the user's own file
(one text per line). Texts are tokenized in Python with the model's tokenizer, padded or
truncated to ``seq_len``, and cut into batches of ``batch_size`` (the last batch is filled up
with the set's first texts, and their outputs are dropped), so every forward pass has the
same shape [batch_size, seq_len].
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BUILTIN_SET = Path(__file__).parent / "data" / "eval_sentences.txt"
BUILTIN_NAME = "builtin"
MAX_TEXTS = 4096
MAX_LINE_CHARS = 10_000


def read_texts(path: Path | str, what: str = "inputs file") -> tuple[str, ...]:
    """Non-empty lines, '#' lines skipped; ValueError with one line for an unusable file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
    if b"\x00" in raw:
        raise ValueError(f"{what} {path} is not text (it holds NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} {path} is not UTF-8 text") from None
    lines = [line.strip() for line in text.splitlines()]
    texts = tuple(line for line in lines if line and not line.startswith("#"))
    if not texts:
        raise ValueError(f"{what} {path} has no texts (one text per line)")
    if len(texts) > MAX_TEXTS:
        raise ValueError(f"{what} {path} has {len(texts)} texts; at most {MAX_TEXTS} are allowed")
    if max(len(t) for t in texts) > MAX_LINE_CHARS:
        raise ValueError(f"{what} {path} has a line over {MAX_LINE_CHARS} characters")
    return texts


def builtin_texts() -> tuple[str, ...]:
    return read_texts(BUILTIN_SET)


@dataclass(frozen=True)
class Batches:
    """Token ids for every forward pass: arrays [passes, batch, seq] of int32."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray
    count: int
    """How many of the rows are real texts (the rest fill the last batch)."""
    truncated: int
    """Texts longer than seq_len that were cut."""

    @property
    def passes(self) -> int:
        return int(self.input_ids.shape[0])

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[count, seq] arrays of the real texts."""
        s = self.input_ids.shape[-1]
        return tuple(a.reshape(-1, s)[: self.count] for a in (self.input_ids, self.attention_mask,
                                                              self.token_type_ids))

    @property
    def tokens(self) -> int:
        """Real (unpadded) tokens in one forward pass of the first batch."""
        return int(self.attention_mask[0].sum())


def tokenize(tokenizer: Any, texts: tuple[str, ...], batch_size: int, seq_len: int) -> Batches:
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    if seq_len < 2:
        raise ValueError(f"sequence length must be at least 2 (the [CLS] and [SEP] tokens), got {seq_len}")
    count = len(texts)
    passes = -(-count // batch_size)
    filled = list(texts) + [texts[i % count] for i in range(passes * batch_size - count)]
    full = tokenizer(filled, padding=False, truncation=False)["input_ids"]
    truncated = sum(len(ids) > seq_len for ids in full[:count])
    enc = tokenizer(filled, padding="max_length", truncation=True, max_length=seq_len,
                    return_tensors="np", return_token_type_ids=True)
    shape = (passes, batch_size, seq_len)
    return Batches(
        input_ids=enc["input_ids"].astype(np.int32).reshape(shape),
        attention_mask=enc["attention_mask"].astype(np.int32).reshape(shape),
        token_type_ids=enc["token_type_ids"].astype(np.int32).reshape(shape),
        count=count,
        truncated=truncated,
    )

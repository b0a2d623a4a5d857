"""The token ids a decoder run uses: the evaluation rows (each text's first ``eval_len`` tokens)
and the prompt (the first ``prompt_len`` tokens of the texts read one after another).

Texts are tokenized with the model's own tokenizer, without special tokens (no beginning-of-
sequence token is added), the same ids for every engine.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...models import source


@dataclass(frozen=True, eq=False)
class TokenPlan:
    eval_ids: np.ndarray
    """int32 [texts, eval_len]."""
    prompt: np.ndarray
    """int32 [prompt_len]."""
    eos: tuple[int, ...]
    """End-of-sequence ids (suppressed in generation)."""
    tokenizer: Any

    def decode(self, ids: np.ndarray) -> str:
        return str(self.tokenizer.decode([int(i) for i in ids]))


@functools.lru_cache(maxsize=8)
def token_plan(model: str, random_weights: bool, texts: tuple[str, ...], inputs_name: str, eval_len: int,
               prompt_len: int) -> TokenPlan:
    """The ids of a decoder workload's texts (``DecoderWorkload.tokens``); ValueError (one line)
    when the texts are too short for the lengths asked."""
    resolved = source.resolve(model, random_weights)
    tok = source.tokenizer(resolved)
    vocab = int(source.model_config(resolved).vocab)  # type: ignore[attr-defined]
    encoded = [list(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    short = [i for i, ids in enumerate(encoded) if len(ids) < eval_len]
    if short:
        n = len(encoded[short[0]])
        raise ValueError(f"evaluation text {short[0] + 1} ({inputs_name}) has {n} tokens; "
                         f"--eval-len {eval_len} needs at least that many in every text")
    joined = [i for ids in encoded for i in ids]
    if len(joined) < prompt_len:
        raise ValueError(f"prompt length {prompt_len} is longer than the evaluation texts "
                         f"together ({len(joined)} tokens), where the prompt comes from")
    if max(joined) >= vocab:
        raise ValueError(f"the tokenizer gives id {max(joined)}, beyond the model's vocabulary of {vocab}")
    eos = getattr(tok, "eos_token_id", None)
    return TokenPlan(np.array([ids[:eval_len] for ids in encoded], dtype=np.int32),
                     np.array(joined[:prompt_len], dtype=np.int32),
                     (int(eos),) if eos is not None and int(eos) < vocab else (), tok)

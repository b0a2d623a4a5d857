"""The token ids a decoder run uses: the evaluation rows (each text's first ``eval_len`` tokens)
and the prompt (the first ``prompt_len`` tokens of the texts read one after another).

Texts are tokenized with the model's own tokenizer, the same ids for every engine; the special
tokens it puts before a text by default (Gemma's beginning-of-sequence id; SmolLM2's tokenizer
puts none) begin each evaluation row and the prompt, counted in their lengths.
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
    lead: tuple[int, ...] = ()
    """The special ids the tokenizer puts before a text (they begin the prompt and every row)."""

    def decode(self, ids: np.ndarray) -> str:
        return str(self.tokenizer.decode([int(i) for i in ids]))

    def text(self, ids: np.ndarray) -> str:
        """The text of ``ids`` that a tokenizer reading it as the model's own does (adding ``lead``
        itself) makes ``ids`` again: ``ids`` without the leading special ids."""
        lead = len(self.lead) if tuple(int(i) for i in ids[:len(self.lead)]) == self.lead else 0
        return self.decode(ids[lead:])


@functools.lru_cache(maxsize=8)
def token_plan(model: str, random_weights: bool, texts: tuple[str, ...], inputs_name: str, eval_len: int,
               prompt_len: int) -> TokenPlan:
    """The ids of a decoder workload's texts (``DecoderWorkload.tokens``); ValueError (one line)
    when the texts are too short for the lengths asked."""
    resolved = source.resolve(model, random_weights)
    tok = source.tokenizer(resolved)
    vocab = int(source.model_config(resolved).vocab)  # type: ignore[attr-defined]
    encoded = [list(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    lead = _leading_special(tok, texts[0], encoded[0])
    short = [i for i, ids in enumerate(encoded) if len(lead) + len(ids) < eval_len]
    if short:
        n = len(lead) + len(encoded[short[0]])
        raise ValueError(f"evaluation text {short[0] + 1} ({inputs_name}) has {n} tokens; "
                         f"--eval-len {eval_len} needs at least that many in every text")
    encoded = [lead + ids for ids in encoded]
    joined = lead + [i for ids in encoded for i in ids[len(lead):]]
    if len(joined) < prompt_len:
        raise ValueError(f"prompt length {prompt_len} is longer than the evaluation texts "
                         f"together ({len(joined)} tokens), where the prompt comes from")
    if max(joined) >= vocab:
        raise ValueError(f"the tokenizer gives id {max(joined)}, beyond the model's vocabulary of {vocab}")
    eos = getattr(tok, "eos_token_id", None)
    return TokenPlan(np.array([ids[:eval_len] for ids in encoded], dtype=np.int32),
                     np.array(joined[:prompt_len], dtype=np.int32),
                     (int(eos),) if eos is not None and int(eos) < vocab else (), tok, tuple(lead))


def _leading_special(tok: Any, text: str, plain: list[int]) -> list[int]:
    """The ids the tokenizer puts before ``text``'s own by default ([] for none)."""
    full = list(tok(text)["input_ids"])
    at = len(full) - len(plain)
    return full[:at] if at > 0 and full[at:] == plain else []

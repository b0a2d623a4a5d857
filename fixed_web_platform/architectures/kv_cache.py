"""What the float64 decoder references share (architectures/<name>/reference.py): the KV cache
they grow one call at a time, and greedy generation through it, as the engines generate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class KVCache:
    """Per layer, the keys (as attention reads them: rotated, normed) and the values of every
    position so far: [kv_heads, t, head_dim]."""

    keys: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.keys[0].shape[1] if self.keys else 0


Step = Callable[[Sequence[int] | np.ndarray, KVCache | None], tuple[np.ndarray, KVCache]]
"""A reference's forward: the next ids and the cache before them -> their logits and the grown cache."""


def greedy(step: Step, prompt: Sequence[int] | np.ndarray, new_tokens: int, suppress: Sequence[int] = ()) -> list[int]:
    """``new_tokens`` greedy continuations of ``prompt`` (ids in ``suppress``, e.g. end of sequence,
    never chosen), one ``step`` per new id through the cache."""
    logits, cache = step(prompt, None)
    out: list[int] = []
    for _ in range(new_tokens):
        last = logits[-1].copy()
        last[list(suppress)] = -np.inf
        out.append(int(np.argmax(last)))
        if len(out) < new_tokens:
            logits, cache = step([out[-1]], cache)
    return out

"""The caches of a configuration's preparation (held weights, float64 references, rewritten
model files), kept while the sweep's runs share a configuration and released when the next run's
differs: a sweep of a large model holds one configuration's preparation at a time. Measured on
Gemma 3 270M (a 262,144-word vocabulary), preparing the decoder at 32, 8 and 4 bits in one
process: each preparation kept about 3.3 GB (the held model, its dequantized copy, 537 MB float64
references), so a one-process sweep over ONNX Runtime and llama.cpp at three bits was killed at
24 GB; with these caches released the process returns to 3.9 GB after each.

What a whole workload shares (the loaded model, PyTorch's fp32 references, the float32 export)
is cached where it is made and kept."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_RELEASED: list[Any] = []


def per_configuration(maxsize: int) -> Callable[[Callable[..., Any]], Any]:
    """``functools.lru_cache(maxsize)``, released by ``release``."""
    def wrap(fn: Callable[..., Any]) -> Any:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        _RELEASED.append(cached)
        return cached
    return wrap


def release() -> None:
    """Forget every configuration's preparation (the sweep moves to another)."""
    for cached in _RELEASED:
        cached.cache_clear()


def configuration(run: Any) -> tuple[Any, ...]:
    """What a run's preparation depends on (a RunSpec's workload, bits and how its weights are made)."""
    return (run.workload, run.bits, run.block_size, run.seed, run.granularity, run.weight_quant, run.weight_format)

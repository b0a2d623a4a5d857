"""A decoder page's own reply fields (per-token timestamps of every timed generation, load
phases, device memory by part), checked, and the speed figures of a row drawn from them.

Reply field ``decoder``: ``{"upload_ms", "first_forward_ms", "kv_cache_on_device": bool,
"memory": {"weights", "kv_cache", "scratch"} (bytes), "generations": [{"ttft_ms",
"token_ms": [...]}]}``, one generation per timed iteration (``wall_ms``), every one with the
same number of decode steps (new_tokens - 1). Optional ``engine_tokens``: ``{"prompt": n,
"scored": [n, ...]}``, how many tokens an engine that takes text (wllama) made of the prompt and
of each scored prefix, so Python can check they are the ids the other engines get.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import PageDataError
from ..page_fields import MAX_STEPS, memory, memory_figures, ms

FIELD = "decoder"


def _ms(value: Any, name: str) -> float:
    return ms(value, f"{FIELD}.{name}")


def _count(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= 1 << 24


def reply_fields(payload: Mapping[str, Any], max_iterations: int) -> dict[str, Any]:
    doc = payload.get(FIELD)
    if not isinstance(doc, dict):
        raise PageDataError(f"the reply has no {FIELD} object (per-token timestamps)")
    gens = doc.get("generations")
    wall = payload.get("wall_ms")
    if not isinstance(gens, list) or not isinstance(wall, list) or len(gens) != len(wall):
        raise PageDataError(f"{FIELD}.generations is not one entry per timed iteration")
    generations, steps = [], None
    for i, g in enumerate(gens[:max_iterations]):
        if not isinstance(g, dict) or not isinstance(g.get("token_ms"), list) or len(g["token_ms"]) > MAX_STEPS:
            raise PageDataError(f"{FIELD}.generations[{i}] is not {{ttft_ms, token_ms: [...]}}")
        tokens = [_ms(v, f"generations[{i}].token_ms") for v in g["token_ms"]]
        if steps is not None and len(tokens) != steps:
            raise PageDataError(f"{FIELD}.generations[{i}] has {len(tokens)} decode steps, the first had {steps}")
        steps = len(tokens)
        generations.append({"ttft_ms": _ms(g.get("ttft_ms"), f"generations[{i}].ttft_ms"), "token_ms": tokens})
    parts = memory(doc, FIELD)
    out: dict[str, Any] = {}
    if "engine_tokens" in doc:
        counts = doc["engine_tokens"]
        scored = counts.get("scored") if isinstance(counts, dict) else None
        if not isinstance(counts, dict) or not isinstance(scored, list) or len(scored) > 1 << 20 \
                or not all(_count(v) for v in [counts.get("prompt"), *scored]):
            raise PageDataError(f"{FIELD}.engine_tokens is not {{prompt: n, scored: [n, ...]}}")
        out["engine_tokens"] = {"prompt": counts["prompt"], "scored": list(scored)}
    return {FIELD: out | {
        "upload_ms": _ms(doc.get("upload_ms"), "upload_ms"),
        "first_forward_ms": _ms(doc.get("first_forward_ms"), "first_forward_ms"),
        "kv_cache_on_device": doc.get("kv_cache_on_device") is True,
        "memory": parts,
        "generations": generations,
    }}


def speed_figures(prompt_len: int, fields: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Pooled over the run's page loads: TTFT, prefill and decode tokens/s, per-token latency
    percentiles and its first and last step (how it grows with context); load phases and device
    memory from the first page."""
    docs = [f[FIELD] for f in fields if FIELD in f]
    if not docs:
        return {}
    gens = [g for d in docs for g in d["generations"]]
    ttft = float(np.median([g["ttft_ms"] for g in gens]))
    steps = [g["token_ms"] for g in gens if g["token_ms"]]
    pooled = [ms for s in steps for ms in s]
    decode = [len(s) / sum(s) * 1000.0 for s in steps if sum(s) > 0]
    first = docs[0]
    return {
        "decode_steady_class": decode_steady_class(steps),
        "ttft_ms": ttft,
        "prefill_tokens_per_s": prompt_len / ttft * 1000.0 if ttft > 0 else None,
        "decode_tokens_per_s": float(np.median(decode)) if decode else None,
        "token_ms_p50": float(np.percentile(pooled, 50)) if pooled else None,
        "token_ms_p90": float(np.percentile(pooled, 90)) if pooled else None,
        "token_ms_first": float(np.median([s[0] for s in steps])) if steps else None,
        "token_ms_last": float(np.median([s[-1] for s in steps])) if steps else None,
        "load_weights_ms": first["upload_ms"],
        "first_forward_ms": first["first_forward_ms"],
        "kv_cache_on_device": "yes" if first["kv_cache_on_device"] else "no",
        **memory_figures(first["memory"]),
    }


def decode_steady_class(steps: Sequence[Sequence[float]]) -> str:
    """Did the decode steps of each generation settle, judged after removing the growth with
    context they have by design (each step attends over one more token): each generation's steps
    divided by their least-squares line (times its mean), classified (series/steady.py); the
    worst over generations. Too few steps: too short."""
    from ...series.steady import classify, run_class

    verdicts = []
    for s in steps:
        y = np.asarray(s, dtype=np.float64)
        if y.size >= 3 and (y > 0).all():
            x = np.arange(y.size)
            line = np.polyval(np.polyfit(x, y, 1), x)
            y = y / np.maximum(line, 1e-9) * float(y.mean()) if (line > 0).all() else y
        verdicts.append(classify(y))
    return run_class(verdicts).value if verdicts else ""

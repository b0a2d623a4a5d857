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
from ...series.steps import class_text, judge_per_iteration, judge_steps, steps_per_s
from ..base import PageIterations
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


def speed_figures(prompt_len: int, pages: Sequence[PageIterations]) -> dict[str, Any]:
    """Pooled over the run's page loads: TTFT and prefill tokens/s from each page's steady TTFT
    series, decode tokens/s and the per-token latency percentiles and first and last step (how it
    grows with context) from the generations of its steady decode steps (series/steps.py), each
    figure's class beside it; load phases and device memory from the first page."""
    docs = [(p, p.fields[FIELD]) for p in pages if FIELD in p.fields]
    if not docs:
        return {}
    ttft_judged = [judge_per_iteration([g["ttft_ms"] for g in d["generations"]], p.start_ms)
                   if d["generations"] else None for p, d in docs]
    steps_judged = [judge_steps([g["token_ms"] for g in d["generations"]], p.start_ms) for p, d in docs]
    ttfts = [g["ttft_ms"] for (_, d), j in zip(docs, ttft_judged) if j is not None for g in d["generations"][j.first:]]
    steps = [g["token_ms"] for (_, d), j in zip(docs, steps_judged) if j is not None
             for g in d["generations"][j.first:] if g["token_ms"]]
    ttft = float(np.median(ttfts)) if ttfts else None
    pooled = [ms for s in steps for ms in s]
    decode = steps_per_s(steps)
    first = docs[0][1]
    return {
        "ttft_steady_class": class_text(ttft_judged),
        "decode_steady_class": class_text(steps_judged),
        "ttft_ms": ttft,
        "prefill_tokens_per_s": prompt_len / ttft * 1000.0 if ttft else None,
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

"""A speech page's own reply fields (per clip: front-end, encoder and per-token times), checked,
and the speed figures of a row drawn from them.

Reply field ``speech``: ``{"upload_ms", "memory": {"weights", "kv_cache", "scratch"} (bytes),
"clips": [{"clip": index, "frontend_ms", "encoder_ms", "first_token_ms", "token_ms": [...]}]}``,
one entry per timed iteration (``wall_ms``: that clip end to end). ``frontend_ms`` is the
log-mel front end on the device; ``encoder_ms`` the encoder and the cross-attention keys and
values (``frontend_ms`` null: the engine takes Python's features); ``first_token_ms`` the prompt's
step to the first id read back; ``token_ms`` each later step. The checked fields keep the reply's ``wall_ms`` as ``totals`` (each clip end to end).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import PageDataError
from ...series.steps import class_text, judge_steps, steps_per_s
from ..base import PageIterations
from ..page_fields import MAX_STEPS, memory, memory_figures, ms

FIELD = "speech"


def _ms(value: Any, name: str) -> float:
    return ms(value, f"{FIELD}.{name}")


def reply_fields(payload: Mapping[str, Any], max_iterations: int) -> dict[str, Any]:
    doc = payload.get(FIELD)
    if not isinstance(doc, dict):
        raise PageDataError(f"the reply has no {FIELD} object (per-clip times)")
    entries, wall = doc.get("clips"), payload.get("wall_ms")
    if not isinstance(entries, list) or not isinstance(wall, list) or len(entries) != len(wall):
        raise PageDataError(f"{FIELD}.clips is not one entry per timed iteration")
    clips = []
    for i, e in enumerate(entries[:max_iterations]):
        if not isinstance(e, dict) or not isinstance(e.get("token_ms"), list) or len(e["token_ms"]) > MAX_STEPS \
                or isinstance(e.get("clip"), bool) or not isinstance(e.get("clip"), int) or e["clip"] < 0:
            raise PageDataError(f"{FIELD}.clips[{i}] is not {{clip, frontend_ms, encoder_ms, first_token_ms, "
                                "token_ms: [...]}")
        front = e.get("frontend_ms")
        clips.append({"clip": e["clip"],
                      "frontend_ms": None if front is None else _ms(front, f"clips[{i}].frontend_ms"),
                      **{k: _ms(e.get(k), f"clips[{i}].{k}") for k in ("encoder_ms", "first_token_ms")},
                      "token_ms": [_ms(v, f"clips[{i}].token_ms") for v in e["token_ms"]]})
    parts = memory(doc, FIELD)
    totals = [_ms(v, f"wall_ms[{i}]") for i, v in enumerate(wall[:max_iterations])]
    return {FIELD: {"upload_ms": _ms(doc.get("upload_ms"), "upload_ms"), "clips": clips, "totals": totals,
                    "memory": parts}}


def speed_figures(durations_s: Sequence[float], pages: Sequence[PageIterations]) -> dict[str, Any]:
    """Pooled over the run's page loads (medians over timed clips, from each page's steady
    segment on): front end, encoder, first token, seconds per clip end to end and the real-time
    factor (those seconds / the clip's audio seconds); decode tokens/s (the steps after the first
    id) from the clips of its steady decode steps (series/steps.py), its class beside it; load
    phase and device memory from the first page."""
    docs = [(p, p.fields[FIELD]) for p in pages if FIELD in p.fields]
    if not docs:
        return {}
    if any(e["clip"] >= len(durations_s) for _, d in docs for e in d["clips"]):
        raise PageDataError(f"{FIELD}.clips names a clip the run does not have")
    entries = [(e, total) for p, d in docs for e, total in list(zip(d["clips"], d["totals"]))[p.steady_start:]]
    judged = [judge_steps([e["token_ms"] for e in d["clips"]], p.start_ms) for p, d in docs]
    decoded = [e for (_, d), j in zip(docs, judged) if j is not None for e in d["clips"][j.first:]]
    rates = steps_per_s(e["token_ms"] for e in decoded)
    first = docs[0][1]

    def median(values: list[float]) -> float | None:
        return float(np.median(values)) if values else None

    return {
        "frontend_ms": median([e["frontend_ms"] for e, _ in entries if e["frontend_ms"] is not None]),
        "encoder_ms": median([e["encoder_ms"] for e, _ in entries]),
        "first_token_ms": median([e["first_token_ms"] for e, _ in entries]),
        "decode_steady_class": class_text(judged),
        "decode_tokens_per_s": median(rates),
        "clip_s": median([total / 1000.0 for _, total in entries]),
        "real_time_factor": median([total / 1000.0 / durations_s[e["clip"]] for e, total in entries]),
        "load_weights_ms": first["upload_ms"],
        **memory_figures(first["memory"]),
    }


def per_clip_level(fields: Mapping[str, Any], wall_ms: Sequence[float]) -> list[float]:
    """``wall_ms`` with each iteration divided by the median of its clip's iterations and times
    the median of all: one level where the speed is one, whichever clip an iteration took."""
    clips = [e["clip"] for e in fields.get(FIELD, {}).get("clips", [])]
    if len(clips) != len(wall_ms) or not wall_ms:
        return list(wall_ms)
    wall = np.asarray(wall_ms, dtype=np.float64)
    level = {c: float(np.median(wall[[i for i, k in enumerate(clips) if k == c]])) for c in set(clips)}
    overall = float(np.median(wall))
    return [w / level[c] * overall if level[c] > 0 else w for w, c in zip(wall_ms, clips)]

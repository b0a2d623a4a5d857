"""Findings: Gemma 3 270M, the second decoder family, on every decoder engine (the harness's WGSL
kernels and WebNN graphs, ONNX Runtime Web, transformers.js, llama.cpp), in Chrome and Firefox at
32, 8 and 4 bits: SmolLM2's figures, then what Gemma adds: which runs met a limit (and which), and
whether float16 activations overflowed."""

from __future__ import annotations

import pandas as pd

from ..workloads.decoder.prepared import FLOAT16_MAX
from .decoders import engines, plots
from .page import Data, Page, label, number, rows_of, rows_table, where

ENGINES = ("gemma3-harness-webgpu", "gemma3-harness-webnn", "gemma3-ort", "gemma3-ort-webgpu", "gemma3-wllama",
           "gemma3-tjs")


def body(data: Data) -> list[str]:
    rows = rows_of(data, *data)
    return [*engines(data), *limits(rows), *float16(rows)]


def limits(rows: pd.DataFrame) -> list[str]:
    """The runs that did not measure, each with its outcome and reason: a limit named before the
    page (a refusal) or met in it."""
    missed = rows[rows["outcome"] != "ok"]
    if missed.empty:
        return []
    shown = missed.assign(label=missed.apply(label, axis=1), where=missed.apply(where, axis=1),
                          reason=missed["reason"].fillna("").astype(str))
    shown = shown.drop_duplicates(["label", "where", "outcome", "reason"])
    return ["## Runs that met a limit", "",
            "Each run that measured nothing, with its outcome and the reason it gives: a limit the harness names "
            "before the page, or what the browser or engine said.", "",
            *rows_table(shown, {"label": "precision", "where": "where", "outcome": "outcome", "reason": "reason"}),
            ""]


def float16(rows: pd.DataFrame) -> list[str]:
    """Where an engine computed in float16: whether its activations overflowed (non-finite logits,
    and PyTorch fp32's largest activation against float16's largest finite value)."""
    peak = pd.to_numeric(rows["fp32_activation_peak"], errors="coerce").dropna()
    f16 = rows[(rows["outcome"] == "ok") & rows["fp16_overflow"].fillna("").astype(str).ne("")]
    lines = ["## Float16 activations", ""]
    if len(peak):
        lines += [f"PyTorch fp32's largest activation over the evaluation texts is {number(peak.max())}, "
                  + ("past" if peak.max() > FLOAT16_MAX else "within") + f" float16's largest finite value "
                  f"({FLOAT16_MAX:,.0f}): an engine that keeps activations in float16 without rescaling "
                  + ("loses it." if peak.max() > FLOAT16_MAX else "holds it."), ""]
    if f16.empty:
        return lines + ["No run computed in float16.", ""]
    f16 = f16.assign(label=f16.apply(label, axis=1), where=f16.apply(where, axis=1))
    return lines + ["The runs that computed in float16 (their engine's compute type), and what they show:", "",
                    *rows_table(f16, {"label": "precision", "where": "where", "compute_dtype": "computed in",
                                      "fp16_overflow": "overflow", "next_token_top1": "top-1", "kl_mean": "KL"}),
                    ""]


PAGE = Page("gemma3", "Gemma 3 270M on every engine", ENGINES, body, plots("Gemma 3 270M", ENGINES))

"""The report's "Int8 activations" section: each int8-activation configuration (W8A8, W4A8) next
to the weight-only run of the same setting and weight bits, per observer: what int8 activations
cost in accuracy and what they do to latency, measured in the same sweep.

Accuracy is the row's own figure against the all-float reference: cosine mean and top-1 agreement
vs PyTorch fp32 for whole models, the relative error vs the float product for matmuls. Latency
is the configuration's median with its p10-p90; whether it changed is the at-a-glance table's rule
(glance.latency_change).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..workloads.onnx_file import ONNX_FILE

from ..results.reader import CONFIG_KEY
from ..values import is_blank
from .glance import latency_change, median_text
from .markdown import how_to_read_html, how_to_read_markdown, html_table, markdown_table, number

WITHOUT_ACTS = tuple(c for c in CONFIG_KEY if c not in ("act_bits", "observer"))
"""A weight-only configuration and its int8-activation runs share these columns."""
NOTE = ("Int8 activations: each linear layer's input quantized per tensor to int8 with a scale and zero "
        "point the observer calibrated (whole models: over the calibration texts, none of which is "
        "evaluated; matmuls: over draws of x's own distribution). WebGPU runs the harness's DP4A kernels "
        "(int8 x int8 dot products, i32 sums); WebNN writes quantizeLinear -> dequantizeLinear in front "
        "of the layer, and the browser decides how to run it. Accuracy is against the all-float "
        "reference, so it counts weights and activations together.")


def _latency_change(act: pd.Series, base: pd.Series) -> str:
    """int8 / weight-only latency, and the at-a-glance table's verdict on it."""
    change = latency_change(act, base)
    if change is None:
        return ""
    speedup, same = change
    word = "same" if same else ("faster" if speedup > 1 else "slower")
    return f"{1 / speedup:.2f}x ({word})"


def _ms(row: pd.Series) -> str:
    return median_text(row, lambda v: f"{v:.4g}", unit="", blank="")


def _f(value: Any, spec: str) -> str:
    v = number(value)
    return "" if v is None else format(v, spec)


def activation_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One line per int8-activation configuration with its weight-only twin ('' where none ran)."""
    if summary.empty or "act_bits" not in summary:
        return pd.DataFrame()
    if "kind" in summary:  # an ONNX file's int8-qdq is a variant of its own section's table
        summary = summary[summary["kind"] != ONNX_FILE.name]
    acts = pd.to_numeric(summary["act_bits"], errors="coerce")
    if not (acts == 8).any():
        return pd.DataFrame()
    keys = [c for c in ("sweep", *WITHOUT_ACTS) if c in summary]

    def key(r: pd.Series) -> tuple[Any, ...]:  # a blank (NaN, NA) column matches a blank one
        return tuple(None if is_blank(r[k]) else r[k] for k in keys)

    base_of = {key(r): r for _, r in summary[acts == 32].iterrows()}
    lines = []
    for _, row in summary[acts == 8].iterrows():
        base = base_of.get(key(row))
        model = bool(str(row.get("model", "") or "").strip())
        line = {
            "setting": f"{row['browser']} {row['engine']}/{row['platform']}",
            "workload": (f"{row['model']} {int(row['batch_size'])}x{int(row['seq_len'])}" if model
                         else str(row["shape"])),
            "weights": f"{int(row['bits_requested'])}-bit",
            "observer": row.get("observer", ""),
        }
        if model:
            line |= {
                "cosine mean: weight-only": _f(base["cosine_mean"], ".5f") if base is not None else "",
                "cosine mean: int8 acts": _f(row["cosine_mean"], ".5f"),
                "top-1: weight-only": _f(base["top1_agreement"], ".3f") if base is not None else "",
                "top-1: int8 acts": _f(row["top1_agreement"], ".3f"),
            }
        else:
            line |= {
                "rel err vs float: weight-only": _f(base["rel_error_vs_float"], ".3g") if base is not None else "",
                "rel err vs float: int8 acts": _f(row["rel_error_vs_float"], ".3g"),
            }
        line |= {
            "median ms (p10-p90): weight-only": _ms(base) if base is not None else "",
            "median ms (p10-p90): int8 acts": _ms(row),
            "int8 acts / weight-only": _latency_change(row, base) if base is not None else "",
            "ran as": " ".join(filter(None, [str(row.get("compute_dtype", "") or ""),
                                             str(row.get("kernel_variant", "") or "")])),
        }
        lines.append(line)
    table = pd.DataFrame(lines)
    # Models and matmuls have different accuracy columns: blank, not NaN, where a kind has none.
    return table.fillna("")


def activation_section(summary: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(Markdown lines, HTML parts) of the section; nothing when no run had int8 activations."""
    table = activation_table(summary)
    if table.empty:
        return [], []
    md = ["## Int8 activations vs weight-only", "", markdown_table(table), "", *how_to_read_markdown([NOTE])]
    parts = ['<h2 id="int8-activations">Int8 activations vs weight-only</h2>', html_table(table),
             how_to_read_html([NOTE])]
    return md, parts

"""Findings: WebNN's integer path and int8 activations. Per-channel 8-bit weights in each WebNN
graph form (the fused int8 ``gemm_qdq``, its unfused control ``gemm``, weight-only
``gemm_scale``) beside ONNX Runtime Web's QDQ models on WebNN and wasm, for the FFN's matmul and
MiniLM; and int8 activations (W8A8, W4A8) against weight-only, for matmuls and MiniLM, on WebGPU
and WebNN."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..report.glance import latency_change
from ..report.markdown import markdown_lines
from ..report.steady import MARK, tally_line
from ..series.steady import SteadyClass
from .page import Data, Page, number, rows_of, summary, what_ran

INTEGER_PATH = ("integer-path-matmul", "integer-path-minilm")
INT8_ACTIVATIONS = ("int8-activations-matmul", "int8-activations-minilm")
KEY = ["workload", "browser", "engine", "platform", "bits_requested", "granularity", "act_bits", "observer",
       "graph_form"]
"""What tells one configuration of these folders from another."""


def _weights(row: pd.Series) -> str:
    bits = int(float(row["bits_requested"]))
    return "float32" if bits == 32 else f"int{bits} {row['granularity']}"


def _activations(row: pd.Series) -> str:
    if int(float(row["act_bits"])) == 32 or int(float(row["bits_requested"])) == 32:
        return "float32"
    return f"int8 ({row['observer']})" if isinstance(row["observer"], str) and row["observer"] else "int8"


def _form(row: pd.Series) -> str:
    form = row.get("graph_form")
    return f"`{form}`" if isinstance(form, str) and form else "-"


def _accuracy(row: pd.Series) -> str:
    if row["kind"] == "matmul":
        return f"rel. error {number(row['rel_error_vs_float'], 3)}"
    return f"cosine {number(row['cosine_mean'], 5)}"


@dataclass(frozen=True)
class Config:
    """One configuration of a folder, as its table line shows it."""

    workload: str
    place: str
    """'chrome harness webnn'"""
    weights: str
    activations: str
    form: str
    shown: str
    """median (p10-p90) ms, or the outcome where no run was ok"""
    over_base: float | None
    """its median over its baseline's (BASELINES)"""
    judged: str
    """'' for a change, else why it is the same (report/glance.latency_change); 'baseline' for the
    baseline itself"""
    accuracy: str
    kernel: str

    @property
    def against(self) -> str:
        if self.over_base is None:
            return "-"
        if self.judged == "baseline":
            return "baseline"
        return f"{self.over_base:.2f}x ({self.judged or ('faster' if self.over_base < 1 else 'slower')})"

    @property
    def what(self) -> str:
        return f"{self.place}, {self.weights} weights, {self.activations} activations" + \
            (f", {self.form}" if self.form != "-" else "")


BASELINES = {"float32": ("bits_requested", ()), "weight-only": ("act_bits", ("bits_requested", "granularity"))}
"""What a table's configurations are set against: the fastest configuration of the same workload,
browser and platform (and the same values of the named columns) whose first column is 32: float32
weights and activations; float activations with the same weights."""


def configurations(data: Data, name: str, baseline: str = "float32") -> list[Config]:
    """One per configuration: the median of its runs' medians (p10-p90 of their samples) from the
    report's summary, against the fastest ``baseline`` of the same browser and platform (judged by
    the report's rule), or its outcome where no run was ok."""
    summed = summary(data, name)
    rows = rows_of(data, name)
    measured = {tuple(str(v) for v in r[KEY]): r for _, r in summed.iterrows()}
    out = []
    for key, group in rows.groupby(KEY, sort=False, dropna=False):
        first = group.iloc[0]
        row = measured.get(tuple(str(v) for v in key))
        head = (str(first["workload"]), f"{first['browser']} {first['engine']} {first['platform']}",
                _weights(first), _activations(first), _form(first))
        if row is None:
            out.append(Config(*head, str(first["outcome"]), None, "", "-", "-"))
            continue
        column, same = BASELINES[baseline]
        floats = summed[pd.to_numeric(summed[column]) == 32]
        for c in ("workload", "browser", "platform", *same):
            floats = floats[floats[c].astype(str) == str(row[c])]
        base = floats.loc[pd.to_numeric(floats["latency_ms_median"]).idxmin()] if len(floats) else None
        if base is not None and base.name == row.name:
            over, judged = 1.0, "baseline"
        else:
            change = latency_change(row, base) if base is not None else None
            over, judged = (1 / change[0], change[1]) if change else (None, "")
        noted = what_ran(row)
        ran = f" ({', '.join(noted)})" if noted else ""
        mark = f" {MARK}" if row["steady_class"] == SteadyClass.NO_STEADY.value else ""
        out.append(Config(*head, f"{number(row['latency_ms_median'])}{mark} ({number(row['latency_ms_p10'])}-"
                                 f"{number(row['latency_ms_p90'])}){ran}", over, judged, _accuracy(row),
                          f"{number(row['rel_error_vs_dequantized'], 2)} / {number(row['kernel_tolerance'], 2)}"))
    return out


def says(configs: list[Config], baseline: str) -> list[str]:
    """The configurations faster than their baseline and (against float32) the fastest weight-only
    int8 one."""
    judged = [c for c in configs if c.over_base is not None and c.judged != "baseline"]
    faster = sorted((c for c in judged if c.over_base < 1 and not c.judged), key=lambda c: c.over_base)
    lines = [f"- Faster than {baseline}: " + ("; ".join(f"{c.what}: {c.over_base:.2f}x the {baseline} median "
                                                         f"({c.accuracy})" for c in faster) or "none") + "."]
    weight_only = sorted((c for c in judged if c.activations == "float32" and c.weights != "float32"),
                         key=lambda c: c.over_base)
    if weight_only and baseline == "float32":
        best = weight_only[0]
        lines.append(f"- The fastest weight-only int8: {best.what}: {best.against}.")
    return lines


def table(data: Data, name: str, baseline: str = "float32") -> list[str]:
    """A table per workload of the folder."""
    rows = rows_of(data, name)
    configs = configurations(data, name, baseline)
    header = ["browser, engine, platform", "weights", "activations", "graph form", "median ms (p10-p90)",
              f"against {baseline}", "accuracy", "kernel err / tol"]
    lines = []
    for workload, at in rows.groupby("workload", sort=False):
        mine = [c for c in configs if c.workload == workload]
        body = [[c.place, c.weights, c.activations, c.form, c.shown, c.against, c.accuracy, c.kernel] for c in mine]
        lines += [f"### {workload}", "", tally_line(at), "", *says(mine, baseline), "", *markdown_lines(header, body),
                  ""]
    return lines


INTRO = ("Per configuration: the median of its runs' medians with p10-p90 of their pooled samples (the report's "
         "summary); against float32 is its median over that of the fastest float32 configuration of the same "
         "browser and platform (below 1: faster), \"same\" when the spreads overlap or the medians differ by less "
         "than 10% (the report's rule); accuracy is against the float weights (matmuls: relative RMS error) or "
         "PyTorch fp32 (MiniLM: mean cosine); the kernel error is against the float64 reference on the same held "
         "bytes (with the int8 output for `gemm_qdq`). A configuration whose runs were not ok shows its outcome; the "
         "data holds its reason.")


def body(data: Data) -> list[str]:
    lines = ["## WebNN's integer path: per-channel 8-bit weights in each graph form", "", INTRO, ""]
    for name in INTEGER_PATH:
        lines += table(data, name)
    lines += ["## int8 activations (W8A8, W4A8) against weight-only", "",
              "The same figures, each configuration against the weight-only configuration (float "
              "activations, the same weights) of the same browser and platform: what int8 activations buy and "
              "cost there (blockwise weights, the default; the activations' scales calibrated by the default "
              "observer: on 8 draws of the timed activations' distribution for the matmuls, on the built-in "
              "calibration texts for MiniLM). On WebGPU the int8 configurations run the DP4A kernel "
              "(`dot4I8Packed`).", ""]
    for name in INT8_ACTIVATIONS:
        lines += table(data, name, "weight-only")
    return lines


PAGE = Page("integer-path", "WebNN's integer path and int8 activations", (*INTEGER_PATH, *INT8_ACTIVATIONS), body)

"""Findings: WebNN's integer path and int8 activations. Per-channel 8-bit weights in each WebNN
graph form (the fused int8 ``gemm_qdq``, its unfused control ``gemm``, weight-only
``gemm_scale``) beside ONNX Runtime Web's QDQ models on WebNN and wasm, for the FFN's matmul and
MiniLM; int8 activations (W8A8, W4A8) against weight-only, for matmuls and MiniLM, on WebGPU
and WebNN; and generation with int8 activations (SmolLM2-135M, Whisper tiny.en) on WebNN against
float32 and weight-only, beside ONNX Runtime Web."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..report.glance import latency_change
from ..report.markdown import markdown_lines
from ..report.steady import MARK, tally_line
from ..series.steady import SteadyClass
from .page import Data, Page, mib, number, rows_of, shown, summary, what_ran

INTEGER_PATH = ("integer-path-matmul", "integer-path-minilm")
INT8_ACTIVATIONS = ("int8-activations-matmul", "int8-activations-minilm")
GENERATION_TABLES = (
    ("SmolLM2-135M, int8 inputs smoothed and scaled per token, layers missing the 35 dB floor in float32",
     ("int8-generation-smollm2-per-token",)),
    ("SmolLM2-135M, int8 inputs smoothed", ("int8-generation-smollm2-smoothed",)),
    ("SmolLM2-135M, before smoothing", ("int8-generation-smollm2", "int8-generation-smollm2-ort")),
    ("Whisper tiny.en, int8 inputs smoothed and scaled per token, layers missing the 38 dB floor in float32",
     ("int8-generation-whisper-per-token",)),
    ("Whisper tiny.en, int8 inputs smoothed", ("int8-generation-whisper-smoothed",)),
    ("Whisper tiny.en, before smoothing",
     ("int8-generation-whisper", "int8-generation-whisper-ort", "int8-generation-whisper-ort-webnn")),
)
"""The generation section's tables, each from its folders (a later folder's run of a configuration
replaces an earlier's: ORT's int8 rows, measured once its QDQ form was built, replace the first
sweep's refusals); speed ratios are within one table's folders."""
INT8_GENERATION = tuple(name for _, folders in GENERATION_TABLES for name in folders)
GENERATION_FIGURES = {
    "decoder": {"ttft_ms": "time to first token ms", "decode_tokens_per_s": "decode tokens/s",
                "next_token_top1": "top-1 vs fp32", "kl_mean": "KL"},
    "speech": {"encoder_ms": "encoder ms", "first_token_ms": "first id ms", "decode_tokens_per_s": "decode ids/s",
               "wer_vs_fp32": "WER vs fp32", "clips_equal_fp32": "clips = fp32"},
}
"""What a generation table shows per kind, beside the weights and the kernel check."""
GENERATION_KEY = ["workload", "browser", "engine", "platform", "bits_requested", "granularity", "act_bits"]
"""A configuration of a generation table's folders."""
KEY = ["workload", "browser", "engine", "platform", "bits_requested", "granularity", "act_bits", "observer",
       "graph_form"]
"""What tells one configuration of these folders from another."""


def _weights(row: pd.Series) -> str:
    bits = int(float(row["bits_requested"]))
    return "float32" if bits == 32 else f"int{bits} {row['granularity']}"


def _activations(row: pd.Series) -> str:
    if int(float(row["act_bits"])) == 32 or int(float(row["bits_requested"])) == 32:
        return "float32"
    how = [v for v in (row["act_scale"], row["observer"], row["act_smoothing"]) if isinstance(v, str) and v]
    return f"int8 ({', '.join(how)})" if how else "int8"


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


def generation(title: str, rows: pd.DataFrame) -> list[str]:
    """One model's runs, one line each: its weights, activations and form, time to the first id,
    decode speed and that over the float32 run of the same browser, engine and platform, weight
    MiB, accuracy against PyTorch fp32 and the kernel check; a run that was not ok shows its
    outcome (the data holds its reason)."""
    figures = GENERATION_FIGURES[str(rows["kind"].iloc[0])]
    place = ["browser", "engine", "platform"]
    floats = rows[(pd.to_numeric(rows["bits_requested"]) == 32) & (rows["outcome"] == "ok")]
    body = []
    for _, row in rows.iterrows():
        base = floats
        for c in place:
            base = base[base[c] == row[c]]
        ok = row["outcome"] == "ok"
        ratio = (pd.to_numeric(row["decode_tokens_per_s"]) / pd.to_numeric(base["decode_tokens_per_s"]).iloc[0]
                 if ok and len(base) else None)
        noted = what_ran(row)
        cells = [" ".join(str(row[c]) for c in place) + (f" ({', '.join(noted)})" if noted else ""),
                 _weights(row), _activations(row), _form(row)]
        cells += [shown(c, row[c]) if ok else str(row["outcome"]) for c in figures]
        cells += [f"{ratio:.2f}x" if ratio is not None else "-", shown("weight_mib", row["weight_mib"]) if ok else "-",
                  f"{number(row['rel_error_vs_dequantized'], 2)} / {number(row['kernel_tolerance'], 2)}"
                  if pd.notna(pd.to_numeric(row["kernel_tolerance"])) else "-"]
        body.append(cells)
    header = ["browser, engine, platform", "weights", "activations", "graph form", *figures.values(),
              "decode over float32", "weight MiB", "kernel err / tol"]
    return [f"### {title}", "", tally_line(rows, "decode_steady_class", "decode speed"), "",
            *markdown_lines(header, body), ""]


GENERATION_INTRO = (
    "Decoders and speech on Chromium's WebNN (LiteRT/XNNPACK, CPU): float32, per-channel 8-bit weights with "
    "float activations, and W8A8 (per-channel 8-bit weights in `gemm_qdq`, each 8-bit layer's input and output "
    "through int8, scales calibrated on the calibration split; a decoder's int8 inputs smoothed first where the "
    "activations column says so: SmoothQuant folded into the weights; scaled per token where it says per-token: "
    "each position divided by its own peak |x| around the fused form, and the layers whose int8 outputs miss the "
    "floor held in float32), beside ONNX Runtime Web on wasm and WebNN "
    "with the same held bytes (ORT's W8A8: its int8 QDQ form with the same parameters; a later folder's run of a "
    "configuration replaces an earlier folder's). Each line is one page load (decode speed: the median step of "
    "its steady generations or clips); decode over float32 is its speed over the float32 run of the same browser, "
    "engine and platform. Accuracy is against PyTorch fp32 (decoders: teacher-forced next-token top-1 and mean KL "
    "over the built-in texts; speech: word error rate of the transcripts against fp32's and the clips transcribed "
    "exactly as fp32 did); the kernel error is against the float64 reference with the same held bytes and int8 "
    "activations. Whisper's W8A8 rows from the per-token table on are judged stage by stage (its first-step logits "
    "against the float64 decoder on the page's own encoder output, the encoder output against the float64 "
    "encoder); the earlier tables' were judged end to end, where the encoder's rounding flips move those logits "
    "as far as their wide tolerance, so that check said little and the transcripts' WER is the firmer figure. A "
    "run that was not ok shows its outcome; the data holds its reason.")


def generation_body(data: Data) -> list[str]:
    lines = ["## Generation with int8 activations: decoders and speech", "", GENERATION_INTRO, ""]
    for title, folders in GENERATION_TABLES:
        lines += generation(title, mib(rows_of(data, *folders)).drop_duplicates(GENERATION_KEY, keep="last"))
    return lines


def page_body(data: Data) -> list[str]:
    return body(data) + generation_body(data)


PAGE = Page("integer-path", "WebNN's integer path and int8 activations",
            (*INTEGER_PATH, *INT8_ACTIVATIONS, *INT8_GENERATION), page_body)

"""Findings: the weight quantizers (``benchmarks/quantizer_sweep.py``): MiniLM, SmolLM2-135M and
Whisper tiny.en at 32, 8, 4 and 2 bits with every quantizer, on the harness's WGSL (Firefox), its
WebNN graphs (Chrome, experimental mode) and ONNX Runtime Web's wasm (Chrome): the same held bytes
on three engines, one folder per model and setting."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

from ..precision.quantizers import QUANTIZERS
from ..report.markdown import markdown_lines
from .page import Data, Page, label, mib, number, pick_lines, rows_of, rows_table, shown, where

SETTINGS = {"webgpu-firefox": "WGSL (Firefox)", "webnn-chrome": "WebNN (Chrome)",
            "ort-wasm-chrome": "ORT wasm (Chrome)"}
"""quantizer_sweep.py's settings, in its order, and their column names."""
MODELS = {
    "minilm": ("all-MiniLM-L6-v2", {"cosine_mean": "cosine"}),
    "smollm2": ("SmolLM2-135M", {"next_token_top1": "top-1", "kl_mean": "KL", "decode_tokens_per_s": "tok/s"}),
    "whisper": ("Whisper tiny.en", {"wer_vs_fp32": "WER vs fp32", "clips_equal_fp32": "clips = fp32",
                                    "latency_ms_median": "ms a clip"}),
}
"""Each model's title and the figures shown per setting (column -> header)."""


CONDITIONS = {
    "quantizers-smollm2-webnn-chrome": "its 4-bit `gptq-offset` run first timed out while another session's browser "
    "runs shared the two cores, and was re-run alone (`--resume ... --retry-failed` at commit f2fe3ae, 7 min); its "
    "4-bit `kquant` and `gptq` runs shared the cores.",
    "quantizers-smollm2-ort-wasm-chrome": "most runs shared the two cores with another session's browser runs: its "
    "speeds are the least trustworthy here.",
    "quantizers-held-wllama": "its runs 4-7 (shipped, and held with offset, hqq and kquant) shared the two cores "
    "with a PyTorch benchmark: their speeds are not comparable with the others'.",
}
"""What the data cannot say of how a folder was measured (from the sessions that ran them)."""


def conditions(names: Iterable[str]) -> list[str]:
    noted = [f"- `{name}`: {CONDITIONS[name]}" for name in names if name in CONDITIONS]
    return ["How these ran:", "", *noted, ""] if noted else []


def folder(model: str, setting: str) -> str:
    return f"quantizers-{model}-{setting}"


SWEEP = tuple(folder(m, s) for m in MODELS for s in SETTINGS)
FLOAT_ZERO_WEBNN = ("quantizers-webnn-float-zero-minilm", "quantizers-webnn-float-zero-whisper")
MIXED = ("quantizers-mixed-minilm", "quantizers-mixed-whisper")
HELD_IN_LLAMA = ("quantizers-held-wllama",)
FOLDERS = (*SWEEP, *FLOAT_ZERO_WEBNN, *MIXED, *HELD_IN_LLAMA)
ACCURACY = {"cosine_mean": "cosine", "wer_vs_fp32": "WER vs fp32", "clips_equal_fp32": "clips = fp32"}


def _line(group: pd.DataFrame, figures: dict[str, str]) -> list[str]:
    """One setting's cells for one bits and quantizer: its figures, or its outcome and reason."""
    if group.empty:
        return [""] * len(figures)
    row = group.iloc[0]
    if row["outcome"] != "ok":
        return [str(row["outcome"]), *[""] * (len(figures) - 1)]
    return [shown(c, row[c]) for c in figures]


def table(data: Data, model: str) -> list[str]:
    title, figures = MODELS[model]
    rows = mib(rows_of(data, *(folder(model, s) for s in SETTINGS)))
    setting_of = {folder(model, s): s for s in SETTINGS}
    rows = rows.assign(setting=rows["folder"].map(setting_of),
                       quantizer=rows["weight_quant"].fillna("minmax"),
                       _q=rows["weight_quant"].map({q: i for i, q in enumerate(QUANTIZERS)}).fillna(0),
                       _b=-pd.to_numeric(rows["bits_requested"]))
    head = ["bits", "quantizer", "weight MiB", *(f"{SETTINGS[s]} {h}" for s in SETTINGS for h in figures.values())]
    body = []
    for (bits, quantizer), group in rows.sort_values(["_b", "_q"]).groupby(["bits_requested", "quantizer"],
                                                                            sort=False):
        if int(bits) == 32 and quantizer != group["quantizer"].iloc[0]:
            continue
        ok = group[group["outcome"] == "ok"]
        cells = [str(int(bits)), "-" if int(bits) == 32 else f"`{quantizer}`",
                 number(ok["weight_mib"].iloc[0], 4) if len(ok) else "-"]
        for s in SETTINGS:
            cells += _line(group[group["setting"] == s], figures)
        body.append(cells)
    lines = markdown_lines(head, body)
    ok = rows[rows["outcome"] == "ok"]
    kernel = pd.to_numeric(ok["rel_error_vs_dequantized"])
    within = (kernel <= pd.to_numeric(ok["kernel_tolerance"])).sum()
    refused = rows[rows["outcome"] != "ok"]
    reasons = sorted({f"{SETTINGS[r.setting]}: " + re.sub(r"\(the \S+ quantizer's\) ", "", str(r.reason).split(";")[0])
                      for r in refused.itertuples()})
    shown = [f"## {title}", "", *conditions(setting_of),
             f"{len(rows)} runs ({len(ok)} ok). Every ok run's kernel error against the float64 reference on its "
             f"held bytes: {number(kernel.min(), 2)} to {number(kernel.max(), 2)}, {within} of {len(ok)} within "
             "their tolerance.", "", *lines, ""]
    if reasons:
        shown += ["Not measured:", "", *(f"- {r}" for r in reasons), ""]
    return shown + ["The report's pick per setting (the same rule as every report's first screen):", "",
                    *pick_lines(data, *(folder(model, s) for s in SETTINGS)), ""]


def _runs(data: Data, names: tuple[str, ...]) -> pd.DataFrame:
    rows = mib(rows_of(data, *names))
    return rows.assign(where=rows.apply(where, axis=1), label=rows.apply(label, axis=1))


def beside_the_sweep(data: Data) -> list[str]:
    """The runs that ask one question each: WebNN holding float zero points, the mixed rules, and
    llama.cpp running the harness's codes."""
    kernel = {"rel_error_vs_dequantized": "kernel err"}
    return ["## WebNN holding float zero points (int4, `--experimental-precision`)", "",
            "The zero as a float offset needs an extra subtraction per block in WebNN's graph; the same bytes "
            "as the WGSL kernels hold.", "",
            *rows_table(_runs(data, FLOAT_ZERO_WEBNN), {"model": "model", "where": "where", "weight_quant": "quantizer",
                                                        "weight_mib": "weight MiB", **ACCURACY,
                                                        "latency_ms_median": "ms", **kernel}), "",
            "## Mixed precision (`--mixed-precision`: its rules keep the costliest layers at 8 bits)", "",
            *rows_table(_runs(data, MIXED), {"model": "model", "where": "where", "precision_plan": "plan",
                                             "weight_quant": "quantizer", "weight_mib": "weight MiB", **ACCURACY,
                                             "latency_ms_median": "ms", **kernel}), "",
            "## llama.cpp running the harness's codes (wllama: `held` GGUF files beside its own)", "",
            "SmolLM2-135M in llama.cpp's wasm build: its own Q4_0 and Q4_1, the Q4_1 file SmolLM2 ships, and the "
            "harness's 4-bit codes of each quantizer written as Q4_1 (`held`); top-1 and KL against PyTorch fp32.",
            "", *conditions(HELD_IN_LLAMA),
            *rows_table(_runs(data, HELD_IN_LLAMA), {"label": "file", "where": "where", "weight_mib": "weight MiB",
                                                     "next_token_top1": "top-1", "kl_mean": "KL",
                                                     "decode_tokens_per_s": "decode tok/s", "ttft_ms": "TTFT ms"}),
            ""]


def body(data: Data) -> list[str]:
    intro = ["Accuracy against PyTorch fp32 (MiniLM: mean cosine of the embeddings; SmolLM2: next-token top-1 "
             "and mean KL, teacher-forced; Whisper: WER against PyTorch fp32's transcripts and the clips "
             "transcribed as fp32 did, of 30), then one speed figure. The same quantizer "
             "gives the same held bytes on every engine, so where two engines ran them their accuracy agrees: "
             "what differs is what each engine can hold (WebNN has no 2-bit type; ORT's MatMulNBits holds float "
             "zero points at 4 and 2 bits only). Speeds here are one page load a run on a 2-core machine: compare "
             "them within a column, never across machines.", ""]
    return intro + [line for model in MODELS for line in table(data, model)] + beside_the_sweep(data)


PAGE = Page("quantizers", "Weight quantizers: every quantizer and bits on three engines", FOLDERS, body)

"""Findings: the memory each engine really uses, measured around its own calls (web/meter.js: WebGPU
buffers, WebAssembly memory) for MiniLM and SmolLM2-135M on the harness, ONNX Runtime Web,
transformers.js and llama.cpp (wllama), beside the weights as held, with ONNX Runtime's two buffer
cache modes side by side."""

from __future__ import annotations

import pandas as pd

from ..report.markdown import fmt_bytes, markdown_table
from ..report.memory import NOTE, memory_table
from .page import Data, Page, rows_of, summary

FOLDERS = ("memory-minilm", "memory-smollm2")


def tables(data: Data) -> list[str]:
    rows = rows_of(data, *FOLDERS)
    ok = rows[rows["outcome"] == "ok"]
    gpu, wasm = ok[ok["platform"] == "webgpu"], ok[ok["platform"] == "wasm"]
    covered = int((pd.to_numeric(gpu["gpu_peak_bytes"]) >= pd.to_numeric(gpu["weight_bytes"])).sum())
    metered = int(pd.to_numeric(wasm["wasm_peak_bytes"]).notna().sum())
    summed = summary(data, *FOLDERS)
    return ["## Held and measured", "",
            f"Of {len(gpu)} ok WebGPU runs, {covered} measured a GPU peak of at least their weights' bytes; "
            f"{metered} of {len(wasm)} ok wasm runs measured their WebAssembly memory. {NOTE}", "",
            markdown_table(memory_table(summed)), "",
            "## ONNX Runtime's buffer cache modes", "",
            "The same runs at `--buffer-cache bucket` (ORT's default) and `simple`: the GPU bytes live at once "
            "while timed, and the process tree's peak. GPU bytes are counted, not sampled (the same figures in "
            "both browsers); the process peak is sampled every 100 ms and varies between page loads, and each "
            "mode here is one page load.", "",
            *cache_lines(summed), ""]


def cache_lines(summed: pd.DataFrame) -> list[str]:
    """One line per setting run at two or more cache modes: each mode's figures."""
    cached = summed[summed["buffer_cache"].astype(str).str.len() > 0]
    lines = []
    for key, group in cached.groupby(["workload", "browser", "engine", "bits_requested"], sort=False):
        if group["buffer_cache"].nunique() < 2:
            continue
        workload, browser, engine, bits = key
        modes = "; ".join(f"{r.buffer_cache}: {fmt_bytes(r.gpu_measured_peak_bytes)} GPU while timed, "
                          f"{fmt_bytes(r.proc_rss_peak_bytes)} process RSS peak" for r in group.itertuples())
        lines.append(f"- {workload}, {browser} {engine}/webgpu {int(bits)}-bit: {modes}")
    return lines


PAGE = Page("memory", "The memory each engine really uses", FOLDERS, tables,
            figure=("results.csv", "gpu_peak_bytes"))

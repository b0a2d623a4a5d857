"""Findings: MiniLM (all-MiniLM-L6-v2) on every engine: the harness's WGSL kernels and WebNN
graphs and ONNX Runtime Web on WebGPU, WebNN and wasm, in Chrome and Firefox, at every width."""

from __future__ import annotations

from ..report.plots import plot_model_accuracy_latency, plot_model_latency
from ..report.steady import tally_line
from .page import Data, Page, Plot, count, mib, pick_lines, pivot, rows_of

ENGINES = ("minilm-engines",)


def engines(data: Data) -> list[str]:
    rows = mib(rows_of(data, *ENGINES))
    shape = " or ".join(f"{count(b)} x {count(n)}" for b, n in {(r.batch_size, r.seq_len) for r in rows.itertuples()})
    reps = " or ".join(sorted({str(n) for n in rows.groupby(["engine", "platform", "browser", "bits_requested"])
                               .size()}))
    return [f"## Every engine ({shape} tokens, {reps} runs a configuration, each a fresh page load)", "",
            tally_line(rows), "",
            "Which precision to pick per setting (the report's rule: of the precisions whose mean cosine with "
            "PyTorch fp32 meets the bar, the fastest; of those as fast within noise, the fewest weight bytes):", "",
            *pick_lines(data, *ENGINES), "",
            "Median ms of one forward pass (the median of the runs' medians), or the outcome where none was "
            "measured; weight MiB, mean cosine of the embeddings with PyTorch fp32 and the kernel error against "
            "the float64 reference on the same held bytes (its tolerance) from the first measured run. Each "
            "run's reason (in the data) says what ran where when it differs from what was asked.", "",
            *pivot(rows, "latency_ms_median", {"weight_mib": "weight MiB", "cosine_mean": "cos mean"}), ""]


PAGE = Page("minilm", "MiniLM on every engine", ENGINES, engines,
            (Plot("latency", "MiniLM: median ms of a forward pass against bits, per browser, engine and platform",
                  ENGINES, plot_model_latency),
             Plot("accuracy-latency", "MiniLM: accuracy against PyTorch fp32 against median ms", ENGINES,
                  plot_model_accuracy_latency)))

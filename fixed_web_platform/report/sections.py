"""What the report shows for each workload kind, registered by the kind's name: the plots of its
summary rows, and a section of its own (or none: its plots then sit under the report's shared
"Plots" heading). A kind without an entry still has every row in the shared tables.

Adding a kind's part: its plots and section in a module of report/, its first-screen ``Glance``
(the accuracy figure it is judged by and the bar a pick meets), and one entry in ``SECTIONS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..results.rows import ResultRow
from ..workloads import KINDS
from .decoders import PLOT_TITLES as DECODER_PLOTS
from .decoders import decoder_section, draw_decoder_plots, format_decoder_table
from .glance import DEFAULT_GLANCE, Accuracy, Figure, Glance
from .models import encoder_section
from .onnx_files import ONNX_GLANCE, draw_onnx_plots, format_onnx_table, onnx_section
from .onnx_files import PLOT_TITLES as ONNX_PLOTS
from .onnx_files import TITLE as ONNX_TITLE
from .plots import draw_model_plots, draw_plots
from .speech import PLOT_TITLES as SPEECH_PLOTS
from .speech import SPEECH_GLANCE, draw_speech_plots, format_speech_table, speech_section
from .speech import TITLE as SPEECH_TITLE
from .steady import terminal_legend
from .terminal import core_table, format_matmul_table, format_model_table

SectionWriter = Callable[[pd.DataFrame, pd.DataFrame, pd.DataFrame, bool, list[tuple[str, str]]],
                         tuple[list[str], list[str]]]
"""(rows of the kind, its summary rows, layers.csv lines, show the sweep?, plots as (title, file))
-> (Markdown lines, HTML parts) of its section."""


@dataclass(frozen=True)
class KindReport:
    plots: Callable[[pd.DataFrame, Path, bool], list[Path]]
    """Draw the plots of the kind's summary rows into a folder; the files written."""
    plot_titles: Mapping[str, str] = field(default_factory=dict)
    """Plot file stem -> its heading."""
    section: SectionWriter | None = None
    """The kind's own section, or None (its plots go under the shared "Plots" heading)."""
    title: str = ""
    """The heading of its own section ('Whole models')."""
    glance: Glance = DEFAULT_GLANCE
    """What the kind shows on the first screen: its accuracy figure and the bar a pick meets."""
    terminal: Callable[[Sequence[ResultRow]], str] = core_table
    """The table a sweep prints when it ends, for this kind's rows."""


MATMUL_GLANCE = Glance(
    "Matmuls", Accuracy("rel_error_vs_float", "error vs float", ".1e", higher_is_better=False, bar=0.05),
    note="a lone matmul has no task accuracy of its own, so its bar is a convention: relative RMS "
         "error at most 5% against the float64 product with the float weights (on Gaussian weights "
         "8-bit costs about 0.5%, 4-bit about 8%, 2-bit about 40%). Your model's tolerance is the one "
         "that decides: see the whole-model sections.")
ENCODER_GLANCE = Glance(
    "Encoders (whole models)", Accuracy("cosine_mean", "cosine vs fp32", ".4f", higher_is_better=True, bar=0.99),
    note="each model at its batch x sequence tokens is a setting of its own; a mixed precision plan "
         "is a precision like any other. The bar is the mean cosine similarity of each text's "
         "embedding with PyTorch float32's at least 0.99; the Whole models section has the lowest "
         "cosine, rank correlation and top-1 neighbour agreement too.")
DECODER_GLANCE = Glance(
    "Decoder LLMs", Accuracy("next_token_top1", "next-token top-1", ".1%", higher_is_better=True, bar=0.9),
    (Figure("ttft_ms", "TTFT ms", ",.0f"), Figure("decode_tokens_per_s", "decode tok/s", ",.1f")),
    note="the median is one whole generation (prompt + new tokens); TTFT is the time to the first "
         "new token and decode tok/s the generation after it. The bar is the share of evaluation "
         "positions whose next-token argmax equals PyTorch float32's, at least 90%; the Decoder LLMs "
         "section has KL, perplexity and leading greedy tokens too.")

SECTIONS: dict[str, KindReport] = {
    "matmul": KindReport(draw_plots, {
        "latency_vs_bits": "Latency vs bits", "error_vs_bits": "Error vs bits (log)",
        "weight_memory_vs_bits": "Weight memory vs bits",
        "process_memory_vs_bits": "Process memory vs bits",
        "accuracy_vs_latency": "Accuracy vs latency",
    }, terminal=format_matmul_table, glance=MATMUL_GLANCE),
    "encoder": KindReport(draw_model_plots, {
        "model_latency_vs_bits": "Model latency vs bits",
        "model_accuracy_vs_bits": "Model accuracy vs bits",
        "model_accuracy_vs_latency": "Model accuracy vs latency",
        "model_accuracy_vs_weight_bytes": "Model accuracy vs weight memory",
    }, encoder_section, "Whole models", glance=ENCODER_GLANCE, terminal=format_model_table),
    "decoder": KindReport(draw_decoder_plots, DECODER_PLOTS, decoder_section, "Decoder LLMs",
                          glance=DECODER_GLANCE, terminal=format_decoder_table),
    "onnx": KindReport(draw_onnx_plots, ONNX_PLOTS, onnx_section, ONNX_TITLE, glance=ONNX_GLANCE,
                       terminal=format_onnx_table),
    "speech": KindReport(draw_speech_plots, SPEECH_PLOTS, speech_section, SPEECH_TITLE, glance=SPEECH_GLANCE,
                         terminal=format_speech_table),
}


def terminal_tables(rows: Sequence[ResultRow]) -> str:
    """The end-of-sweep tables: one per workload kind present, in order of first appearance; under
    them one line saying what the mark on a figure without a steady state means, when one has it."""
    if not rows:
        return SECTIONS["matmul"].terminal([])
    tables = []
    present = {r.kind for r in rows}
    for kind in [k.name for k in KINDS if k.name in present] + sorted(present - {k.name for k in KINDS}):
        part = SECTIONS.get(kind)
        table = part.terminal if part is not None else core_table
        tables.append(table([r for r in rows if r.kind == kind]))
    return "\n\n".join(filter(None, [*tables, terminal_legend(rows)]))


"""What the report shows for each workload kind, registered by the kind's name: the plots of its
summary rows, and a section of its own (or none: its plots then sit under the report's shared
"Plots" heading). A kind without an entry still has every row in the shared tables.

Adding a kind's part: its plots and section in a module of report/, and one line in ``SECTIONS``.
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
from .models import encoder_section
from .plots import draw_model_plots, draw_plots
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
    glance_note: str = ""
    """What the at-a-glance table's note says of this kind's rows (HTML allowed)."""
    terminal: Callable[[Sequence[ResultRow]], str] = core_table
    """The table a sweep prints when it ends, for this kind's rows."""


SECTIONS: dict[str, KindReport] = {
    "matmul": KindReport(draw_plots, {
        "latency_vs_bits": "Latency vs bits", "error_vs_bits": "Error vs bits (log)",
        "weight_memory_vs_bits": "Weight memory vs bits",
        "process_memory_vs_bits": "Process memory vs bits",
        "accuracy_vs_latency": "Accuracy vs latency",
    }, terminal=format_matmul_table),
    "encoder": KindReport(draw_model_plots, {
        "model_latency_vs_bits": "Model latency vs bits",
        "model_accuracy_vs_bits": "Model accuracy vs bits",
        "model_accuracy_vs_latency": "Model accuracy vs latency",
        "model_accuracy_vs_weight_bytes": "Model accuracy vs weight memory",
    }, encoder_section, "Whole models",
        " Whole models are settings of their own (model, batch x sequence tokens); a mixed "
        "precision plan is never a baseline; their full figures are in the "
        "<a href=\"#models\">Whole models</a> section.", format_model_table),
    "decoder": KindReport(draw_decoder_plots, DECODER_PLOTS, decoder_section, "Decoder LLMs",
                          " Decoder LLMs are settings of their own (model, prompt + new tokens); their "
                          "tokens/s, time to first token and accuracy are in the "
                          "<a href=\"#decoders\">Decoder LLMs</a> section.", format_decoder_table),
}


def terminal_tables(rows: Sequence[ResultRow]) -> str:
    """The end-of-sweep tables: one per workload kind present, in order of first appearance."""
    if not rows:
        return SECTIONS["matmul"].terminal([])
    tables = []
    present = {r.kind for r in rows}
    for kind in [k.name for k in KINDS if k.name in present] + sorted(present - {k.name for k in KINDS}):
        part = SECTIONS.get(kind)
        table = part.terminal if part is not None else core_table
        tables.append(table([r for r in rows if r.kind == kind]))
    return "\n\n".join(filter(None, tables))


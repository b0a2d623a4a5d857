"""The report's "Speech" section: per model and clip set, one row per configuration (browser x
engine platform x precision) with the stage times (front end, encoder per 30-s window, decode
tokens/s), seconds per clip and the real-time factor, weight memory, word error rate against the
clips' transcripts and against PyTorch fp32's, clips transcribed exactly as fp32, the kernel
check and the outcome; its plot (WER vs bits); and the end-of-sweep terminal table. The row's
steady-state class (its clips' end-to-end times, the series judged) sits before the seconds per
clip, which are marked where there is no steady state (the RTF in the terminal table).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..results.rows import ResultRow
from ..values import number
from ..workloads.speech import SPEECH
from .glance import Accuracy, Figure, Glance
from .markdown import how_to_read_html, how_to_read_markdown, markdown_lines, plot_sections
from .models import (
    CONFIG_KEY,
    _bits_text,
    _f,
    _key,
    _outcome_text,
    _setting_name,
    _weights_text,
    configurations,
    table_html,
    table_markdown,
)
from .plots import _facets, _numbers, _save, _suptitle
from .steady import COLUMN, COLUMN_NOTE, marked, steady_text
from .terminal import _fmt, bits_label, class_columns

SETTING = ("model", "weights", "inputs", "clips", "max_tokens")
TITLE = "Speech"
PLOT_TITLES = {"speech_wer_vs_bits": "Speech: word error rate vs bits"}
WER_BAR = 0.05
SPEECH_GLANCE = Glance(
    "Speech", Accuracy("wer_vs_fp32", "WER vs fp32", ".1%", higher_is_better=False, bar=WER_BAR),
    (Figure("encoder_ms", "encoder ms", ",.0f"), Figure("real_time_factor", "RTF", ".2f")),
    note="the median is one clip end to end (PCM in, transcript ids out); encoder ms is one 30-second "
         "window and RTF the seconds per clip over its audio seconds. The bar is the word error rate of "
         "the engine's transcripts against PyTorch float32's at most 5%; the Speech section has the "
         "WER against the clips' own transcripts too.")
NOTES = (
    "Each row is one configuration of the model and clips named above it; figures are medians over "
    "the timed clips of its ok repetitions. Front end: the log-mel features computed on the device "
    "from the PCM (a WGSL compute shader; blank where an engine takes Python's features). Encoder: "
    "one 30-second window, with every decoder layer's cross-attention keys and values. Decode tok/s: "
    "ids after the first. s/clip: end to end, and RTF that over the clip's audio seconds (below 1 is "
    "faster than real time). WER: word error rate against the clips' transcripts after Whisper's "
    "English normaliser (jiwer); WER fp32 is PyTorch float32's own on the same clips; WER vs fp32 "
    "compares the engine's transcripts with PyTorch fp32's; = fp32: clips whose ids are exactly "
    "fp32's. Kernel error: relative RMS of the first clip's first logits against the float64 "
    "Whisper with the weights this run holds (is the engine right).")


def speech_tables(rows: pd.DataFrame, summary: pd.DataFrame, *, show_sweep: bool
                  ) -> list[tuple[str, pd.DataFrame]]:
    found = configurations(rows, summary, SPEECH.name)
    if found is None:
        return []
    first, figures, groups = found.first, found.figures, found.groups
    tables = []
    for _, setting in first.groupby([c for c in SETTING if c in first], sort=False, dropna=False):
        records = []
        for _, row in setting.iterrows():
            key = _key(row[c] for c in CONFIG_KEY)
            ok, group = figures.get(key), groups[key]
            fig: Any = ok if ok is not None else {}
            records.append({
                "browser · engine platform": _setting_name(row, show_sweep),
                "bits": _bits_text(row, ok),
                "front end ms": _f(fig.get("frontend_ms"), ",.0f"),
                "encoder ms": _f(fig.get("encoder_ms"), ",.0f"),
                "decode tok/s": _f(fig.get("decode_tokens_per_s"), ".1f"),
                COLUMN: steady_text(ok) if ok is not None else "",
                "s/clip": marked(_f(fig.get("clip_s"), ".2f"), fig),
                "RTF": _f(fig.get("real_time_factor"), ".2f"),
                "weight MiB": _weights_text(ok) if ok is not None else "",
                "WER": _f(fig.get("wer"), ".1%"),
                "WER fp32": _f(fig.get("wer_fp32"), ".1%"),
                "WER vs fp32": _f(fig.get("wer_vs_fp32"), ".1%"),
                "= fp32": (f"{_f(fig.get('clips_equal_fp32'), '.0f')} of {int(number(row['clips']) or 0)}"
                           if ok is not None else ""),
                "kernel error": _f(fig.get("rel_error_vs_dequantized"), ".1e"),
                "outcome": _outcome_text(group),
            })
        head = setting.iloc[0]
        title = f"{head['model']} ({head['weights']} weights), {int(number(head['clips']) or 0)} clips of {head['inputs']}"
        tables.append((title, pd.DataFrame.from_records(records)))
    return tables


def speech_section(rows: pd.DataFrame, summary: pd.DataFrame, layers: pd.DataFrame, show_sweep: bool,
                   plots: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    md = [f"## {TITLE}", ""]
    parts = [f'<h2 id="speech">{TITLE}</h2>']
    for title, table in speech_tables(rows, summary, show_sweep=show_sweep):
        md += table_markdown(title, table)
        parts += table_html(title, table, "data speech")
    md += how_to_read_markdown([NOTES, COLUMN_NOTE])
    parts.append(how_to_read_html([NOTES, COLUMN_NOTE]))
    plot_md, plot_parts = plot_sections(plots)
    return md + plot_md, parts + plot_parts


def draw_speech_plots(summary: pd.DataFrame, plots_dir: Path, show_sweep: bool) -> list[Path]:
    """Word error rate (vs the transcripts, and vs fp32) against bits, a line per browser and
    engine platform, one panel per model and clip set."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    path = plots_dir / "speech_wer_vs_bits.png"
    path.unlink(missing_ok=True)
    if summary.empty or "wer_vs_fp32" not in summary or not summary["wer_vs_fp32"].notna().any():
        return []
    keys = [c for c in SETTING if c in summary]
    settings = [(str(g.iloc[0]["model"]), g) for _, g in summary.groupby(keys, sort=False, dropna=False)]
    fig, axes = _facets(1, rows=len(settings), width=6.0)
    for r, (model, group) in enumerate(settings):
        ax = axes[r][0]
        for name, s in group.groupby(["browser", "engine", "platform"], sort=False):
            s = s.sort_values("bits_requested")
            bits = _numbers(s["bits_requested"])
            ax.plot(bits, _numbers(s["wer_vs_fp32"]), marker="o", label=f"{' · '.join(name)} vs fp32")
            if s["wer"].notna().any():
                ax.plot(bits, _numbers(s["wer"]), marker="x", linestyle="--", label=f"{' · '.join(name)} vs transcripts")
        ax.axhline(WER_BAR, color="grey", linestyle=":", label=f"WER {WER_BAR:.0%}")
        ax.set_xscale("log", base=2)
        ax.set_xticks([2, 4, 8, 16, 32], labels=["2", "4", "8", "16", "32"])
        ax.set_xlabel("bits")
        ax.set_ylabel("word error rate")
        ax.set_title(model, fontsize=8)
        ax.grid(True, alpha=0.3)
        if np.isfinite(_numbers(group["wer_vs_fp32"])).any():
            ax.legend(fontsize=6)
    _suptitle(fig, "Speech: word error rate per precision; lower is better")
    return [_save(fig, path)]


def format_speech_table(rows: Sequence[ResultRow]) -> str:
    if not rows:
        return ""
    header = ["browser", "engine", "platform", "model", "bits", "outcome", "front end ms", "encoder ms",
              "decode tok/s", "RTF", "weight MiB", "WER", "WER vs fp32", "= fp32", "kernel err"]
    body = [[
        r.browser_key, r.engine_key, r.platform, f"{r['model']} {r['clips']} clips", bits_label(r), r.outcome,
        _fmt(r["frontend_ms"], ".0f"), _fmt(r["encoder_ms"], ".0f"), _fmt(r["decode_tokens_per_s"], ".1f"),
        _fmt(r["real_time_factor"], ".2f"), _fmt(None if r.weight_bytes is None else r.weight_bytes / 2**20, ".1f"),
        _fmt(r["wer"], ".3f"), _fmt(r["wer_vs_fp32"], ".3f"),
        "-" if r["clips_equal_fp32"] is None else str(r["clips_equal_fp32"]), _fmt(r.rel_error_vs_dequantized, ".1e"),
    ] for r in rows]
    return "\n".join(markdown_lines(*class_columns(header, body, rows, "RTF")))

"""The report's "Decoder LLMs" section: per model setting (model, weights, prompt + new tokens,
inputs), one row per configuration (browser x engine x platform x bits or format) with time to
first token, prefill and decode tokens/s, weight memory, and accuracy against PyTorch fp32
(next-token top-1 agreement, KL, perplexity, leading greedy tokens equal); its plots; and the
end-of-sweep terminal table of decoder rows. Each figure's steady-state class sits beside it: the
class of the time to first token's series (ttft_steady_class) before it, the class of the decode
steps (decode_steady_class) after the decode tokens/s, each figure marked where its series had no
steady state (report/steady.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..results.rows import ResultRow
from ..values import number
from ..workloads.decoder import DECODER
from .markdown import (
    how_to_read_html,
    how_to_read_markdown,
    markdown_lines,
    plot_sections,
)
from .models import (
    CONFIG_KEY,
    _bits_text,
    _f,
    _key,
    _ordered,
    _outcome_text,
    _setting_name,
    _weights_text,
    configurations,
    rows_of_kind,
    table_html,
    table_markdown,
)
from .plots import _bits_axis, _facets, _model_series, _numbers, _point_label, _save, _suptitle
from .steady import COLUMN_NOTE, marked, row_class, runs_text, worst_class
from .terminal import _fmt, bits_label, class_columns

DECODE_COLUMN = "decode steps"
"""The column of decode_steady_class, beside the decode tokens/s."""
DECODE_COLUMN_NOTE = (
    "Decode steps: how the decode steps of the page's generations settled, end to end, once their growth "
    "with context (one more token attended per step) is taken out, the worst over the ok repetitions; "
    "TTFT steady: how the page's times to first token settled (one a generation). The classes are the "
    "steady column's (too short: fewer than 10 steps, or 10 generations); each figure comes from its "
    "series' steady segment.")
TTFT_COLUMN = "TTFT steady"
"""The column of ttft_steady_class, before the time to first token."""
SETTING = ("model", "weights", "prompt_len", "new_tokens", "eval_len", "inputs")
PLOT_TITLES = {
    "decoder_speed_vs_bits": "Decoder speed vs bits",
    "decoder_accuracy_vs_bits": "Decoder accuracy vs bits",
    "decoder_accuracy_vs_speed": "Decoder accuracy vs decode speed",
    "decoder_accuracy_vs_weight_bytes": "Decoder accuracy vs weight memory",
}
NOTES = (
    "Each row is one configuration of the setting named above it; figures are medians over its ok "
    "repetitions. TTFT: prompt in, first new token id back in JavaScript (ms); prefill tokens/s = "
    "prompt tokens / TTFT; decode tokens/s = (new tokens - 1) / (t_last - t_first), greedy with "
    "end of sequence suppressed, each id read back after its step; per-token ms p50 and the last "
    "step's (the longest context). Weight MiB: every parameter handed to the engine (the float32 "
    "embedding table included) against the float32 model. Accuracy is against PyTorch fp32 on the "
    "same float weights (a GGUF model's: its tensors dequantized), teacher-forced over the "
    "evaluation texts: top-1 = share of positions with the same next-token argmax, KL = mean "
    "KL(fp32 || engine) in nats, perplexity of the texts under the engine (fp32's in the title); "
    "leading = greedy tokens equal to fp32's before the first difference. Kernel error: the "
    "logits' relative error against the harness's float64 decoder on the same (dequantized) weights."
)


def _worst(oks: pd.DataFrame, column: str) -> dict[str, str]:
    """The worst class of ``column`` over a configuration's ok runs, as ``marked`` reads a row."""
    classes = [row_class(v) for v in oks.get(column, [])]
    return {column: worst_class(classes) if classes else ""}


def decoder_rows(frame: pd.DataFrame) -> pd.Series:
    return rows_of_kind(frame, DECODER.name)


def _int(value: Any) -> str:
    v = number(value)
    return "?" if v is None else str(int(v))


def setting_title(row: pd.Series | dict[str, Any]) -> str:
    """'smollm2-135m, pretrained weights, 16+32 tokens (scored on 64)'."""
    title = (f"{row['model']}, {row['weights'] or '?'} weights, {_int(row['prompt_len'])} prompt + "
             f"{_int(row['new_tokens'])} new tokens (scored on {_int(row['eval_len'])} per text)")
    inputs = str(row.get("inputs") or "")
    return title + (f", inputs {inputs}" if inputs and inputs != "builtin" else "")


def _settings(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(short title, rows) per setting, for the plots' panels."""
    keys = [c for c in SETTING if c in table]
    return [(f"{g.iloc[0]['model']} ({g.iloc[0]['weights']}), {_int(g.iloc[0]['prompt_len'])}+"
             f"{_int(g.iloc[0]['new_tokens'])} tokens", g)
            for _, g in table.groupby(keys, sort=False, dropna=False)]


def decoder_tables(rows: pd.DataFrame, summary: pd.DataFrame, *, show_sweep: bool
                   ) -> list[tuple[str, pd.DataFrame]]:
    found = configurations(rows, summary, DECODER.name)
    if found is None:
        return []
    first, figures, groups = found.first, found.figures, found.groups
    tables = []
    for _, setting in first.groupby(list(SETTING), sort=False, dropna=False):
        records = []
        fp32_ppl = None
        for _, row in _ordered(setting).iterrows():
            key = _key(row[c] for c in CONFIG_KEY)
            ok, group = figures.get(key), groups[key]
            fig: Any = ok if ok is not None else {}
            oks = group[group["outcome"] == "ok"]
            leading = pd.to_numeric(oks["leading_tokens_equal"], errors="coerce").median() if ok is not None else None
            fp32_ppl = fp32_ppl or number(fig.get("perplexity_fp32"))
            wllama = row.get("weight_format") and str(row["engine"]).partition("@")[0] == "wllama"
            records.append({
                "browser · engine platform": _setting_name(row, show_sweep),
                "bits or format": _bits_text(row, ok) + (f" [{row['weight_format']}]" if wllama else ""),
                TTFT_COLUMN: runs_text(oks.get("ttft_steady_class", [""] * len(oks))) if ok is not None else "",
                "TTFT ms": marked(_f(fig.get("ttft_ms"), ",.0f"), _worst(oks, "ttft_steady_class"), "ttft_steady_class"),
                "prefill tok/s": _f(fig.get("prefill_tokens_per_s"), ",.1f"),
                "decode tok/s": marked(_f(fig.get("decode_tokens_per_s"), ",.2f"), _worst(oks, "decode_steady_class"),
                                       "decode_steady_class"),
                DECODE_COLUMN: runs_text(oks.get("decode_steady_class", [""] * len(oks))) if ok is not None else "",
                "ms/token p50 (last)": (f"{_f(fig.get('token_ms_p50'), ',.0f')} "
                                        f"({_f(fig.get('token_ms_last'), ',.0f')})"
                                        if number(fig.get("token_ms_p50")) is not None else ""),
                "weight MiB": _weights_text(ok) if ok is not None else "",
                "top-1": _f(fig.get("next_token_top1"), ".1%"),
                "KL": _f(fig.get("kl_mean"), ".3g"),
                "perplexity": _f(fig.get("perplexity"), ",.2f"),
                "leading = fp32": ("" if leading is None or np.isnan(leading)
                                   else f"{leading:.0f}/{_int(row['new_tokens'])}"),
                "kernel error": _f(fig.get("rel_error_vs_dequantized"), ".1e"),
                "outcome": _outcome_text(group),
            })
        title = setting_title(setting.iloc[0]) + (f"; fp32 perplexity {fp32_ppl:,.2f}" if fp32_ppl else "")
        tables.append((title, pd.DataFrame.from_records(records)))
    return tables


def decoder_section(rows: pd.DataFrame, summary: pd.DataFrame, layers: pd.DataFrame, show_sweep: bool,
                    plots: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The whole section (Markdown lines, HTML parts) for the decoder kind's rows."""
    tables = decoder_tables(rows, summary, show_sweep=show_sweep)
    md = ["## Decoder LLMs", ""]
    parts = ['<h2 id="decoders">Decoder LLMs</h2>']
    for title, table in tables:
        md += table_markdown(title, table)
        parts += table_html(title, table, "data decoders")
    md += how_to_read_markdown([NOTES, COLUMN_NOTE, DECODE_COLUMN_NOTE])
    parts.append(how_to_read_html([NOTES, COLUMN_NOTE, DECODE_COLUMN_NOTE]))
    plot_md, plot_parts = plot_sections(plots)
    md += plot_md
    parts += plot_parts
    return md, parts


# ------------------------------------------------------------------------------------------ plots

SPEED = (("decode_tokens_per_s", "decode tokens/s"), ("prefill_tokens_per_s", "prefill tokens/s"),
         ("ttft_ms", "time to first token (ms)"))
LOG_SCALE = ("kl_mean", "perplexity")
ACCURACY = (("next_token_top1", "next-token top-1 agreement"), ("kl_mean", "mean KL(fp32 || engine), nats"),
            ("perplexity", "perplexity"))


def _by_bits(table: pd.DataFrame, path: Path, show_sweep: bool, metrics: Sequence[tuple[str, str]],
             title: str) -> Path | None:
    settings = _settings(table)
    metrics = [(c, n) for c, n in metrics if c in table and table[c].notna().any()]
    if not settings or not metrics:
        return None
    fig, axes = _facets(len(metrics), rows=len(settings), width=4.8)
    for r, (setting, group) in enumerate(settings):
        for ax, (column, name) in zip(axes[r], metrics):
            for label, s, mixed in _model_series(group, show_sweep):
                ax.plot(s["bits_requested"], _numbers(s[column]), marker="s" if mixed else "o",
                        linestyle="--" if mixed else "-", label=label)
            if column == "perplexity" and "perplexity_fp32" in group:
                ref = _numbers(group["perplexity_fp32"])
                if np.isfinite(ref).any():
                    ax.axhline(np.nanmedian(ref), color="grey", linestyle=":", label="PyTorch fp32")
            _bits_axis(ax, group["bits_requested"])
            if column in LOG_SCALE and (_numbers(group[column]) > 0).any():
                ax.set_yscale("log")  # KL and perplexity span orders of magnitude across bits
            ax.set_ylabel(name + (" (log)" if column in LOG_SCALE else ""))
            ax.set_title(f"{setting}\n{name}", fontsize=8)
            ax.grid(True, alpha=0.3)
    _suptitle(fig, title)
    return _save(fig, path)


def _scatter(table: pd.DataFrame, path: Path, show_sweep: bool, x_column: str, x_label: str, title: str,
             x_scale: float = 1.0) -> Path | None:
    settings = _settings(table)
    metrics = [(c, n) for c, n in ACCURACY[:2] if c in table and table[c].notna().any()]
    if not settings or not metrics or x_column not in table or not table[x_column].notna().any():
        return None
    fig, axes = _facets(len(metrics), rows=len(settings), width=4.8)
    for r, (setting, group) in enumerate(settings):
        for ax, (column, name) in zip(axes[r], metrics):
            for label, s, _ in _model_series(group, show_sweep):
                x, y = _numbers(s[x_column]) / x_scale, _numbers(s[column])
                ax.scatter(x, y, s=36, label=label)
                for (_, row), xi, yi in zip(s.iterrows(), x, y):
                    if np.isfinite(xi) and np.isfinite(yi):
                        ax.annotate(_point_label(row), (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=7)
            ax.set_xlabel(x_label)
            ax.set_ylabel(name)
            ax.set_title(f"{setting}\n{name}", fontsize=8)
            ax.grid(True, alpha=0.3)
    _suptitle(fig, title)
    return _save(fig, path)


def plot_decoder_speed(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    return _by_bits(table, path, show_sweep, SPEED,
                    "Decoder LLMs: decode and prefill tokens/s and time to first token vs weight bits")


def plot_decoder_accuracy(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    return _by_bits(table, path, show_sweep, ACCURACY,
                    "Decoder LLMs: accuracy against PyTorch fp32 vs weight bits (teacher-forced)")


def plot_decoder_accuracy_speed(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    return _scatter(table, path, show_sweep, "decode_tokens_per_s", "decode tokens/s",
                    "Decoder LLMs: accuracy vs decode speed; upper right is better (top-1)")


def plot_decoder_accuracy_weights(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    return _scatter(table, path, show_sweep, "weight_bytes", "weight bytes handed to the engine (MiB)",
                    "Decoder LLMs: accuracy vs weight memory; upper left is better (top-1)", x_scale=2**20)


DRAWERS = {"decoder_speed_vs_bits": plot_decoder_speed, "decoder_accuracy_vs_bits": plot_decoder_accuracy,
           "decoder_accuracy_vs_speed": plot_decoder_accuracy_speed,
           "decoder_accuracy_vs_weight_bytes": plot_decoder_accuracy_weights}
"""Each plot of PLOT_TITLES by its name."""


def draw_decoder_plots(summary: pd.DataFrame, plots_dir: Path, show_sweep: bool) -> list[Path]:
    plots_dir.mkdir(parents=True, exist_ok=True)
    for name in PLOT_TITLES:
        (plots_dir / f"{name}.png").unlink(missing_ok=True)
    if summary.empty:
        return []
    drawn = [DRAWERS[name](summary, plots_dir / f"{name}.png", show_sweep) for name in PLOT_TITLES]
    return [p for p in drawn if p is not None]


# --------------------------------------------------------------------------------------- terminal


def format_decoder_table(rows: Sequence[ResultRow]) -> str:
    if not rows:
        return ""
    header = ["browser", "engine", "platform", "on", "model", "bits", "outcome", "TTFT ms", "prefill tok/s",
              "decode tok/s", "weight MiB", "top-1", "KL", "ppl", "leading", "kernel err"]
    body = [[
        r.browser_key, r.engine_key, r.platform, r.executed_on or "-",
        f"{r['model']} {r['prompt_len']}+{r['new_tokens']}", bits_label(r), r.outcome,
        _fmt(r["ttft_ms"], ".0f"), _fmt(r["prefill_tokens_per_s"], ".1f"), _fmt(r["decode_tokens_per_s"], ".2f"),
        _fmt(None if r.weight_bytes is None else r.weight_bytes / 2**20, ".1f"), _fmt(r["next_token_top1"], ".3f"),
        _fmt(r["kl_mean"], ".3g"), _fmt(r["perplexity"], ".2f"),
        "-" if r["leading_tokens_equal"] is None else f"{r['leading_tokens_equal']}/{r['new_tokens']}",
        _fmt(r.rel_error_vs_dequantized, ".1e"),
    ] for r in rows]
    header, body = class_columns(header, body, rows, "TTFT ms", column="ttft_steady_class", name=TTFT_COLUMN)
    header, body = class_columns(header, body, rows, "decode tok/s", column="decode_steady_class",
                                 name=DECODE_COLUMN, after=True)
    return "\n".join(markdown_lines(header, body))

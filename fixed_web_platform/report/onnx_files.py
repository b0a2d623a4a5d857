"""The report's "Your ONNX files" section: per ONNX file and inputs, one row per configuration
(browser x provider x variant) with latency, weight memory, accuracy against onnxruntime fp32
(lowest output cosine, top-1 of class-score outputs), where ORT placed the graph (the provider
most nodes ran on, and how many nodes fell back), the kernel check and the outcome; then which
variant to ship on each browser and provider; its plot; and the end-of-sweep terminal table. The
row's steady-state class sits before the median, marked where there is no steady state.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..results.rows import ResultRow
from ..values import number
from ..vocabulary import HELD_FORMAT
from ..workloads.onnx_file import ONNX_FILE
from .glance import Accuracy, Glance, picks
from .markdown import (
    how_to_read_html,
    how_to_read_markdown,
    markdown_lines,
    plot_sections,
)
from .models import (
    CONFIG_KEY,
    _f,
    _key,
    _outcome_text,
    _setting_name,
    _weights_text,
    configurations,
    rows_of_kind,
    table_html,
    table_markdown,
)
from .plots import _facets, _numbers, _save, _suptitle
from .steady import COLUMN, COLUMN_NOTE, marked, steady_text
from .terminal import _fmt, bits_label, class_columns

SETTING = ("model", "onnx_sha256", "input_shapes", "inputs")
TITLE = "Your ONNX files"
PLOT_TITLES = {"onnx_accuracy_vs_latency": "ONNX files: accuracy vs latency"}
COSINE_BAR = 0.99
"""The bar a variant to ship meets: every float output's cosine with fp32's at least this."""
ONNX_GLANCE = Glance(
    "Your ONNX files", Accuracy("outputs_cosine_min", "cosine min vs fp32", ".4f", higher_is_better=True,
                                bar=COSINE_BAR),
    note="each file with its inputs is a setting of its own, its precision variants (fp32, fp16, "
         "q8-nbits/q4/q2, q4f16, q8/int8/uint8, bnb4, int8-qdq) the precisions. The bar is the lowest "
         "cosine of any float output "
         "with onnxruntime's fp32 outputs on the same inputs, at least 0.99; the Your ONNX files "
         "section has top-1 of class-score outputs, where ORT placed the nodes and how many fell back.")
NOTES = (
    "Each row is one configuration of the file and inputs named above it; figures are medians over "
    "its ok repetitions. Median ms: one session.run with the inputs fed (p10-p90 of the raw timed "
    "samples); on WebGPU the outputs stay on the GPU and the run ends at queue completion. Weight "
    "MiB: every constant of the variant's graph, against the file's own. Accuracy is against "
    "onnxruntime on the CPU provider running the user's fp32 file on the same inputs: cosine min = "
    "the lowest cosine of a float output with fp32's; top-1 = share of positions of class-score "
    "outputs (rank 2-3, last dimension >= 2) whose top class is fp32's. Ran on: the provider ORT "
    "placed most nodes on (a variant that runs mostly elsewhere is marked); fallback = nodes ORT "
    "put on another provider than the one asked (each is listed in samples.jsonl). Kernel error: "
    "relative RMS against the CPU provider running the same variant (is the browser right). "
    f"Ship: the first screen's pick for that browser and provider: of the variants at cosine min >= "
    f"{COSINE_BAR}, the fastest; of those as fast as it within noise, the one with the fewest weight bytes."
)


def _variant(row: Any) -> str:
    """'q4', 'int8-qdq'; the held variant with the quantizer that made it ('held gptq')."""
    name = str(row.get("format_requested") or row.get("weight_format") or bits_text(row))
    quantizer = row.get("weight_quant")
    return f"{name} {quantizer}" if name == HELD_FORMAT and isinstance(quantizer, str) and quantizer else name


def bits_text(row: Any) -> str:
    b = number(row.get("bits_requested"))
    return "?" if b is None else str(int(b))


def _ms(value: float | None) -> str:
    """'5,698' or '44.2': whole milliseconds from 100 up, three figures below."""
    if value is None:
        return ""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _ran_on(row: Any, fig: Any) -> str:
    ran = str(fig.get("executed_on") or "") if fig is not None else ""
    if not ran or ran == "nan":
        return ""
    return ran if ran == str(row["platform"]) else f"**{ran}** (not {row['platform']})"


def _fallback(fig: Any) -> str:
    placed, off = number(fig.get("nodes_placed")), number(fig.get("nodes_fallback"))
    if off is None:
        return ""
    if off == 0:
        return "0"
    return f"{int(off)} of {int(placed)}" if placed else f"at least {int(off)}"  # placed 0: the log was silent


def onnx_tables(rows: pd.DataFrame, summary: pd.DataFrame, *, show_sweep: bool
                ) -> list[tuple[str, pd.DataFrame, list[str]]]:
    """(title, table, ship lines) per file and inputs."""
    found = configurations(rows, summary, ONNX_FILE.name)
    if found is None:
        return []
    first, figures, groups = found.first, found.figures, found.groups
    tables = []
    for _, setting in first.groupby(list(SETTING), sort=False, dropna=False):
        records, ship = [], []
        for _, row in setting.iterrows():
            key = _key(row[c] for c in CONFIG_KEY)
            ok, group = figures.get(key), groups[key]
            fig: Any = ok if ok is not None else {}
            records.append({
                "browser · engine platform": _setting_name(row, show_sweep),
                "variant": _variant(row),
                "ran on": _ran_on(row, ok),
                COLUMN: steady_text(ok) if ok is not None else "",
                "median ms": marked(_ms(number(fig.get("latency_ms_median"))), fig),
                "weight MiB": _weights_text(ok) if ok is not None else "",
                "cosine min": _f(fig.get("outputs_cosine_min"), ".4f"),
                "top-1": _f(fig.get("top1_vs_fp32"), ".1%"),
                "quantized nodes": _f(fig.get("nodes_quantized"), ".0f"),
                "fallback": _fallback(fig) if ok is not None else "",
                "kernel error": _f(fig.get("rel_error_vs_dequantized"), ".1e"),
                "outcome": _outcome_text(group),
            })
        table = pd.DataFrame.from_records(records)
        ship = ship_lines(setting, summary)
        head = setting.iloc[0]
        title = f"{head['model']} ({head['input_shapes']}), inputs {head['inputs']}"
        tables.append((title, table, ship))
    return tables


def ship_lines(setting: pd.DataFrame, summary: pd.DataFrame) -> list[str]:
    """Which variant to ship per browser and provider: the first screen's pick (glance.picks,
    with ONNX_GLANCE's bar), and for a browser and provider where nothing ran, why."""
    keys = [c for c in SETTING if c in summary]
    head = setting.iloc[0]
    mine = summary[rows_of_kind(summary, ONNX_FILE.name)] if not summary.empty else summary
    if not mine.empty:
        mine = mine[[all(_key([r[c]]) == _key([head[c]]) for c in keys) for _, r in mine.iterrows()]]
    lines = [f"{p.setting}: ship **{p.precision}**: {p.costs}" if p.precision != "none"
             else f"{p.setting}: {p.costs}" for p in picks(mine, ONNX_GLANCE)] if not mine.empty else []
    ran = {_key(r[c] for c in CONFIG_KEY) for _, r in mine.iterrows()}
    show = (mine if not mine.empty else setting)["sweep"].nunique() > 1  # as picks() names settings
    for _, where in setting.groupby(["sweep", "browser", "engine", "platform"], sort=False, dropna=False):
        if any(_key(r[c] for c in CONFIG_KEY) in ran for _, r in where.iterrows()):
            continue
        why = next((" ".join(str(r).split())[:120] for r in where["reason"] if str(r)), "")
        lines.append(f"{_setting_name(where.iloc[0], show)}: no variant ran" + (f" ({why})" if why else ""))
    return lines


def onnx_section(rows: pd.DataFrame, summary: pd.DataFrame, layers: pd.DataFrame, show_sweep: bool,
                 plots: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    tables = onnx_tables(rows, summary, show_sweep=show_sweep)
    md = [f"## {TITLE}", ""]
    parts = [f'<h2 id="onnx-files">{TITLE}</h2>']
    for title, table, ship in tables:
        md += [*table_markdown(title, table), "Which variant to ship here:", ""]
        md += [f"- {line}" for line in ship] + [""]
        parts += [*table_html(title, table, "data onnx-files"),
                  "<p>Which variant to ship here:</p><ul>"
                  + "".join(f"<li>{html.escape(line).replace('**', '')}</li>" for line in ship) + "</ul>"]
    md += how_to_read_markdown([NOTES, COLUMN_NOTE])
    parts.append(how_to_read_html([NOTES, COLUMN_NOTE]))
    plot_md, plot_parts = plot_sections(plots)
    md += plot_md
    parts += plot_parts
    return md, parts


def draw_onnx_plots(summary: pd.DataFrame, plots_dir: Path, show_sweep: bool) -> list[Path]:
    """Lowest output cosine vs median latency, one panel per file, a point per configuration."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    path = plots_dir / "onnx_accuracy_vs_latency.png"
    path.unlink(missing_ok=True)
    if summary.empty or "outputs_cosine_min" not in summary or not summary["outputs_cosine_min"].notna().any():
        return []
    settings = [(str(g.iloc[0]["model"]), g) for _, g in summary.groupby(list(SETTING), sort=False, dropna=False)]
    fig, axes = _facets(1, rows=len(settings), width=6.0)
    for r, (model, group) in enumerate(settings):
        ax = axes[r][0]
        for name, s in group.groupby(["browser", "platform"], sort=False):
            x, y = _numbers(s["latency_ms_median"]), _numbers(s["outputs_cosine_min"])
            ax.scatter(x, y, s=36, label=" · ".join(name))
            for (_, row), xi, yi in zip(s.iterrows(), x, y):
                if np.isfinite(xi) and np.isfinite(yi):
                    ax.annotate(_variant(row), (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=7)
        ax.axhline(COSINE_BAR, color="grey", linestyle=":", label=f"cosine {COSINE_BAR}")
        if (_numbers(group["latency_ms_median"]) > 0).any():
            ax.set_xscale("log")
        ax.set_xlabel("median ms (log)")
        ax.set_ylabel("lowest output cosine vs fp32")
        ax.set_title(model, fontsize=8)
        ax.grid(True, alpha=0.3)
    _suptitle(fig, "ONNX files: accuracy vs latency per variant; upper left is better")
    return [_save(fig, path)]


def format_onnx_table(rows: Sequence[ResultRow]) -> str:
    if not rows:
        return ""
    header = ["browser", "platform", "on", "model", "variant", "outcome", "median ms", "weight MiB",
              "cosine min", "top-1", "fallback", "kernel err"]
    body = [[
        r.browser_key, r.platform, r.executed_on or "-", f"{r['model']} {r['input_shapes']}",
        _variant({"format_requested": r.format_requested or bits_label(r), "weight_quant": r.weight_quant}),
        r.outcome, _fmt(r.latency_ms_median, ".3f"),
        _fmt(None if r.weight_bytes is None else r.weight_bytes / 2**20, ".2f"), _fmt(r["outputs_cosine_min"], ".4f"),
        _fmt(r["top1_vs_fp32"], ".3f"), "-" if r["nodes_fallback"] is None else str(r["nodes_fallback"]),
        _fmt(r.rel_error_vs_dequantized, ".1e"),
    ] for r in rows]
    return "\n".join(markdown_lines(*class_columns(header, body, rows, "median ms")))

"""The report's "Whole models" section: one table per model setting (every configuration, ok or
not), the whole-model plots (plots.py) and the per-layer precision from layers.csv.

A model setting is a model with its weights (pretrained or random), batch x sequence length and
inputs; its configurations are the browser x engine x platform x bits x precision plan run on it.
Figures are those of the summary (median over the ok repetitions); a configuration without an ok
run shows its outcome and reason and no figures. Its steady-state class sits beside the median
(report/steady.py), which is marked where there is no steady state.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..results import reader as result_files
from ..values import is_blank
from ..workloads.encoder import ENCODER
from .glance import setting_name as _setting_name
from .glance import what_ran
from .markdown import how_to_read_html, how_to_read_markdown, html_table, markdown_table, number
from .plots import MODEL_SETTING, model_setting_title
from .steady import COLUMN, COLUMN_NOTE, MARK_NOTE, marked, shows_mark, steady_text

CONFIG_KEY = ("sweep", *result_files.CONFIG_KEY)

MODEL_NOTES = (
    "Each row is one configuration of the model setting named above it; figures are medians over "
    "its ok repetitions. Median ms is the latency of one forward pass over the batch (p10-p90 of "
    "the raw timed samples of every repetition); tokens/s counts the real (unpadded) tokens of "
    "the batch. Weight MiB is every parameter handed to the engine (packed values + scales + zero "
    "points, float parts as they were sent), against the same model in float32. Cosine min / mean: "
    "the lowest and mean cosine similarity of each text's output embedding with PyTorch's float32 "
    "embedding; Spearman: rank correlation of all pairwise similarities with PyTorch's; top-1: the "
    "share of texts whose nearest neighbour is the same as under PyTorch float32 (1 = identical "
    "everywhere). Kernel error: the engine's relative error against the float64 reference on the "
    "same (dequantized) weights, which says whether the engine computed what it was given. "
    "Bits: the run's --bits with its precision plan ('uniform:4' = every linear layer at 4 bits; "
    "'mixed:8x24,4x12' = 24 layers at 8 and 12 at 4 bits)."
)


def rows_of_kind(frame: pd.DataFrame, kind: str) -> pd.Series:
    """True for the rows of one workload kind (the rows a kind's section shows)."""
    if "kind" not in frame or frame.empty:
        return pd.Series(False, index=frame.index)
    return frame["kind"] == kind


@dataclass(frozen=True)
class Configurations:
    """A kind's configurations in a report: the first row of each (in order of appearance), its
    summary row (ok repetitions aggregated) by key, and all its rows by key."""

    first: pd.DataFrame
    figures: dict[tuple[Any, ...], pd.Series]
    groups: dict[tuple[Any, ...], pd.DataFrame]


def configurations(rows: pd.DataFrame, summary: pd.DataFrame, kind: str) -> Configurations | None:
    """The configurations of ``kind``'s rows; None when it has none."""
    mine = rows[rows_of_kind(rows, kind)]
    if mine.empty:
        return None
    in_summary = summary[rows_of_kind(summary, kind)] if not summary.empty else summary
    figures = {_key(r[c] for c in CONFIG_KEY): r for _, r in in_summary.iterrows()}
    configs = mine.groupby(list(CONFIG_KEY), sort=False, dropna=False)
    first = pd.DataFrame([g.iloc[0] for _, g in configs]).reset_index(drop=True)
    return Configurations(first, figures, {_key(k): g for k, g in configs})


def model_rows(frame: pd.DataFrame) -> pd.Series:
    """True for the encoder kind's rows (the rows this section shows)."""
    return rows_of_kind(frame, ENCODER.name)


def _key(values: Any) -> tuple[Any, ...]:
    """A configuration's key with every kind of blank (NaN, pandas' NA) as None."""
    return tuple(None if is_blank(v) else v for v in values)


def _f(value: Any, spec: str, suffix: str = "") -> str:
    v = number(value)
    return "" if v is None else f"{v:{spec}}{suffix}"


def _bits_text(row: pd.Series, ok: pd.Series | None) -> str:
    bits = int(row["bits_requested"])
    plan = str(row.get("precision_plan") or "")
    fmt = str(row.get("format_requested") or "")
    text = f"{bits} ({plan})" if plan else f"{bits}"
    text += f" {fmt}" if fmt else ""
    ran = what_ran(ok) if ok is not None else ""
    return text + (f"; {ran}" if ran else "")


def _outcome_text(group: pd.DataFrame) -> str:
    counts = Counter(group["outcome"])
    text = ", ".join(f"{o} x{n}" if len(group) > 1 else o for o, n in counts.items())
    reasons = [str(r) for o, r in zip(group["outcome"], group["reason"]) if o != "ok" and str(r)]
    if reasons:
        reason = " ".join(reasons[0].split())
        text += f": {reason if len(reason) <= 160 else reason[:157] + '...'}"
    return text


def _weights_text(ok: pd.Series) -> str:
    wb, wf = number(ok.get("weight_bytes")), number(ok.get("weight_bytes_f32"))
    if wb is None or wb <= 0:
        return ""
    text = f"{wb / 2**20:.1f}"
    if wf is not None and wf > 0:
        ratio = wf / wb
        text += " (float32)" if abs(ratio - 1) < 0.005 else f" ({ratio:.1f}x less than float32)"
    return text


def _latency_text(ok: pd.Series) -> str:
    med = number(ok.get("latency_ms_median"))
    if med is None:
        return ""
    lo, hi = number(ok.get("latency_ms_p10")), number(ok.get("latency_ms_p90"))
    spread = f" ({lo:.3g}-{hi:.3g})" if lo is not None and hi is not None else ""
    return f"{med:.3g}{spread}"


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Sweep and browser in order of appearance, bits 32 -> 2 (a mixed plan after the uniform
    one of the same bits), engines and platforms side by side."""
    frame = frame.copy()
    ranks = []
    for column in ("sweep", "browser", "precision_mode", "device_type"):
        order = {v: i for i, v in enumerate(dict.fromkeys(frame[column]))}
        frame[f"_r_{column}"] = frame[column].map(order)
        ranks.append(f"_r_{column}")
    frame["_r_bits"] = -frame["bits_requested"].astype(float)
    frame["_r_mixed"] = frame["precision_plan"].astype(str).str.startswith("mixed")
    ranks += ["_r_bits", "_r_mixed"]
    for column in ("engine", "platform"):
        order = {v: i for i, v in enumerate(dict.fromkeys(frame[column]))}
        frame[f"_r_{column}"] = frame[column].map(order)
        ranks.append(f"_r_{column}")
    return frame.sort_values(ranks, kind="stable").drop(columns=ranks)


def model_tables(rows: pd.DataFrame, summary: pd.DataFrame, *, show_sweep: bool
                 ) -> list[tuple[str, pd.DataFrame]]:
    """(title, formatted table) per model setting: one row per configuration, ok or not."""
    found = configurations(rows, summary, ENCODER.name)
    if found is None:
        return []
    first, figures, groups = found.first, found.figures, found.groups
    tables = []
    for _, setting in first.groupby(list(MODEL_SETTING), sort=False, dropna=False):
        records = []
        for _, row in _ordered(setting).iterrows():
            key = _key(row[c] for c in CONFIG_KEY)
            ok = figures.get(key)
            group = groups[key]
            has = ok is not None
            records.append({
                "browser · engine platform": _setting_name(row, show_sweep),
                "bits (precision plan)": _bits_text(row, ok),
                COLUMN: steady_text(ok) if has else "",
                "median ms (p10-p90)": marked(_latency_text(ok), ok) if has else "",
                "tokens/s": _f(ok.get("tokens_per_s"), ",.0f") if has else "",
                "weight MiB": _weights_text(ok) if has else "",
                "cosine min / mean vs PyTorch fp32": (
                    f"{_f(ok.get('cosine_min'), '.4f') or '-'} / {_f(ok.get('cosine_mean'), '.4f') or '-'}"
                    if has and (number(ok.get("cosine_min")) is not None
                                or number(ok.get("cosine_mean")) is not None) else ""),
                "Spearman": _f(ok.get("spearman"), ".4f") if has else "",
                "top-1 agreement": _f(ok.get("top1_agreement"), ".1%") if has else "",
                "kernel error": _f(ok.get("rel_error_vs_dequantized"), ".1e") if has else "",
                "outcome": _outcome_text(group),
            })
        tables.append((model_setting_title(setting.iloc[0]), pd.DataFrame.from_records(records)))
    return tables


# ------------------------------------------------------------------------------------ layers.csv


def _bits_counts(values: pd.Series) -> str:
    numbers = pd.to_numeric(values, errors="coerce").dropna().astype(int)
    if numbers.empty:
        return "not reported"
    counts = Counter(numbers)
    return ", ".join(f"{counts[b]} at {b}-bit" for b in sorted(counts, reverse=True))


@dataclass(frozen=True)
class LayerTables:
    runs: pd.DataFrame
    """Per run: how many layers were planned and ran at which bits, their bytes and GPU time."""
    gpu_ms: list[tuple[str, pd.DataFrame]]
    """Per model setting with per-layer GPU times: layers as rows, runs as columns."""
    layer_count: int


def layer_tables(layers: pd.DataFrame, rows: pd.DataFrame, *, show_sweep: bool) -> LayerTables:
    if layers is None or layers.empty:
        return LayerTables(pd.DataFrame(), [], 0)
    info = {(r["sweep"], int(r["run_id"])): r for _, r in rows.iterrows() if number(r["run_id"]) is not None}
    records = []
    gpu_frames: dict[str, dict[str, pd.Series]] = {}
    layer_info: dict[str, pd.DataFrame] = {}
    for (sweep, run_id), group in layers.groupby(["sweep", "run_id"], sort=False):
        row = info.get((sweep, int(run_id)))
        who = _setting_name(row, show_sweep) if row is not None else (f"{sweep}: ?" if show_sweep else "?")
        plan = str(row.get("precision_plan") or "") if row is not None else ""
        gpu = pd.to_numeric(group["gpu_ms"], errors="coerce")
        wbytes = pd.to_numeric(group["weight_bytes"], errors="coerce")
        dtypes = ", ".join(f"{n} {d}" for d, n in Counter(t for t in group["weight_dtype"] if t).items())
        records.append({
            **({"sweep": sweep} if show_sweep else {}),
            "run": str(int(run_id)),
            "browser · engine platform": who,
            "model": (f"{row['model']} {_int(row['batch_size'])}x{_int(row['seq_len'])} tokens"
                      if row is not None else ""),
            "bits (precision plan)": (f"{int(row['bits_requested'])} ({plan})" if plan else
                                      str(int(row["bits_requested"]))) if row is not None else "",
            "outcome": str(row["outcome"]) if row is not None else "",
            "layers": str(len(group)),
            "planned": _bits_counts(group["bits_requested"]),
            "ran": _bits_counts(group["bits_executed"]),
            "weight dtypes": dtypes,
            "layer weight MiB": f"{wbytes.sum() / 2**20:.2f}" if wbytes.notna().any() else "",
            "layer GPU ms (sum)": f"{gpu.sum():.3g}" if gpu.notna().any() else "",
        })
        if gpu.notna().any() and row is not None:
            title = model_setting_title(row)
            bits = pd.to_numeric(group["bits_executed"], errors="coerce").fillna(
                pd.to_numeric(group["bits_requested"], errors="coerce"))
            column = f"run {int(run_id)}: {who}, {row['bits_requested']}-bit" + (
                f" {plan}" if plan.startswith("mixed") else "")
            cells = [f"{g:.3g} ({int(b)}b)" if pd.notna(g) else "" for g, b in zip(gpu, bits)]
            gpu_frames.setdefault(title, {})[column] = pd.Series(cells, index=list(group["layer"]))
            layer_info.setdefault(title, group[["layer", "kind", "k", "n"]].drop_duplicates("layer"))
    gpu_tables = []
    for title, columns in gpu_frames.items():
        base = layer_info[title].set_index("layer")
        frame = pd.DataFrame(columns)
        frame = frame.reindex(list(dict.fromkeys([*base.index, *frame.index])))
        out = pd.DataFrame({"layer": frame.index,
                            "kind": [str(base["kind"].get(i, "")) for i in frame.index],
                            "K x N": [f"{_int(base['k'].get(i))}x{_int(base['n'].get(i))}"
                                      if i in base.index else "" for i in frame.index]})
        for column in frame.columns:
            out[column] = frame[column].fillna("").to_list()
        gpu_tables.append((title, out))
    return LayerTables(pd.DataFrame.from_records(records), gpu_tables, len(layers))


def _int(value: Any) -> str:
    v = number(value)
    return "?" if v is None else str(int(v))


# --------------------------------------------------------------------------------------- output


def table_markdown(title: str, table: pd.DataFrame) -> list[str]:
    """One table of a kind's section under its heading, with ``MARK_NOTE`` when a figure is marked."""
    return [f"### {title}", "", markdown_table(table), "", *([MARK_NOTE, ""] if shows_mark(table) else [])]


def table_html(title: str, table: pd.DataFrame, css: str) -> list[str]:
    return [f"<h3>{html.escape(title)}</h3>", html_table(table, css),
            *([f'<p class="note">{html.escape(MARK_NOTE)}</p>'] if shows_mark(table) else [])]


def section_markdown(tables: list[tuple[str, pd.DataFrame]], layers: LayerTables,
                     plots: list[tuple[str, str]]) -> list[str]:
    """The section's Markdown lines (from its '## Whole models' heading); plots: (title, file)."""
    md = ["## Whole models", ""]
    for title, table in tables:
        md += table_markdown(title, table)
    md += how_to_read_markdown([MODEL_NOTES, COLUMN_NOTE])
    md += _layers_markdown(layers)
    for title, name in plots:
        md += [f"### {title}", "", f"![{name.rsplit('.', 1)[0]}](plots/{name})", ""]
    return md


def _layers_summary(layers: LayerTables) -> str:
    return (f"Per-layer precision (layers.csv): {len(layers.runs)} runs, {layers.layer_count} "
            f"layer lines")


def _layers_markdown(layers: LayerTables) -> list[str]:
    if layers.runs.empty:
        return ["No layers.csv lines in these folders (no per-layer precision).", ""]
    md = ["<details>", f"<summary>{html.escape(_layers_summary(layers))}</summary>", "",
          markdown_table(layers.runs), ""]
    for title, table in layers.gpu_ms:
        md += [f"Per-layer GPU ms (bits executed), {title}:", "", markdown_table(table), ""]
    md += ["</details>", ""]
    return md


def section_html(tables: list[tuple[str, pd.DataFrame]], layers: LayerTables,
                 plots: list[tuple[str, str]]) -> list[str]:
    e = html.escape
    parts = ['<h2 id="models">Whole models</h2>']
    for title, table in tables:
        parts += table_html(title, table, "data models")
    parts.append(how_to_read_html([MODEL_NOTES, COLUMN_NOTE]))
    if layers.runs.empty:
        parts.append("<p>No layers.csv lines in these folders (no per-layer precision).</p>")
    else:
        parts += ['<details id="layers">', f"<summary>{e(_layers_summary(layers))}</summary>",
                  html_table(layers.runs, "data layers")]
        for title, table in layers.gpu_ms:
            parts += [f"<h4>Per-layer GPU ms (bits executed), {e(title)}</h4>",
                      html_table(table, "data layers-gpu")]
        parts.append("</details>")
    for title, name in plots:
        parts += [f"<h3>{e(title)}</h3>", f'<img src="plots/{e(name)}" alt="{e(name.rsplit(".", 1)[0])}">']
    return parts


def encoder_section(rows: pd.DataFrame, summary: pd.DataFrame, layers: pd.DataFrame, show_sweep: bool,
                    plots: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The whole section (Markdown lines, HTML parts) for the encoder kind's rows."""
    tables = model_tables(rows, summary, show_sweep=show_sweep)
    layer_figures = layer_tables(layers, rows, show_sweep=show_sweep)
    return (section_markdown(tables, layer_figures, plots), section_html(tables, layer_figures, plots))

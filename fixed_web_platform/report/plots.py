"""The report's plots (PNG), drawn with matplotlib's Agg canvas directly (no pyplot, no global
backend switch): latency, error, weight memory and process memory vs bits, accuracy vs latency;
for whole models (drawn apart from the matmul plots): latency vs bits and accuracy against
PyTorch float32 (cosine mean, Spearman, top-1) vs bits, latency and weight memory, a mixed
precision plan being a series of its own.
One series per browser x engine x platform (x WebNN device and mode); points whose work ran at
other bits or on another provider than asked are labelled."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from ..precision.quantizers import DEFAULT_QUANTIZER

BITS_ORDER = (32, 16, 8, 4, 2)
MEMORY_COLUMNS = ("proc_rss_peak_bytes", "proc_rss_delta_bytes", "js_heap_bytes")
"""Process memory figures; optional (older folders do not have them, or they may be empty)."""
PLOT_NAMES = ("latency_vs_bits", "error_vs_bits", "weight_memory_vs_bits",
              "process_memory_vs_bits", "accuracy_vs_latency")


def _series_label(row: pd.Series | dict[str, Any], show_sweep: bool) -> str:
    engine = "" if row.get("engine", "harness") == "harness" else f"{row['engine']} "
    label = f"{row['browser']}/{engine}{row['platform']}"
    if row["platform"] == "webnn":
        extra = " ".join(str(v) for v in (row["device_type"], row["precision_mode"]) if v)
        label += f" ({extra})" if extra else ""
    adapter = str(row.get("adapter") or "")
    if adapter:
        label += f" [{adapter.split('/')[1] if adapter.count('/') >= 1 else adapter}]"
    return f"{row['sweep']}: {label}" if show_sweep else label


def _series(table: pd.DataFrame, show_sweep: bool):
    """One series per browser x engine x platform, and one more per weight quantizer other than
    the default (its 8/4/2-bit points, beside the default's line)."""
    quantizer = table.get("weight_quant", pd.Series("", index=table.index)).fillna("")
    table = table.assign(_quantizer=quantizer.where(quantizer != DEFAULT_QUANTIZER, ""))
    keys = ["sweep", "browser", "engine", "platform", "precision_mode", "device_type", "_quantizer"]
    for (*_, quant), group in table.groupby(keys, sort=False):
        loads = pd.to_numeric(group.get("page_loads", pd.Series(dtype=float)), errors="coerce").dropna()
        n = f", {int(loads.min())}" + (f"-{int(loads.max())}" if loads.max() != loads.min() else "") \
            + " page loads/point" if not loads.empty else ""
        yield (_series_label(group.iloc[0], show_sweep) + (f" {quant}" if quant else "") + n,
               group.sort_values("bits_requested", ascending=False))


def _workloads(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    out = []
    for (workload, shape), group in table.groupby(["workload", "shape"], sort=False):
        out.append((f"{workload} ({shape})", group))
    return out


def _facets(n: int, *, rows: int = 1, width: float = 5.2, height: float = 3.8):
    fig = Figure(figsize=(width * n, height * rows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, n, squeeze=False)
    return fig, axes


def _bits_axis(ax, bits: Iterable[int]) -> None:
    ticks = sorted(set(int(b) for b in bits), reverse=True)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(b) for b in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    lo, hi = min(ticks), max(ticks)
    ax.set_xlim(hi * 1.3, lo / 1.3)  # more bits on the left: precision drops to the right
    ax.set_xlabel("weight bits requested")
    ax.grid(True, which="major", alpha=0.3)


def _positive(values: pd.Series) -> np.ndarray:
    a = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    return np.where(a > 0, a, np.nan)


def _mark_fallbacks(ax, s: pd.DataFrame, y: np.ndarray) -> None:
    """Label points whose browser ran other bits than requested (e.g. WebNN 4 -> 8-bit), or whose
    engine ran the work on another provider than asked (e.g. ORT WebNN -> wasm)."""
    ran_on = s["executed_on"] if "executed_on" in s else pd.Series("", index=s.index)
    for bits, executed, on, platform, yi in zip(s["bits_requested"], s["bits_executed"], ran_on,
                                                s["platform"], y):
        notes = []
        if pd.notna(executed) and int(executed) != int(bits):
            notes.append(f"ran {int(executed)}-bit")
        if isinstance(on, str) and on and on != platform:
            notes.append(f"on {on}")
        if notes and np.isfinite(yi):
            ax.annotate(", ".join(notes), (bits, yi), textcoords="offset points",
                        xytext=(-4, -11), ha="right", fontsize=7, color="dimgrey")


def _save(fig: Figure, path: Path) -> Path:
    """One legend for the whole figure, under the plots (it never hides data points)."""
    handles: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        column_in = 0.7 + 0.065 * max(len(label) for label in handles)  # at font size 8
        ncols = max(1, min(len(handles), int(fig.get_figwidth() // column_in)))
        fig.set_figheight(fig.get_figheight() + 0.2 * math.ceil(len(handles) / ncols))
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=ncols, fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    return path


def plot_latency(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    groups = _workloads(table)
    if not groups or table["latency_ms_median"].notna().sum() == 0:
        return None
    fig, axes = _facets(len(groups))
    for ax, (title, group) in zip(axes[0], groups):
        for label, s in _series(group, show_sweep):
            med = s["latency_ms_median"].to_numpy(dtype=float)
            lo = np.clip(med - s["latency_ms_p10"].to_numpy(dtype=float), 0, None)
            hi = np.clip(s["latency_ms_p90"].to_numpy(dtype=float) - med, 0, None)
            ax.errorbar(s["bits_requested"], med, yerr=[np.nan_to_num(lo), np.nan_to_num(hi)],
                        marker="o", capsize=3, label=label)
            _mark_fallbacks(ax, s, med)
        _bits_axis(ax, group["bits_requested"])
        ax.set_ylim(bottom=0)
        ax.set_ylabel("median latency (ms), bars p10-p90")
        ax.set_title(title, fontsize=10)
    _suptitle(fig, "Median latency (ms) vs weight bits requested, per browser/engine/platform "
                 "[adapter]; bars p10-p90 of the raw samples")
    return _save(fig, path)


def plot_error(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    groups = _workloads(table)
    if not groups or not (_positive(table["rel_error_vs_float"]) > 0).any():
        return None
    fig, axes = _facets(len(groups))
    for ax, (title, group) in zip(axes[0], groups):
        for label, s in _series(group, show_sweep):
            errors = _positive(s["rel_error_vs_float"])
            line = ax.plot(s["bits_requested"], errors, marker="o", label=f"{label} vs float")[0]
            _mark_fallbacks(ax, s, errors)
            kernel = _positive(s["rel_error_vs_dequantized"])
            if (kernel > 0).any():
                ax.plot(s["bits_requested"], kernel, marker="x", linestyle=":",
                        color=line.get_color(), alpha=0.6, label=f"{label} kernel (vs dequantized)")
        _bits_axis(ax, group["bits_requested"])
        ax.set_yscale("log")
        ax.set_ylabel("relative error (log)")
        ax.set_title(title, fontsize=10)
    _suptitle(fig, "Relative error of the output vs the float64 result on the original weights "
                 "(what quantization costs), log scale")
    return _save(fig, path)


def plot_weight_memory(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    groups = _workloads(table)
    if not groups or not (_positive(table["weight_bytes"]) > 0).any():
        return None
    fig, axes = _facets(len(groups))
    for ax, (title, group) in zip(axes[0], groups):
        for label, s in _series(group, show_sweep):
            ax.plot(s["bits_requested"], _positive(s["weight_bytes"]) / 2**20, marker="o", label=label)
        f32 = _positive(group["weight_bytes_f32"])
        if (f32 > 0).any():
            ax.axhline(np.nanmax(f32) / 2**20, color="grey", linestyle="--", label="float32 weights")
        _bits_axis(ax, group["bits_requested"])
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_ylabel("weight bytes read by the kernel (MiB, log)")
        ax.set_title(title, fontsize=10)
    _suptitle(fig, "Weight memory (exact bytes the kernel or graph holds: packed values + scales + "
                 "zero points) vs weight bits")
    return _save(fig, path)


def plot_process_memory(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    columns = [c for c in MEMORY_COLUMNS if c in table and table[c].notna().any()]
    groups = _workloads(table)
    if not columns or not groups:
        return None
    fig, axes = _facets(len(groups), rows=len(columns))
    labels = {"proc_rss_peak_bytes": "browser RSS peak", "proc_rss_delta_bytes": "browser RSS delta",
              "js_heap_bytes": "JS heap"}
    for r, column in enumerate(columns):
        for ax, (title, group) in zip(axes[r], groups):
            for label, s in _series(group, show_sweep):
                values = pd.to_numeric(s[column], errors="coerce").to_numpy(dtype=float) / 2**20
                spread = pd.to_numeric(s.get(f"{column}_spread", pd.Series(np.nan, index=s.index)),
                                       errors="coerce").to_numpy(dtype=float) / 2**20
                line = ax.errorbar(s["bits_requested"], values, yerr=np.nan_to_num(spread) / 2,
                                   marker="o", capsize=3, label=label)
                warmup = s.get("memory_warmup_only", pd.Series(False, index=s.index)).fillna(False)
                warm = np.asarray(warmup, dtype=bool)
                if warm.any():  # only a first-of-session run: marked, it includes warm-up
                    ax.plot(np.asarray(s["bits_requested"])[warm], values[warm], marker="o", ls="",
                            mfc="white", color=line.lines[0].get_color())
            _bits_axis(ax, group["bits_requested"])
            ax.set_ylim(bottom=0)  # from zero: a few MiB of noise on a few hundred is no trend
            ax.set_ylabel(f"{labels[column]} (MiB), bars = spread over runs")
            ax.set_title(f"{title}: {labels[column]}", fontsize=10)
    _suptitle(fig, "Browser process memory vs weight bits (measured, noisy; hollow points: "
                 "first run of a browser session only, includes warm-up)")
    return _save(fig, path)


def plot_accuracy_latency(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    groups = _workloads(table)
    usable = (_positive(table["rel_error_vs_float"]) > 0) & table["latency_ms_median"].notna().to_numpy()
    if not groups or not usable.any():
        return None
    fig, axes = _facets(len(groups))
    markers = "osD^vP*X"
    for ax, (title, group) in zip(axes[0], groups):
        for i, (label, s) in enumerate(_series(group, show_sweep)):
            x = s["latency_ms_median"].to_numpy(dtype=float)
            y = _positive(s["rel_error_vs_float"])
            ax.scatter(x, y, marker=markers[i % len(markers)], s=40, label=label)
            for xi, yi, bits in zip(x, y, s["bits_requested"]):
                if np.isfinite(xi) and np.isfinite(yi):
                    ax.annotate(f"{int(bits)}b", (xi, yi), textcoords="offset points",
                                xytext=(4, 3), fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("median latency (ms)")
        ax.set_ylabel("relative error vs float (log)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
    _suptitle(fig, "Relative error vs median latency (ms), one point per bits value; lower left "
                 "is better")
    return _save(fig, path)


def draw_plots(summary: pd.DataFrame, plots_dir: Path, show_sweep: bool) -> list[Path]:
    plots_dir.mkdir(parents=True, exist_ok=True)
    for name in PLOT_NAMES:  # no stale plot from an earlier report in the same folder
        (plots_dir / f"{name}.png").unlink(missing_ok=True)
    if summary.empty:
        return []
    drawers = (plot_latency, plot_error, plot_weight_memory, plot_process_memory,
               plot_accuracy_latency)
    paths = []
    for name, draw in zip(PLOT_NAMES, drawers):
        path = draw(summary, plots_dir / f"{name}.png", show_sweep)
        if path is not None:
            paths.append(path)
    return paths


# ------------------------------------------------------------------------------- whole models

MODEL_PLOT_NAMES = ("model_latency_vs_bits", "model_accuracy_vs_bits", "model_accuracy_vs_latency",
                    "model_accuracy_vs_weight_bytes")
MODEL_SETTING = ("model", "weights", "batch_size", "seq_len", "inputs")
ACCURACY = (("cosine_mean", "cosine mean"), ("spearman", "Spearman"), ("top1_agreement", "top-1 agreement"))
"""Accuracy of the output embeddings against PyTorch fp32 (columns of the summary, labels)."""


def _mixed(plan: Any) -> bool:
    return isinstance(plan, str) and plan.startswith("mixed")


def _suptitle(fig: Figure, text: str) -> None:
    """A figure title wrapped to the figure's width (a one-panel figure is narrow)."""
    import textwrap

    fig.suptitle("\n".join(textwrap.wrap(text, max(40, int(fig.get_figwidth() * 12)))), fontsize=10)


def _annotate_once(ax, seen: set[tuple[str, float, float]], text: str, x: float, y: float, **kw) -> None:
    """Label a point unless the same label already sits there (two engines on one spot)."""
    key = (text, round(float(x), 6), round(float(y), 6))
    if key in seen:
        return
    seen.add(key)
    ax.annotate(text, (x, y), textcoords="offset points", **kw)


def _int_text(value: Any) -> str:
    try:
        return str(int(float(value)))
    except (TypeError, ValueError):
        return "?"


def model_setting_title(row: pd.Series | dict[str, Any]) -> str:
    """'all-MiniLM-L6-v2, pretrained weights, 8x32 tokens' (and the inputs when not built in)."""
    title = f"{row['model']}, {row['weights'] or '?'} weights, " \
            f"{_int_text(row['batch_size'])}x{_int_text(row['seq_len'])} tokens"
    inputs = str(row.get("inputs") or "")
    return title + (f", inputs {inputs}" if inputs and inputs != "builtin" else "")


def _model_settings(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    keys = [c for c in MODEL_SETTING if c in table]
    return [(model_setting_title(group.iloc[0]), group)
            for _, group in table.groupby(keys, sort=False, dropna=False)]


def _model_series(table: pd.DataFrame, show_sweep: bool):
    """(label, rows sorted by bits, mixed?): uniform plans form one series per browser x engine
    x platform; rows with a mixed precision plan form their own."""
    table = table.assign(_mixed=table["precision_plan"].map(_mixed), _variant=_format_variants(table))
    keys = ["sweep", "browser", "engine", "platform", "precision_mode", "device_type", "_mixed", "_variant"]
    for (*_, mixed, variant), group in table.groupby(keys, sort=False):
        label = _series_label(group.iloc[0], show_sweep)
        if mixed:
            label += " mixed precision (" + ", ".join(dict.fromkeys(group["precision_plan"])) + ")"
        if variant:
            label += f" {variant}"
        yield label, group.sort_values("bits_requested", ascending=False), bool(mixed)


def _format_variants(table: pd.DataFrame) -> list[str]:
    """'' for the rows of an engine's main line; the format's name for a second named format at
    bits the line already has (wllama's Q4_1 and shipped file beside Q4_0): a series of its own."""
    if "format_requested" not in table:
        return [""] * len(table)
    seen: dict[tuple, str] = {}
    out = []
    for _, row in table.iterrows():
        key = (row.get("sweep"), row["browser"], row["engine"], row["platform"], row["bits_requested"])
        fmt = str(row.get("format_requested") or "")
        first = seen.setdefault(key, fmt)
        out.append("" if fmt == first else fmt)
    return out


def _point_label(row: pd.Series) -> str:
    if _mixed(row["precision_plan"]):
        return str(row["precision_plan"])
    fmt = str(row.get("format_requested") or "")
    return fmt or f"{int(row['bits_requested'])}b"


def _numbers(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)


def plot_model_latency(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    settings = _model_settings(table)
    if not settings or table["latency_ms_median"].notna().sum() == 0:
        return None
    fig, axes = _facets(len(settings), width=6.0)
    for ax, (title, group) in zip(axes[0], settings):
        for label, s, mixed in _model_series(group, show_sweep):
            med = _numbers(s["latency_ms_median"])
            lo = np.clip(med - _numbers(s["latency_ms_p10"]), 0, None)
            hi = np.clip(_numbers(s["latency_ms_p90"]) - med, 0, None)
            ax.errorbar(s["bits_requested"], med, yerr=[np.nan_to_num(lo), np.nan_to_num(hi)],
                        marker="s" if mixed else "o", linestyle="--" if mixed else "-", capsize=3,
                        label=label)
            if mixed:
                for (_, row), y in zip(s.iterrows(), med):
                    if np.isfinite(y):
                        ax.annotate(row["precision_plan"], (row["bits_requested"], y),
                                    textcoords="offset points", xytext=(-6, 4), ha="right", fontsize=7)
            _mark_fallbacks(ax, s, med)
        _bits_axis(ax, group["bits_requested"])
        ax.set_xlabel("weight bits requested (mixed plans: the feed-forward layers' bits)")
        ax.set_ylim(bottom=0)
        ax.set_ylabel("median latency of one batch (ms), bars p10-p90")
        ax.set_title(title, fontsize=10)
    _suptitle(fig, "Whole models: median latency of one forward pass (ms) vs weight bits, per "
                   "browser/engine/platform; dashed squares: mixed precision plans")
    return _save(fig, path)


def _accuracy_columns(table: pd.DataFrame) -> list[tuple[str, str]]:
    return [(c, label) for c, label in ACCURACY if c in table and table[c].notna().any()]


def plot_model_accuracy(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    settings, metrics = _model_settings(table), _accuracy_columns(table)
    if not settings or not metrics:
        return None
    fig, axes = _facets(len(metrics), rows=len(settings), width=4.8)
    for r, (title, group) in enumerate(settings):
        for ax, (column, name) in zip(axes[r], metrics):
            for label, s, mixed in _model_series(group, show_sweep):
                y = _numbers(s[column])
                ax.plot(s["bits_requested"], y, marker="s" if mixed else "o",
                        linestyle="--" if mixed else "-", label=label)
                if mixed:
                    for (_, row), yi in zip(s.iterrows(), y):
                        if np.isfinite(yi):
                            ax.annotate(row["precision_plan"], (row["bits_requested"], yi),
                                        textcoords="offset points", xytext=(-6, -10), ha="right",
                                        fontsize=7)
                _mark_fallbacks(ax, s, y)
            _bits_axis(ax, group["bits_requested"])
            ax.set_ylabel(f"{name} vs PyTorch fp32 (1 = same)")
            ax.set_title(f"{title}\n{name}", fontsize=9)
    _suptitle(fig, "Whole models: accuracy of the output embeddings against PyTorch float32 vs "
                   "weight bits (cosine mean, Spearman rank correlation of pairwise similarities, "
                   "top-1 nearest-neighbour agreement; higher is better)")
    return _save(fig, path)


def _accuracy_scatter(table: pd.DataFrame, path: Path, show_sweep: bool, x_column: str,
                      x_label: str, suptitle: str, *, x_scale: float = 1.0,
                      f32_line: bool = False) -> Path | None:
    settings, metrics = _model_settings(table), _accuracy_columns(table)
    usable = table[x_column].notna().any() if x_column in table else False
    if not settings or not metrics or not usable:
        return None
    fig, axes = _facets(len(metrics), rows=len(settings), width=4.8)
    markers = "oD^vP*X"  # squares are the mixed plans'
    for r, (title, group) in enumerate(settings):
        for ax, (column, name) in zip(axes[r], metrics):
            seen: set[tuple[str, float, float]] = set()
            for i, (label, s, mixed) in enumerate(_model_series(group, show_sweep)):
                x = _numbers(s[x_column]) / x_scale
                y = _numbers(s[column])
                ax.scatter(x, y, marker="s" if mixed else markers[i % len(markers)], s=40, label=label)
                for (_, row), xi, yi in zip(s.iterrows(), x, y):
                    if np.isfinite(xi) and np.isfinite(yi):
                        _annotate_once(ax, seen, _point_label(row), xi, yi, xytext=(4, 3), fontsize=7)
            if f32_line:
                f32 = _positive(group["weight_bytes_f32"]) / x_scale
                if (f32 > 0).any():
                    ax.axvline(np.nanmax(f32), color="grey", linestyle="--", label="float32 weights")
            ax.set_xlabel(x_label)
            ax.set_ylabel(f"{name} vs PyTorch fp32")
            ax.set_title(f"{title}\n{name}", fontsize=9)
            ax.grid(True, alpha=0.3)
    _suptitle(fig, suptitle)
    return _save(fig, path)


def plot_model_accuracy_latency(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    return _accuracy_scatter(
        table, path, show_sweep, "latency_ms_median", "median latency of one batch (ms)",
        "Whole models: accuracy against PyTorch float32 vs median latency (ms), one point per "
        "bits value or mixed plan (labelled); upper left is better")


def plot_model_accuracy_weights(table: pd.DataFrame, path: Path, show_sweep: bool) -> Path | None:
    return _accuracy_scatter(
        table, path, show_sweep, "weight_bytes", "weight bytes handed to the engine (MiB)",
        "Whole models: accuracy against PyTorch float32 vs weight memory (MiB, exact; dashed: "
        "the float32 weights), one point per bits value or mixed plan; upper left is better",
        x_scale=2**20, f32_line=True)


def draw_model_plots(model_summary: pd.DataFrame, plots_dir: Path, show_sweep: bool) -> list[Path]:
    """The whole-model plots from the summary's model rows (none without them)."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    for name in MODEL_PLOT_NAMES:
        (plots_dir / f"{name}.png").unlink(missing_ok=True)
    if model_summary.empty:
        return []
    drawers = (plot_model_latency, plot_model_accuracy, plot_model_accuracy_latency,
               plot_model_accuracy_weights)
    paths = []
    for name, draw in zip(MODEL_PLOT_NAMES, drawers):
        path = draw(model_summary, plots_dir / f"{name}.png", show_sweep)
        if path is not None:
            paths.append(path)
    return paths

"""The report's "Warm-up and steady state" section (report/steady.py says how a class is shown):
one run-sequence plot per ok run that is not flat (nor too short), at most ``MAX_PLOTS``, the
others listed by name: the headline iteration time against the seconds since the page's first
warm iteration, the floor, the change points and the steady segment marked.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..series.steady import SETTLED
from ..values import number
from ..vocabulary import SteadyClass
from ..workloads import DEFAULT_KIND, kind_named
from .glance import precision_text, setting_name
from .plots import _save
from .steady import NOT_JUDGED, TITLE, _ok, _rank, _seconds, row_class

PLOTTED = (SteadyClass.NO_STEADY, SteadyClass.SLOWDOWN, SteadyClass.WARMUP)
"""Classes whose runs get a run-sequence plot (flat has nothing to show, too short too little)."""
MAX_PLOTS = 12
"""Run-sequence plots at most in one report (a big sweep's report stays small); the rest are listed."""
PLOT_PREFIX = "run_sequence_"
MEANING = (
    "Each page load's iterations after the cold one are classed (docs/concepts/steady-state.md): flat (one "
    "level from the end of the floor on), warm-up (slower first, then settled at a faster level), slowdown "
    "(settled at a level slower than an earlier one), no steady state (the last level covers too little of "
    "the series: a drift, a cycle or a late step; the figures are then every iteration after the floor) or "
    "too short (too few iterations to judge); the figures come from the steady segment, and a run, or a "
    "configuration of several runs, shows the worst class of its parts.")
PLOT_NOTE = (
    "Each plot is one run: the headline iteration time (GPU timestamps where the run's timing source is "
    "gpu-timestamp, else wall clock) against the seconds since the page's first warm iteration, one series "
    "per page load; grey: the floor (iterations run before any may count as steady); dotted lines: change "
    "points; green: the steady segment the figures come from, with its median dashed.")


def _run_label(row: pd.Series, show_sweep: bool) -> str:
    """'chrome · harness webgpu, bert-base-ffn-gemv 1x768x3072, 4-bit, run 3 (repetition 1)'."""
    shape = kind_named(str(row.get("kind") or DEFAULT_KIND)).shape(row)
    repetition = int(number(row.get("repetition")) or 0)
    return (f"{setting_name(row, show_sweep)}, {row['workload']} {shape}, {precision_text(row)}, "
            f"run {int(row['run_id'])}" + (f" (repetition {repetition})" if repetition else ""))


def _class_text(row: pd.Series) -> str:
    name = row_class(row.get("steady_class"))
    seconds = number(row.get("warmup_s"))
    tally = str(row.get("steady_tally") or "")
    text = name
    if seconds is not None and name in (SteadyClass.WARMUP, SteadyClass.SLOWDOWN):
        text += f", steady from {_seconds(seconds)}"
    pages = tally.split(", ")
    if tally and (len(pages) > 1 or not pages[0].endswith(" x1")):
        text += f" (page loads: {tally})"
    return text


def _file_name(row: pd.Series, show_sweep: bool) -> str:
    sweep = re.sub(r"[^A-Za-z0-9]+", "-", str(row["sweep"])).strip("-") + "_" if show_sweep else ""
    return f"{PLOT_PREFIX}{sweep}run{int(row['run_id'])}.png"


def _pages(record: Mapping[str, Any], gpu: bool) -> list[dict[str, Any]]:
    """Each page load's headline series: x (s since the first warm iteration), y (ms), and the
    verdict's marks in seconds; a page without usable numbers is left out."""
    pages = []
    for page in record.get("series") or []:
        if not isinstance(page, Mapping):
            continue
        wall = [number(v) for v in page.get("wall_ms") or []]
        start = [number(v) for v in page.get("start_ms") or []]
        if not wall or len(start) != len(wall) or any(v is None for v in start):
            continue
        g = page.get("gpu_ms")
        values = [number(v) for v in g] if gpu and isinstance(g, list) and 0 < len(g) <= len(wall) else wall
        offset = len(wall) - len(values)  # GPU timestamps cover the last iterations
        at = np.asarray(start, dtype=float) / 1000.0
        ends = at[-1] + (wall[-1] or 0.0) / 1000.0

        def second(i: Any) -> float | None:
            i = number(i)
            return None if i is None else (float(at[int(i)]) if 0 <= i < len(at) else float(ends))

        steady = page.get("steady") if isinstance(page.get("steady"), Mapping) else {}
        name = row_class(steady.get("class"))
        pages.append({
            "x": at[offset:], "y": np.asarray([np.nan if v is None else v for v in values], dtype=float),
            "floor": second(page.get("floor_iterations")) if number(page.get("floor_iterations")) else None,
            "changes": [s for s in (second(c) for c in steady.get("change_points") or []) if s is not None],
            "steady_from": second(steady.get("steady_start")) if name in {c.value for c in SETTLED} else None,
            "level": number(steady.get("level_ms")), "end": float(ends), "class": name,
        })
    return pages


def plot_run_sequence(row: pd.Series, record: Mapping[str, Any], path: Path, show_sweep: bool) -> Path | None:
    """One run's iteration times against time, page loads overlaid: the floor shaded, change
    points as vertical lines, the steady segment highlighted (None without a usable series)."""
    source = str(row.get("timing_source") or record.get("timing_source") or "")
    gpu = source == "gpu-timestamp"
    pages = _pages(record, gpu)
    if not pages:
        return None
    fig = Figure(figsize=(8.0, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for i, page in enumerate(pages):
        color = f"C{i % 10}"
        label = f"page load {i + 1}: {page['class']}" if len(pages) > 1 else f"iterations ({page['class']})"
        ax.plot(page["x"], page["y"], color=color, lw=0.8, marker=".", ms=3, label=label)
        if page["floor"]:
            ax.axvspan(0, page["floor"], color="grey", alpha=0.18, lw=0, label="floor")
        for j, at in enumerate(page["changes"]):
            ax.axvline(at, color=color, ls=":", lw=1.2, label="change point" if j == 0 else None)
        if page["steady_from"] is not None:
            ax.axvspan(page["steady_from"], page["end"], color="tab:green", alpha=0.10, lw=0, label="steady segment")
            if page["level"] is not None:
                ax.hlines(page["level"], page["steady_from"], page["end"], colors=color, linestyles="--", lw=1.2,
                          label="steady median")
    values = np.concatenate([p["y"] for p in pages])
    values = values[np.isfinite(values)]
    if values.size:
        top = float(np.percentile(values, 99)) * 1.25  # a few slow spikes do not flatten the levels
        above = values[values > top]
        ax.set_ylim(0, top if above.size else float(values.max()) * 1.08)
        if above.size:
            ax.text(0.99, 0.97, f"{above.size} iteration{'s' if above.size != 1 else ''} above the top "
                    f"(slowest {above.max():.3g} ms)", transform=ax.transAxes, ha="right", va="top", fontsize=7,
                    color="dimgrey")
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds since the first warm iteration")
    ax.set_ylabel(f"iteration time (ms, {'GPU timestamps' if gpu else 'wall clock'})")
    ax.grid(True, alpha=0.3)
    title = f"{_run_label(row, show_sweep)}: {_class_text(row)}"  # names and classes never split at a hyphen
    fig.suptitle("\n".join(textwrap.wrap(title, int(fig.get_figwidth() * 12), break_on_hyphens=False)), fontsize=10)
    return _save(fig, path)


def _candidates(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok runs a plot is drawn for, worst class first, then in the folders' order."""
    ok = _ok(rows)
    if ok.empty or "steady_class" not in ok:
        return ok.iloc[0:0]
    classes = ok["steady_class"].map(row_class)
    chosen = ok[classes.isin([c.value for c in PLOTTED])]
    order = {name: i for i, name in enumerate(dict.fromkeys(rows["sweep"]))} if "sweep" in rows else {}
    ranked = chosen.assign(_rank=chosen["steady_class"].map(lambda v: _rank(row_class(v))),
                           _sweep=chosen.get("sweep", pd.Series("", index=chosen.index)).map(order),
                           _run=pd.to_numeric(chosen["run_id"], errors="coerce"))
    return ranked.sort_values(["_rank", "_sweep", "_run"], kind="stable").drop(columns=["_rank", "_sweep", "_run"])


def steady_section(rows: pd.DataFrame, samples: Mapping[tuple[str, int], Mapping[str, Any]], plots_dir: Path,
                   show_sweep: bool, max_plots: int = MAX_PLOTS) -> tuple[list[str], list[str], list[Path]]:
    """(Markdown lines, HTML parts, plots drawn) of the "Warm-up and steady state" section;
    empty when no ok run was judged (results from before schema 11, or no ok run)."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    for stale in plots_dir.glob(f"{PLOT_PREFIX}*.png"):  # no plot left from an earlier report
        stale.unlink()
    ok = _ok(rows)
    classes = ok.get("steady_class", pd.Series("", index=ok.index)).map(row_class)
    if ok.empty or (classes == NOT_JUDGED).all():
        return [], [], []
    drawn: list[tuple[str, Path]] = []
    unplotted: list[str] = []
    for _, row in _candidates(rows).iterrows():
        label = f"{_run_label(row, show_sweep)}: {_class_text(row)}"
        if len(drawn) >= max_plots:
            unplotted.append(label)
            continue
        record = samples.get((str(row.get("sweep", "")), int(row["run_id"]))) or {}
        path = plot_run_sequence(row, record, plots_dir / _file_name(row, show_sweep), show_sweep)
        if path is None:
            unplotted.append(f"{label} (no series in samples.jsonl)")
        else:
            drawn.append((label, path))
    count = len(drawn) + len(unplotted)
    flat = int((classes == SteadyClass.FLAT).sum())
    short = int((classes == SteadyClass.TOO_SHORT).sum())
    summary = (f"{count} ok run{'s' if count != 1 else ''} did not settle flat: a run-sequence plot for each"
               + (f" (the first {max_plots}, worst class first)" if len(drawn) >= max_plots and unplotted else "")
               + f"; {flat} flat and {short} too short have none." if count else
               f"Every judged ok run settled flat or was too short to judge ({flat} flat, {short} too short): "
               "no run-sequence plots.")
    md = [f"## {TITLE}", "", MEANING, "", summary, ""]
    e = html.escape
    parts = [f'<h2 id="steady">{e(TITLE)}</h2>', f'<p class="note">{e(MEANING)}</p>', f"<p>{e(summary)}</p>"]
    if drawn:
        md += [PLOT_NOTE, ""]
        parts.append(f'<p class="note">{e(PLOT_NOTE)}</p>')
    for label, path in drawn:
        md += [f"### {label}", "", f"![{path.stem}](plots/{path.name})", ""]
        parts += [f"<h3>{e(label)}</h3>",
                  f'<a href="plots/{e(path.name)}"><img src="plots/{e(path.name)}" alt="{e(label)}"></a>']
    if unplotted:
        md += ["Not drawn:", "", *(f"- {line}" for line in unplotted), ""]
        parts += ["<p>Not drawn:</p>", "<ul>", *(f"<li>{e(line)}</li>" for line in unplotted), "</ul>"]
    return md, parts, [p for _, p in drawn]


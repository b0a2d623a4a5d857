"""Steady state in the report (result schema 11, analysis/steady.py): the one place saying how a
run's class is shown.

- ``configuration_steady``: a configuration's class in the summary, the worst of its ok runs
  (``WORST_FIRST``), with the seconds to its steady segment and how many runs had that class;
  ``steady_text`` is that cell ('flat', 'warm-up 0.4 s', 'no steady state (1 of 3 runs)').
- ``marked``: a latency figure whose class is no steady state carries ``MARK``, explained by
  ``MARK_NOTE`` under the table.
- The per-kind tables (models, decoders, speech, ONNX files) show ``steady_text`` in a
  ``COLUMN`` just before a latency figure, which is ``marked`` (the median; a decoder's TTFT; a
  speech model's seconds per clip, the RTF in its terminal table) (``MARK_NOTE`` under a table
  with a mark: ``shows_mark``); a kind's own class column (a decoder's decode_steady_class) reads
  as ``runs_text`` of its ok runs.
- The end-of-sweep terminal tables: ``terminal_class`` in the same column beside the figure,
  ``terminal_marked`` on it, ``TERMINAL_LEGEND`` once under the tables (``terminal_legend``); a
  sweep whose rows have no class (no ok run) prints no such column (``terminal_judged``).
- ``tally_line``: the header's count of ok runs per class.
- ``steady_section``: "Warm-up and steady state": one run-sequence plot per ok run that is not
  flat (nor too short), at most ``MAX_PLOTS``, the others listed by name.

Results from before schema 11 have no class: 'not judged' everywhere, and no plots.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..analysis.steady import SETTLED
from ..values import number
from ..vocabulary import SteadyClass
from ..workloads import DEFAULT_KIND, kind_named
from .plots import _save

WORST_FIRST = (SteadyClass.NO_STEADY, SteadyClass.TOO_SHORT, SteadyClass.SLOWDOWN, SteadyClass.WARMUP,
               SteadyClass.FLAT)
"""Which class a configuration of several runs shows: the first of these any of them had."""
NOT_JUDGED = SteadyClass.NOT_JUDGED.value
ROW_TEXT_COLUMNS = ("steady_class", "steady_tally", "stop_reason")
"""The row columns read here as text (blank in folders from before schema 11)."""
ROW_NUMBER_COLUMNS = ("warmup_s",)
PLOTTED = (SteadyClass.NO_STEADY, SteadyClass.SLOWDOWN, SteadyClass.WARMUP)
"""Classes whose runs get a run-sequence plot (flat has nothing to show, too short too little)."""
MAX_PLOTS = 12
"""Run-sequence plots at most in one report (a big sweep's report stays small); the rest are listed."""
PLOT_PREFIX = "run_sequence_"
TITLE = "Warm-up and steady state"
MARK = "†"
MARK_MEANING = f"{MARK} no steady state: the figure is every iteration after the floor, not a steady level"
MARK_NOTE = f"{MARK_MEANING} (see {TITLE})."
COLUMN = "steady"
"""The class column's heading, in every table that has one."""
COLUMN_NOTE = (
    "Steady: how the configuration's iterations settled, the worst class of its ok repetitions "
    "(flat; warm-up with the seconds to the steady segment; slowdown; no steady state, its figure "
    f"marked {MARK}; too short); '(1 of 3 runs)' when not all of them had it (see {TITLE}).")
TERMINAL_LEGEND = (f"{MARK_MEANING}; steady: the run's class (docs/concepts/steady-state.md), "
                   "'-' for a run without figures.")
BEFORE_SCHEMA_11 = "not judged for steady state (results from before schema 11)"
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


def row_class(value: Any) -> str:
    """A results.csv cell of steady_class as a class name; 'not judged' when blank or absent."""
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()
    return text if text and text.lower() != "nan" else NOT_JUDGED


def _rank(name: str) -> int:
    """Worst first; a class this version does not know ranks worst (it is not understood), a
    run not judged last (it says nothing)."""
    if name == NOT_JUDGED:
        return len(WORST_FIRST)
    known = [c.value for c in WORST_FIRST]
    return known.index(name) if name in known else -1


def worst_class(values: Iterable[Any]) -> str:
    """The class a configuration shows: the worst of its runs' (``WORST_FIRST``)."""
    names = [row_class(v) for v in values]
    return min(names, key=_rank) if names else NOT_JUDGED


def configuration_steady(group: pd.DataFrame) -> dict[str, Any]:
    """The summary's steady columns of one configuration's ok runs: steady_class (the worst),
    steady_warmup_s (median seconds to the steady segment over the runs of that class) and
    steady_class_runs (how many runs had it)."""
    classes = [row_class(v) for v in group.get("steady_class", pd.Series("", index=group.index))]
    worst = worst_class(classes)
    having = [c == worst for c in classes]
    warmup = pd.to_numeric(group.get("warmup_s", pd.Series(math.nan, index=group.index)), errors="coerce")
    seconds = warmup[having].dropna()
    return {"steady_class": worst, "steady_warmup_s": float(seconds.median()) if not seconds.empty else math.nan,
            "steady_class_runs": sum(having)}


def _seconds(value: float) -> str:
    """'0.4 s', '12 s': a no-break space keeps the unit with its number in a headline cell."""
    return f"{value:.2g}\u00a0s" if value < 10 else f"{value:,.0f}\u00a0s"


def steady_text(row: Mapping[str, Any] | pd.Series) -> str:
    """A summary row's steady cell: 'flat', 'warm-up 0.4 s' (to the steady segment), 'slowdown at
    2.1 s', 'no steady state', 'too short', 'not judged'; '(1 of 3 runs)' when not all its runs
    had the class shown."""
    name = row_class(row.get("steady_class"))
    seconds = number(row.get("steady_warmup_s"))
    text = name
    if seconds is not None and name == SteadyClass.WARMUP:
        text += f" {_seconds(seconds)}"
    elif seconds is not None and name == SteadyClass.SLOWDOWN:
        text += f" at {_seconds(seconds)}"
    runs, having = number(row.get("runs")), number(row.get("steady_class_runs"))
    if runs is not None and having is not None and runs > 1 and 0 < having < runs:
        text += f" ({int(having)} of {int(runs)} runs)"
    return text


def no_steady(row: Mapping[str, Any] | pd.Series) -> bool:
    return row_class(row.get("steady_class")) == SteadyClass.NO_STEADY


def marked(text: str, row: Mapping[str, Any] | pd.Series) -> str:
    """A latency figure's text, with ``MARK`` when its row has no steady state (held to the figure
    by a no-break space)."""
    return f"{text}\u00a0{MARK}" if text and no_steady(row) else text


def shows_mark(table: pd.DataFrame) -> bool:
    """Whether a formatted table (cells as text) has a ``marked`` figure: its ``MARK_NOTE`` goes
    under it."""
    return not table.empty and any(str(v).endswith(MARK) for column in table for v in table[column])


def runs_text(values: Iterable[Any]) -> str:
    """The cell of a configuration's class in a column of its own (a decoder's decode_steady_class)
    from its ok runs' values: the worst, with '(1 of 3 runs)' when not all had it; '' without runs."""
    classes = [row_class(v) for v in values]
    if not classes:
        return ""
    worst = worst_class(classes)
    return steady_text({"steady_class": worst, "runs": len(classes), "steady_class_runs": classes.count(worst)})


def _field(row: Any, name: str) -> Any:
    """A column of a row of any sort (a summary Series, a mapping, a ResultRow); None without it."""
    try:
        return row[name]
    except (KeyError, IndexError):
        return None


def _has_class(row: Any, column: str) -> bool:
    return row_class(_field(row, column)) != NOT_JUDGED


def terminal_judged(rows: Iterable[Any], column: str = "steady_class") -> bool:
    """Whether an end-of-sweep table shows a class column: some row has a class in ``column``."""
    return any(_has_class(r, column) for r in rows)


def terminal_class(row: Any, column: str = "steady_class") -> str:
    """A result row's class cell in the end-of-sweep table ('warm-up 0.4 s', 'no steady state');
    '-' without a class (a run that did not measure)."""
    if not _has_class(row, column):
        return "-"
    return steady_text({"steady_class": _field(row, column),
                        "steady_warmup_s": _field(row, "warmup_s") if column == "steady_class" else None})


def terminal_marked(text: str, row: Any) -> str:
    """A result row's figure in the end-of-sweep table, ``marked`` (not a '-' without a figure)."""
    return text if text == "-" else marked(text, {"steady_class": _field(row, "steady_class")})


def terminal_legend(rows: Iterable[Any]) -> str:
    """The line under the end-of-sweep tables when a figure in them is marked; '' otherwise."""
    return TERMINAL_LEGEND if any(row_class(_field(r, "steady_class")) == SteadyClass.NO_STEADY
                                  for r in rows) else ""


def any_marked(table: pd.DataFrame) -> bool:
    """Whether a table of summary rows has a figure ``marked`` (its note goes under it)."""
    return not table.empty and "steady_class" in table and any(
        row_class(v) == SteadyClass.NO_STEADY for v in table["steady_class"])


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["outcome"] == "ok"] if not rows.empty and "outcome" in rows else rows.iloc[0:0]


def tally_line(rows: pd.DataFrame) -> str:
    """The header's line: how many ok runs had each class ('Steady state: 17 flat, 2 warm-up,
    1 no steady state (...)'); runs without a class are not judged. '' without ok runs."""
    ok = _ok(rows)
    if ok.empty:
        return ""
    classes = [row_class(v) for v in ok.get("steady_class", pd.Series("", index=ok.index))]
    counts = {name: classes.count(name) for name in dict.fromkeys(classes)}
    judged = [f"{counts[c.value]} {c.value}" for c in reversed(WORST_FIRST) if counts.get(c.value)]
    judged += [f"{n} {name}" for name, n in counts.items() if _rank(name) < 0]  # a class this version does not know
    old = counts.get(NOT_JUDGED, 0)
    if not judged:
        return f"{BEFORE_SCHEMA_11[0].upper()}{BEFORE_SCHEMA_11[1:]}."
    text = "Steady state: " + ", ".join(judged)
    if counts.get(SteadyClass.NO_STEADY.value):
        text += " (figures of runs without a steady state are every iteration after the floor, marked " + MARK + ")"
    if old:
        text += f"; {old} run{'s' if old != 1 else ''} {BEFORE_SCHEMA_11}"
    return text + "."


# ------------------------------------------------------------------------------ run-sequence plots


def _run_label(row: pd.Series, show_sweep: bool) -> str:
    """'chrome · harness webgpu, bert-base-ffn-gemv 1x768x3072, 4-bit, run 3 (repetition 1)'."""
    from .glance import precision_text, setting_name  # glance shows this module's cells

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


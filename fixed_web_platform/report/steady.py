"""Steady state in the report (result schema 11, series/steady.py): the one place saying how a
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
- The "Warm-up and steady state" section's run-sequence plots: report/run_sequence.py.

Results from before schema 11 have no class: 'not judged' everywhere, and no plots.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ..values import number
from ..vocabulary import SteadyClass

WORST_FIRST = (SteadyClass.NO_STEADY, SteadyClass.TOO_SHORT, SteadyClass.SLOWDOWN, SteadyClass.WARMUP,
               SteadyClass.FLAT)
"""Which class a configuration of several runs shows: the first of these any of them had."""
NOT_JUDGED = SteadyClass.NOT_JUDGED.value
ROW_TEXT_COLUMNS = ("steady_class", "steady_tally", "stop_reason")
"""The row columns read here as text (blank in folders from before schema 11)."""
ROW_NUMBER_COLUMNS = ("warmup_s",)
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


def no_steady(row: Mapping[str, Any] | pd.Series, column: str = "steady_class") -> bool:
    return row_class(row.get(column)) == SteadyClass.NO_STEADY


def marked(text: str, row: Mapping[str, Any] | pd.Series, column: str = "steady_class") -> str:
    """A latency figure's text, with ``MARK`` when its row has no steady state in the class column
    of that figure (``column``; held to the figure by a no-break space)."""
    return f"{text}\u00a0{MARK}" if text and no_steady(row, column) else text


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


def terminal_marked(text: str, row: Any, column: str = "steady_class") -> str:
    """A result row's figure in the end-of-sweep table, ``marked`` by its class in ``column`` (not
    a '-' without a figure)."""
    return text if text == "-" else marked(text, {column: _field(row, column)}, column)


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


SINCE_SCHEMA = {"steady_class": 11, "ttft_steady_class": 14, "decode_steady_class": 14}
"""The schema that brought each class column (older folders' rows read blank: not judged)."""


def tally_line(rows: pd.DataFrame, column: str = "steady_class", figure: str = "") -> str:
    """The header's line: how many ok runs had each class of ``column``, the class of the
    ``figure`` a page shows ('Steady state of decode tokens/s: 17 flat, 2 warm-up, 1 no steady
    state (...)'); runs without a class are not judged. '' without ok runs."""
    ok = _ok(rows)
    if ok.empty:
        return ""
    classes = [row_class(v) for v in ok.get(column, pd.Series("", index=ok.index))]
    counts = {name: classes.count(name) for name in dict.fromkeys(classes)}
    judged = [f"{counts[c.value]} {c.value}" for c in reversed(WORST_FIRST) if counts.get(c.value)]
    judged += [f"{n} {name}" for name, n in counts.items() if _rank(name) < 0]  # a class this version does not know
    old = counts.get(NOT_JUDGED, 0)
    since = f"results from before schema {SINCE_SCHEMA.get(column, 11)}"
    before = f"not judged for steady state ({since})"
    title = f"Steady state of {figure}" if figure else "Steady state"
    if not judged:
        return f"{title}: not judged ({since})." if figure else f"{before[0].upper()}{before[1:]}."
    text = f"{title}: " + ", ".join(judged)
    if counts.get(SteadyClass.NO_STEADY.value):
        text += " (figures of runs without a steady state are every iteration after the floor, marked " + MARK + ")"
    if old:
        text += f"; {old} run{'s' if old != 1 else ''} {before}"
    return text + "."

"""The one Markdown table writer, with the one escaping rule for cells (pipes and backslashes
escaped, line breaks folded), used by every table the harness prints or writes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd


def cell(value: Any) -> str:
    """One cell: empty for None/NaN; browser messages cannot break the table."""
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())


def markdown_lines(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub pipe table of a DataFrame (no tabulate needed)."""
    return "\n".join(markdown_lines(list(frame.columns), frame.itertuples(index=False)))

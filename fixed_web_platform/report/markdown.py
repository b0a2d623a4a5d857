"""The one Markdown table writer, with the one escaping rule for cells (pipes and backslashes
escaped, line breaks folded), used by every table the harness prints or writes."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from ..values import number  # noqa: F401 - the report's readers use it from here


def fmt_bytes(value: Any) -> str:
    """Bytes in binary units ('' when there is no number)."""
    v = number(value)
    if v is None:
        return ""
    sign, v = ("-" if v < 0 else ""), abs(v)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= size:
            return f"{sign}{v / size:.2f} {unit}"
    return f"{sign}{v:.0f} B"


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


def html_table(frame: pd.DataFrame, css: str = "data", escape: bool = True) -> str:
    """A wide table scrolls inside its own box; the page never runs off the window. ``escape``
    False: the cells are HTML already (escaped by the caller)."""
    return ('<div class="scroll">' + frame.to_html(index=False, escape=escape, na_rep="", border=0,
                                                   classes=css) + "</div>")


HOW_TO_READ = "How to read this"


def how_to_read_markdown(paragraphs: Sequence[str], title: str = HOW_TO_READ) -> list[str]:
    """Method explanations, collapsed (GitHub renders <details> in Markdown)."""
    lines = ["<details>", f"<summary>{title}</summary>", ""]
    for paragraph in paragraphs:
        lines += [paragraph, ""]
    return [*lines, "</details>", ""]


def how_to_read_html(paragraphs: Sequence[str], title: str = HOW_TO_READ) -> str:
    """Method explanations collapsed under one line: the numbers stay in view, the method one
    click away."""
    return (f'<details class="how"><summary>{html.escape(title)}</summary>'
            + "".join(f'<p class="note">{html.escape(p)}</p>' for p in paragraphs) + "</details>")


def plot_sections(plots: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(Markdown lines, HTML parts) of a kind's plots, each under its heading: (title, file in plots/)."""
    md: list[str] = []
    parts: list[str] = []
    for title, name in plots:
        stem = name.rsplit(".", 1)[0]
        md += [f"### {title}", "", f"![{stem}](plots/{name})", ""]
        parts += [f"<h3>{html.escape(title)}</h3>",
                  f'<img src="plots/{html.escape(name)}" alt="{html.escape(stem)}">']
    return md, parts

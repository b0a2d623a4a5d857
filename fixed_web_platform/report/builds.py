"""The report's "Between builds" section: in a sweep that ran two builds of a browser or an engine
side by side (``--browser chrome@webnn chrome@chromium``, ``--engine ort@1.30.0 ort@1.31``),
which figures differ beyond noise from one build to the other (analysis/compare.compare_builds
judges them as compare judges two sweeps), and a table of every pair.
"""

from __future__ import annotations

import html as markup
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..analysis.compare import DEFAULT_ALPHA, MIN_PAGES, BuildPair, Verdict, compare_builds, pct
from ..results.reader import load
from ..vocabulary import with_build
from .markdown import how_to_read_html, how_to_read_markdown, html_table, markdown_table

CALLED = (Verdict.NEW_FAILURE, Verdict.ACCURACY_REGRESSION, Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.FIXED)
"""The verdicts that say a figure differs beyond noise (or a run broke or was fixed)."""
NOTE = (f"Each configuration that ran on several builds of its browser or engine, all else equal, is "
        f"set against the first build the sweep ran, as `compare` sets two sweeps against each other: "
        f"the units are the repetitions (rounds, each running every build in turn, so a drift of the "
        f"machine hits both builds alike; with one repetition, the page loads), a {1 - DEFAULT_ALPHA:.1%} "
        f"Welch interval of the ratio from their medians, at least {MIN_PAGES} units a side, and a change "
        f"called only beyond the minimum effect. 'insufficient' asks for more --repetitions. The versions "
        f"are the ones the browser and the engine reported in the rows.")


def _change(pair: BuildPair) -> str:
    e = pair.entry
    return "-" if e.effect is None or math.isnan(e.effect) else pct(e.effect)


def _interval(pair: BuildPair) -> str:
    """The Welch interval, where each side has the units to make one (else '-': two units a side
    give an interval of thousands of percent, which says nothing)."""
    i, e = pair.entry.interval, pair.entry
    if i is None or min(e.pages_baseline, e.pages_current) < MIN_PAGES or not (
            math.isfinite(i.low) and math.isfinite(i.high)):
        return "-"
    return f"{pct(i.low - 1)} to {pct(i.high - 1)}"


def _setting(pair: BuildPair) -> str:
    """What the pair shares besides its builds: the browser (engine pairs) or the engine (browser
    pairs), and the platform."""
    c = pair.entry.config_dict
    if pair.axis == "engine":
        return f"{with_build(c['browser'], c['browser_build'])} · {c['platform']}"
    return f"{with_build(c['engine'], c['engine_build'])} {c['platform']}"


def _bits(pair: BuildPair) -> str:
    c = pair.entry.config_dict
    bits = f"{c['bits_requested']}-bit"
    if str(c.get("act_bits")) == "8":
        bits += f" a8 {c['observer']}"
    return bits + (f" {c['format_requested']}" if c.get("format_requested") else "")


def _workload(pair: BuildPair) -> str:
    """The workload and its shape ('all-MiniLM-L6-v2 4x32 tokens'; a matmul named by its shape once)."""
    name, shape = str(pair.entry.config_dict["workload"]), pair.entry.shape
    return name if name.endswith(shape) else f"{name} {shape}"


def build_table(pairs: Sequence[BuildPair]) -> pd.DataFrame:
    return pd.DataFrame.from_records([{
        "builds": f"{p.baseline} -> {p.current}", "setting": _setting(p),
        "workload": _workload(p), "precision": _bits(p),
        "verdict": p.entry.verdict.value, "change": _change(p), f"{1 - DEFAULT_ALPHA:.1%} interval": _interval(p),
        "units": f"{p.entry.pages_baseline}/{p.entry.pages_current}", "note": p.entry.note or "-"} for p in pairs])


def differences(pairs: Sequence[BuildPair]) -> list[str]:
    """One line per pair whose figures differ beyond noise, by its versions ('chrome 153.0 ->
    156.0: 4-bit 1x768x3072 +40.0% slower' for chrome@webnn -> chrome@chromium)."""
    return [f"{p.baseline} -> {p.current}, {_setting(p)}: {p.entry.note}" for p in pairs if p.entry.verdict in CALLED]


def builds_section(directories: Sequence[Path], names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(Markdown lines, HTML parts) of the section; nothing when no sweep ran two builds."""
    md: list[str] = []
    html: list[str] = []
    for directory, name in zip(directories, names):
        pairs = compare_builds(load(directory))
        if not pairs:
            continue
        title = "Between builds" + (f" ({name})" if len(directories) > 1 else "")
        lines = differences(pairs)
        lead = ("Figures that differ beyond noise between builds:" if lines else
                f"No figure differs beyond noise between the builds ({len(pairs)} configurations set side by side).")
        table = build_table(pairs)
        md += [f"## {title}", "", lead, "", *(f"- {line}" for line in lines), *([""] if lines else []),
               markdown_table(table), "", *how_to_read_markdown([NOTE])]
        html += [f'<h2 id="between-builds">{markup.escape(title)}</h2>', f"<p>{markup.escape(lead)}</p>",
                 *(["<ul>", *(f"<li>{markup.escape(line)}</li>" for line in lines), "</ul>"] if lines else []),
                 html_table(table), how_to_read_html([NOTE])]
    return md, html

"""Findings: two Chromium binaries and two ONNX Runtime Web builds side by side in one sweep (the
default matmul shapes and MiniLM): which figures differ beyond noise between versions, as the
report's "Between builds" section judges them (analysis/compare.compare_builds), and every
configuration's median per build."""

from __future__ import annotations

import pandas as pd

from ..analysis.compare import compare_builds
from ..report.builds import NOTE, build_table, differences
from ..report.markdown import markdown_table
from ..vocabulary import with_build
from .page import Data, Page, summary

FOLDERS = ("versions-side-by-side",)


def medians(summed: pd.DataFrame) -> pd.DataFrame:
    """Each workload and precision's median latency per engine build (rows) and browser build
    (columns), with the versions they ran."""
    ok = summed[summed["latency_ms_median"].notna()].copy()
    ok["engine"] = list(map(with_build, ok["engine"], ok["engine_build"]))
    ok["browser"] = list(map(with_build, ok["browser"], ok["browser_build"]))
    ok["precision"] = ok["bits_requested"].astype(int).astype(str) + "-bit"
    table = ok.pivot_table(index=["workload", "precision", "engine"], columns="browser",
                           values="latency_ms_median", aggfunc="first", sort=False)
    table = table.map(lambda v: "-" if pd.isna(v) else f"{v:.3g} ms" if v < 1000 else f"{v / 1000:.3g} s")
    return table.reset_index().rename_axis(columns=None)


def tables(data: Data) -> list[str]:
    (folder,) = FOLDERS
    pairs = compare_builds(data[folder])
    lines = differences(pairs)
    lead = (f"{len(lines)} of {len(pairs)} configurations set side by side differ beyond noise between builds:"
            if lines else f"None of the {len(pairs)} configurations set side by side differs beyond noise.")
    return ["## What differs between versions", "", lead, "", *(f"- {line}" for line in lines), "",
            NOTE, "", "## Every pair", "", markdown_table(build_table(pairs)), "",
            "## Median latency per build", "",
            "Each configuration's median over its repetitions (each the median of its page loads' timed "
            "iterations); engine builds in rows, Chromium binaries in columns.", "",
            markdown_table(medians(summary(data, *FOLDERS))), ""]


PAGE = Page("versions", "Versions side by side: two Chromium binaries and two ONNX Runtime Web builds", FOLDERS,
            tables)

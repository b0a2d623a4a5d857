"""Layer sensitivity in the report: the ranked table and the plot of a sensitivity sweep
(``sensitivity.csv``, written by the ``sensitivity`` subcommand)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .markdown import markdown_table
from .plots import _save

TABLE_FILE = "sensitivity.csv"
FLOOR = 1e-7
"""Drops below this (or negative: the probe happened to agree better) are drawn at it, on the log axis."""


def _engines(table: pd.DataFrame) -> list[tuple[tuple[str, str, str], pd.DataFrame]]:
    keys = ["browser", "engine", "platform"]
    return [(tuple(str(v) for v in k), g) for k, g in table.groupby(keys, sort=False)]


def sensitivity_plots(table: pd.DataFrame, directory: Path, metric: str = "cosine_mean") -> list[Path]:
    """One PNG per browser x engine x platform: the drop of ``metric`` per probe (forward order),
    bars measured in the browser, dots predicted in Python, one colour per low bits."""
    paths = []
    for (browser, engine, platform), group in _engines(table):
        probes = list(dict.fromkeys(group["probe"]))
        bits = sorted({int(b) for b in group["bits"]}, reverse=True)
        fig = Figure(figsize=(8.5, 1.2 + 0.24 * len(probes)), layout="constrained")
        ax = fig.add_subplot()
        height = 0.8 / max(1, len(bits))
        y = np.arange(len(probes))
        for i, b in enumerate(bits):
            part = group[group["bits"] == b].set_index("probe").reindex(probes)
            measured = pd.to_numeric(part[f"drop_{metric}"], errors="coerce").to_numpy(dtype=float)
            predicted = pd.to_numeric(part[f"predicted_drop_{metric}"], errors="coerce").to_numpy(dtype=float)
            offset = y + (i - (len(bits) - 1) / 2) * height
            ax.barh(offset, np.clip(np.nan_to_num(measured, nan=0.0), FLOOR, None), height=height,
                    color=f"C{i}", alpha=0.75, label=f"{b}-bit, measured in the browser")
            ax.plot(np.clip(predicted, FLOOR, None), offset, "k.", markersize=4,
                    label="predicted in Python (numpy float64)")
            for yy, m in zip(offset, measured):
                if np.isnan(m):
                    ax.annotate("not run", (FLOOR, yy), fontsize=6, va="center")
        ax.set_xscale("log")
        ax.set_yticks(y, probes, fontsize=7)
        ax.invert_yaxis()
        baseline = int(group["baseline_bits"].iloc[0])
        ax.set_xlabel(f"drop of {metric.replace('_', ' ')} vs PyTorch fp32, against the all-{baseline}-bit run")
        ax.set_title(f"layer sensitivity: {browser}/{engine}/{platform}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        paths.append(_save(fig, directory / f"sensitivity_{browser}_{engine}_{platform}.png"))
    return paths


def ranked_markdown(table: pd.DataFrame, limit: int = 10) -> str:
    """The most sensitive probes per browser x engine x platform."""
    parts = []
    for (browser, engine, platform), group in _engines(table):
        drop = pd.to_numeric(group["drop_cosine_mean"], errors="coerce")
        ranked = group.assign(_d=drop).sort_values("_d", ascending=False, na_position="last").head(limit)
        shown = pd.DataFrame({
            "probe": ranked["probe"], "bits": ranked["bits"], "outcome": ranked["outcome"],
            "cosine mean": pd.to_numeric(ranked["cosine_mean"], errors="coerce").map(
                lambda v: "" if pd.isna(v) else f"{v:.5f}"),
            "drop (browser)": ranked["_d"].map(lambda v: "" if pd.isna(v) else f"{v:.2e}"),
            "drop (Python)": pd.to_numeric(ranked["predicted_drop_cosine_mean"], errors="coerce").map(
                lambda v: "" if pd.isna(v) else f"{v:.2e}"),
        })
        parts.append(f"**{browser}/{engine}/{platform}** (most sensitive first)\n\n"
                     + markdown_table(shown))
    return "\n\n".join(parts)

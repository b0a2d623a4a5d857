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


def ranking_metric(table: pd.DataFrame) -> str:
    """What a sensitivity table ranks by: an encoder's mean cosine, an ONNX file's lowest output
    cosine (the only one its rows have)."""
    mean = pd.to_numeric(table.get("cosine_mean", pd.Series(dtype=float)), errors="coerce")
    return "cosine_mean" if mean.notna().any() or table.empty else "cosine_min"


def sensitivity_plots(table: pd.DataFrame, directory: Path, metric: str | None = None) -> list[Path]:
    """One PNG per browser x engine x platform: the drop of ``metric`` (ranking_metric's by
    default) per probe (forward order), bars measured in the browser, dots predicted in Python,
    one colour per low bits."""
    metric = metric or ranking_metric(table)
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
                    label="predicted in Python")
            for yy, m in zip(offset, measured):
                if np.isnan(m):
                    ax.annotate("not run", (FLOOR, yy), fontsize=6, va="center")
        ax.set_xscale("log")
        ax.set_yticks(y, probes, fontsize=7)
        ax.invert_yaxis()
        baseline = int(group["baseline_bits"].iloc[0])
        ax.set_xlabel(f"drop of {metric.replace('_', ' ')} vs fp32, against the all-{baseline}-bit run")
        ax.set_title(f"layer sensitivity: {browser}/{engine}/{platform}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        paths.append(_save(fig, directory / f"sensitivity_{browser}_{engine}_{platform}.png"))
    return paths


def ranked_frames(table: pd.DataFrame, limit: int = 10) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) per browser x engine x platform: its most sensitive probes first."""
    out = []
    metric = ranking_metric(table)
    for (browser, engine, platform), group in _engines(table):
        drop = pd.to_numeric(group[f"drop_{metric}"], errors="coerce")
        ranked = group.assign(_d=drop).sort_values("_d", ascending=False, na_position="last").head(limit)

        def fmt(values: pd.Series, spec: str) -> pd.Series:
            return pd.to_numeric(values, errors="coerce").map(lambda v: "" if pd.isna(v) else format(v, spec))
        out.append((f"{browser}/{engine}/{platform} (most sensitive first)", pd.DataFrame({
            "probe": ranked["probe"], "bits": ranked["bits"],
            "ran at": ranked.get("bits_executed", ""),
            "outcome": ranked["outcome"],
            metric.replace("_", " "): fmt(ranked[metric], ".5f"),
            "drop (browser)": fmt(ranked["_d"], ".2e"),
            "drop (Python)": fmt(ranked[f"predicted_drop_{metric}"], ".2e"),
            "top-1 drop": fmt(ranked["drop_top1_agreement"], ".3f"),
        })))
    return out


def ranked_markdown(table: pd.DataFrame, limit: int = 10) -> str:
    return "\n\n".join(f"**{title}**\n\n{markdown_table(frame)}" for title, frame in ranked_frames(table, limit))


FRONTIER_FILE = "frontier.csv"


def sensitivity_section(directories: list[Path], plots_dir: Path) -> tuple[list[str], list[str]]:
    """(Markdown lines, HTML parts) of the Layer sensitivity section, for every folder that has a
    sensitivity.csv; its plots are drawn again into the report's plots folder. Empty when none."""
    import html

    from .markdown import how_to_read_html, how_to_read_markdown, html_table

    md: list[str] = []
    parts: list[str] = []
    for directory in directories:
        path = Path(directory) / TABLE_FILE
        if not path.is_file():
            continue
        table = pd.read_csv(path, keep_default_na=False)
        if table.empty:
            continue
        plots_dir.mkdir(parents=True, exist_ok=True)
        sub = plots_dir / f"sensitivity-{Path(directory).name}"
        sub.mkdir(exist_ok=True)
        pngs = sensitivity_plots(table, sub)
        title = f"Layer sensitivity: {Path(directory).name}"
        note = ("Each probe quantizes one linear layer (or group) to the low bits, every other layer "
                "at the baseline; the drop is against the all-baseline run of the same engine, "
                "measured in the browser and predicted by the numpy float64 forward with the same "
                "weights.")
        md += [f"## {title}", "", *how_to_read_markdown([note]), ranked_markdown(table), ""]
        parts += [f"<h2>{html.escape(title)}</h2>", how_to_read_html([note]),
                  *(part for t, frame in ranked_frames(table)
                    for part in (f"<p><b>{html.escape(t)}</b></p>", html_table(frame)))]
        for png in pngs:
            ref = f"plots/{sub.name}/{png.name}"
            md += [f"![{png.stem}]({ref})", ""]
            parts.append(f"<img src=\"{html.escape(ref)}\" alt=\"{html.escape(png.stem)}\">")
        frontier = Path(directory) / FRONTIER_FILE
        if frontier.is_file():
            front = pd.read_csv(frontier, keep_default_na=False)
            md += ["### Precision plan under the budget: accuracy vs weight bytes", "",
                   markdown_table(front), ""]
            parts += ["<h3>Precision plan under the budget: accuracy vs weight bytes</h3>",
                      html_table(front)]
    return md, parts

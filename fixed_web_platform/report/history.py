"""The history of a nightly, as a person reads it: what changed, when, by how much and with what
evidence (analysis/history.py judged it), a table of every configuration, and one plot per
configuration (its median and the range of its rounds per night in both views, the history's prediction
limits, change points marked).

Written by `compare OLDEST ... CURRENT --output FILE.md`: FILE.md, and the plots in
FILE-plots/ beside it.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..analysis.compare import Entry, Verdict
from ..analysis.history import HISTORY_MIN, HistoryComparison, HistoryEntry, Night, View, describe
from .markdown import markdown_lines


def _label(entry: Entry | HistoryEntry) -> str:
    if isinstance(entry, HistoryEntry):
        entry = Entry(config=entry.config, verdict=entry.verdict)
    return entry.label


def _when(j_since: str, nights_after: int) -> str:
    return "on the newest night" if nights_after == 1 else f"since {j_since}"


def what_changed(judged: HistoryComparison) -> list[str]:
    """One sentence per configuration whose verdict is a change, a failure or a fix; and one per
    browser whose sessions as a whole moved."""
    lines = []
    for e in judged.comparison.entries:
        if e.verdict in (Verdict.UNCHANGED, Verdict.STILL_FAILING, Verdict.SKIPPED):
            continue
        h = judged.entry(e.config)
        d = h.decision if h is not None else None
        if d is not None and d.called and e.verdict is d.verdict:
            lines.append(f"**{e.verdict.value}**: {e.label}: {d.effect:+.1%} {_when(d.since, d.nights_after)} "
                         f"({describe(d)})")
        else:
            lines.append(f"**{e.verdict.value}**: {e.label}: {e.note or '-'}")
    for browser, j in judged.moved.items():
        lines.append(f"**whole session**: {browser}'s configurations as a whole ran {j.effect:+.1%} "
                     f"{_when(j.since, j.nights_after)} against their history (limit +-{j.limit:.1%}): machine "
                     "load or a change common to all of them; not called a regression (see docs/guides/"
                     "comparing-and-history.md)")
    for h in judged.history:
        for view, found in h.steps.items():
            if view is not h.decided_by:  # the absolute view's steps on a shared machine: drift, plotted only
                continue
            for step in found:
                if step.index < len(h.series[view]) - 2:  # the newest two nights are judged above
                    lines.append(f"earlier step ({view.value} view): {_label(h)}: {step.effect:+.1%} from "
                                 f"{step.sweep}")
    return lines


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:+.1%}"


def format_history(judged: HistoryComparison, plots: Sequence[str] = ()) -> str:
    c = judged.comparison
    lines = [f"Newest sweep `{judged.sweeps[-1]}` judged against the {len(judged.sweeps) - 1} earlier "
             f"sweep(s) of its set-up (oldest `{judged.sweeps[0]}`)", ""]
    for left in judged.left_out:
        lines.append(f"> left out of the history (another set-up): {left}")
    if judged.left_out:
        lines.append("")
    changed = what_changed(judged)
    lines += ["## What changed", ""]
    lines += [f"- {line}" for line in changed] or ["- nothing: every configuration is within its history"]
    lines += ["", "## Every configuration", ""]
    head, body = configuration_table(judged)
    lines += markdown_lines(head, body)
    lines += ["", summary_line(judged)]
    if plots:
        lines += ["", "## History plots", ""]
        lines += [f"![{Path(p).stem}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def summary_line(judged: HistoryComparison) -> str:
    c = judged.comparison
    status = "REGRESSION" if judged.has_regression else "no regression"
    counts = ", ".join(f"{n} {v.value}" for v, n in c.counts.items()) or "no configurations"
    return (f"**Summary:** {counts} — {status} (history judge: a step on the newest night, or the night "
            f"before and still there, beyond the {1 - c.alpha:.1%} prediction limit of the nights since the "
            f"last change point, at least {HISTORY_MIN} of them, and beyond the minimum effect "
            f"{c.min_effect:.0%}; the drift-free session view decides where it exists)")


def configuration_table(judged: HistoryComparison) -> tuple[list[str], list[list[str]]]:
    """Every configuration of the newest sweep: its verdict, which view decided, the change and
    its evidence."""
    head = ["configuration", "verdict", "decided by", "change", "since", "limit", "absolute", "newest ms",
            "history nights", "note"]
    body = []
    for e in judged.comparison.entries:
        h = judged.entry(e.config)
        d = h.decision if h is not None else None
        if d is not None and d.verdict is Verdict.INSUFFICIENT:
            d = None  # judged as a pair against the previous sweep: its figures are the entry's
        a = h.judgement(View.ABSOLUTE) if h is not None else None
        newest = h.series.get(View.ABSOLUTE, ())[-1:] if h is not None else ()
        body.append([
            e.label, e.verdict.value, d.view.value if d is not None else "previous sweep",
            _pct(d.effect) if d is not None else _pct(e.effect if e.effect is not None else math.nan),
            (d.since if d is not None and d.called else "-"),
            f"+-{d.limit:.1%}" if d is not None and math.isfinite(d.limit) else "-",
            _pct(a.effect) if a is not None and a.verdict is not Verdict.INSUFFICIENT else "-",
            f"{math.exp(newest[0].value):.3f}" if newest else "-",
            str(d.history_nights) if d is not None else "-",
            e.note or "-",
        ])
    return head, body


def history_section(judged: HistoryComparison, plots_dir: Path) -> tuple[list[str], list[str], list[Path]]:
    """The report's History section of one history: (Markdown lines, HTML parts, plots drawn)."""
    import html

    import pandas as pd

    from .markdown import html_table

    drawn = draw_history_plots(judged, plots_dir)
    rel = [f"{plots_dir.name}/{p.name}" for p in drawn]
    title = f"History: {judged.sweeps[-1]} against {len(judged.sweeps) - 1} earlier sweep(s)"
    changed = what_changed(judged) or ["nothing: every configuration is within its history"]
    head, body = configuration_table(judged)
    md = [f"## {title}", "", *(f"- {line}" for line in changed), "", *markdown_lines(head, body), "",
          summary_line(judged), ""]
    md += [f"![{Path(p).stem}]({p})" for p in rel] + [""]
    e = html.escape
    strip = lambda text: text.replace("**", "")  # noqa: E731 - the Markdown emphasis, for HTML
    parts = [f"<h2 id=\"history\">{e(title)}</h2>", "<ul>", *(f"<li>{e(strip(line))}</li>" for line in changed),
             "</ul>", html_table(pd.DataFrame(body, columns=head)),
             f"<p class=\"note\">{e(strip(summary_line(judged)))}</p>"]
    parts += [f"<img src=\"{e(p)}\" alt=\"{e(Path(p).stem)}\">" for p in rel]
    return md, parts, drawn


def _file_name(h: HistoryEntry) -> str:
    """A PNG name per configuration: its label, made unique by a hash of its whole identity."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", _label(h)).strip("-").lower()[:100]
    digest = hashlib.sha256(repr(h.config).encode()).hexdigest()[:8]
    return f"{slug}-{digest}.png"


def _panel(ax, series: Sequence[Night], h: HistoryEntry, view: View, scale: float) -> None:  # noqa: ANN001
    x = list(range(len(series)))
    y = [math.exp(n.value) * scale for n in series]
    lo = [math.exp(n.low) * scale if math.isfinite(n.low) else yy for n, yy in zip(series, y, strict=True)]
    hi = [math.exp(n.high) * scale if math.isfinite(n.high) else yy for n, yy in zip(series, y, strict=True)]
    ax.errorbar(x, y, yerr=[[a - b for a, b in zip(y, lo, strict=True)], [b - a for a, b in zip(y, hi, strict=True)]],
                fmt="o", color="#1f77b4", ms=4, capsize=2, lw=1, label="night: median of its rounds, their range")
    j = h.judgement(view)
    if j is not None and j.history_nights and math.isfinite(j.limit):
        k = j.nights_after
        start = max(len(series) - k - j.history_nights, 0)
        base = sum(n.value for n in series[start:len(series) - k]) / max(len(series) - k - start, 1)
        centre = math.exp(base) * scale
        ax.fill_between([start - 0.3, len(series) - 0.7], centre / (1 + j.limit), centre * (1 + j.limit),
                        color="#999999", alpha=0.15, lw=0,
                        label=f"history's {('newest night' if k == 1 else 'two-night')} prediction limit")
        ax.hlines(centre, start, len(series) - 1, colors="#666666", linestyles=":", lw=1)
        if j.called:
            ax.plot(x[-k:], y[-k:], "o", color="#d62728", ms=7, label=f"{j.verdict.value} {j.effect:+.0%}")
    for step in h.steps.get(view, ()):
        ax.axvline(step.index - 0.5, color="#ff7f0e", ls="--", lw=1)
        ax.annotate(f"step {step.effect:+.0%}", (step.index - 0.5, 1), xycoords=("data", "axes fraction"),
                    xytext=(2, -10), textcoords="offset points", fontsize=7, color="#ff7f0e")
    every = max(1, math.ceil(len(series) / 10))
    ax.set_xticks(x[::every])
    ax.set_xticklabels([n.sweep[-16:] for n in series][::every], rotation=35, ha="right", fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def draw_history_plots(judged: HistoryComparison, out_dir: Path) -> list[Path]:
    """One PNG per configuration of the newest sweep with a history: its nights in each view."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for h in judged.history:
        views = [v for v in View if len(h.series.get(v, ())) >= 2]
        if not views:
            continue
        fig = Figure(figsize=(5.4 * len(views), 3.6), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(views), squeeze=False)[0]
        for ax, view in zip(axes, views, strict=True):
            _panel(ax, h.series[view], h, view, 1.0)
            ax.set_ylabel("ms" if view is View.ABSOLUTE else "ms, the session's drift taken out")
            title = "absolute" if view is View.ABSOLUTE else "drift-free (the session's drift taken out)"
            decided = " - decides" if h.decided_by is view else ""
            ax.set_title(f"{title}{decided}", fontsize=9)
        fig.suptitle(_label(h), fontsize=9)
        path = out_dir / _file_name(h)
        fig.savefig(path, dpi=90)
        files.append(path)
    return files

"""The report's first screen: what each precision costs and buys, in words, per setting.

One row per configuration (browser x engine x platform x workload x bits): latency against the
float32 and 16-bit rows of the same setting, weight memory against float32, error against the
float weights, what ran if it was not what was asked, and a verdict sentence. A latency
difference whose p10-p90 spreads overlap, or under compare's minimum effect (10%), is called
"same", never a trend. Cells
carry a class (better / worse / same) for colour, and the words say the same without it.

Whole-model rows are included, as their own settings: the workload cell names the model and its
batch x sequence tokens, the bits cell its precision plan; a mixed plan is never a baseline; the
verdict adds the cosine against PyTorch float32. Their full figures are in the report's Whole
models section.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..analysis.compare import DEFAULT_MIN_EFFECT
from ..results.rows import setting_columns
from .markdown import fmt_bytes, markdown_lines, number

SETTING_KEY = ("sweep", *setting_columns())
"""One setting (results/rows.py: everything but the precision asked for)."""
COLUMNS = ("setting", "workload", "bits", "median latency", "vs float32", "vs 16-bit",
           "weight memory", "error vs float", "verdict")


@dataclass(frozen=True)
class Cell:
    text: str
    tone: str = ""
    """'better', 'worse', 'same' or '' (no judgement)."""




def _bytes(value: Any) -> str:
    return fmt_bytes(value) or "-"


def latency_change(row: pd.Series, base: pd.Series) -> tuple[float, str] | None:
    """The one rule for "is this row faster than that one" in a report: (speed-up base/row,
    '' for a change, or why it is the same: the p10-p90 spreads overlap, or the medians differ by
    less than compare's minimum effect). None without both medians."""
    med, ref = number(row["latency_ms_median"]), number(base["latency_ms_median"])
    if not med or not ref:
        return None
    lo, hi = number(row.get("latency_ms_p10")), number(row.get("latency_ms_p90"))
    blo, bhi = number(base.get("latency_ms_p10")), number(base.get("latency_ms_p90"))
    ratio = ref / med
    if None not in (lo, hi, blo, bhi) and lo <= bhi and blo <= hi:
        return ratio, "same within spread"
    if abs(ratio - 1) < DEFAULT_MIN_EFFECT:
        return ratio, f"same (under {DEFAULT_MIN_EFFECT:.0%})"
    return ratio, ""


def _speed(row: pd.Series, base: pd.Series | None) -> Cell:
    """This row's latency against a baseline row's, judged on their p10-p90 spreads."""
    if base is None:
        return Cell("-")
    if base.name == row.name:
        return Cell("baseline")
    change = latency_change(row, base)
    if change is None:
        return Cell("-")
    ratio, same = change
    if same:
        return Cell(same, "same")
    return Cell(f"{ratio:.2f}x faster", "better") if ratio > 1 else Cell(f"{1 / ratio:.2f}x slower", "worse")


def _what_ran(row: pd.Series) -> str:
    notes = []
    executed = number(row.get("bits_executed"))
    if executed is not None and int(executed) != int(row["bits_requested"]):
        notes.append(f"ran as {int(executed)}-bit")
    ran_on = str(row.get("executed_on") or "")
    if ran_on and ran_on != row["platform"]:
        notes.append(f"ran on {ran_on}")
    return ", ".join(notes)


def glance_rows(summary: pd.DataFrame) -> tuple[list[list[Cell]], list[str]]:
    """(rows of cells, footnotes): one row per configuration of the summary, in its order."""
    rows: list[list[Cell]] = []
    footnotes: list[str] = []
    if summary.empty:
        return rows, footnotes
    show_sweep = summary["sweep"].nunique() > 1
    key = [c for c in SETTING_KEY if c in summary]
    for _, setting in summary.groupby(key, sort=False, dropna=False):
        by_bits = {int(r["bits_requested"]): r for _, r in setting.iterrows()
                   if not _mixed(r.get("precision_plan"))}
        f32, f16 = by_bits.get(32), by_bits.get(16)
        for _, row in setting.iterrows():
            bits = int(row["bits_requested"])
            name = f"{row['browser']} · {row['engine']} {row['platform']}"
            if row["platform"] == "webnn":
                name += f" ({row['device_type']} {row['precision_mode']})"
            if show_sweep:
                name = f"{row['sweep']}: {name}"
            ran = _what_ran(row)
            plan = str(row.get("precision_plan") or "")
            bits_text = f"{bits}" + (f" {plan}" if _mixed(plan) else "") + (f" ({ran})" if ran else "")
            if ran and row.get("fallback"):
                footnotes.append(f"{name}, {row['workload']}, {bits}-bit: {row['fallback']}")
                bits_text += f" [{len(footnotes)}]"
            vs32, vs16 = _speed(row, f32), _speed(row, f16)
            compression = number(row.get("compression"))
            memory = _bytes(row.get("weight_bytes"))
            if bits != 32 and compression:
                memory += f" ({compression:.1f}x less)"
            error = number(row.get("rel_error_vs_float"))
            verdict = _verdict(bits, compression, vs32, error, ran, plan if _mixed(plan) else "")
            cosine = number(row.get("cosine_mean"))
            if cosine is not None:
                verdict += f"; cosine {cosine:.4f} vs PyTorch fp32"
            rows.append([
                Cell(name), Cell(f"{row['workload']} {row['shape']}"), Cell(bits_text),
                Cell(f"{number(row['latency_ms_median']):.3g} ms" if number(row["latency_ms_median"]) else "-"),
                vs32, vs16,
                Cell(memory, "better" if bits != 32 and compression and compression > 1 else ""),
                Cell(f"{error:.1e}" if error is not None else "-"),
                Cell(verdict),
            ])
    return rows, footnotes


def _mixed(plan: Any) -> bool:
    return isinstance(plan, str) and plan.startswith("mixed")


def _verdict(bits: int, compression: float | None, vs32: Cell, error: float | None, ran: str,
             plan: str = "") -> str:
    if bits == 32 and not plan:
        return "float32 baseline"
    parts = []
    if compression:
        parts.append(f"{compression:.1f}x less weight memory")
    if vs32.tone == "same":
        parts.append("as fast as float32 (no difference beyond noise)")
    elif vs32.tone:
        parts.append(f"{vs32.text} than float32")
    if error is not None:
        parts.append(f"rel. error {error:.0e}")
    what = f"{bits}-bit {plan}" if plan else f"{bits}-bit"
    text = f"{what}: " + ", ".join(parts) if parts else what
    return f"{text} ({ran})" if ran else text


def glance_markdown(summary: pd.DataFrame) -> str:
    rows, footnotes = glance_rows(summary)
    if not rows:
        return "No ok runs."
    lines = markdown_lines(COLUMNS, [[c.text for c in r] for r in rows])
    lines += [""] + [f"[{i}] {text}" for i, text in enumerate(footnotes, 1)]
    return "\n".join(lines).rstrip()


def glance_html(summary: pd.DataFrame) -> str:
    rows, footnotes = glance_rows(summary)
    if not rows:
        return "<p>No ok runs.</p>"
    e = html.escape
    out = ['<div class="scroll"><table class="data glance" id="glance"><thead><tr>',
           *(f"<th>{e(c)}</th>" for c in COLUMNS), "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="{c.tone}">{e(c.text)}</td>' if c.tone
                                    else f"<td>{e(c.text)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table></div>")
    if footnotes:
        out.append('<ol class="footnotes">' + "".join(f"<li>{e(t)}</li>" for t in footnotes) + "</ol>")
    return "\n".join(out)

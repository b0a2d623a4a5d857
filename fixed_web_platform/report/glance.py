"""The report's first screen: per kind of work, which precision to pick on each browser and
engine and what it costs, and a headline table of the few figures behind that answer.

Each kind says what its first screen shows in a ``Glance`` (its registry entry in
report/sections.py): its title, the accuracy figure that matters for it with the bar a pick must
meet, and any speed figures of its own (a decoder's time to first token and tokens/s).

- A headline row per configuration: setting, workload, precision asked (and what ran when it
  differs), median latency with its p10-p90, against the fastest float32 run of the same
  setting, its steady-state class (report/steady.py: a median without a steady state is marked),
  weight memory, the kind's accuracy figure and the kernel check.
- A pick per setting (browser x engine x platform x workload): of the precisions whose accuracy
  meets the kind's bar, the fastest; of those as fast as it within noise, the one with the
  fewest weight bytes. When fewer bytes within the bar cost speed, the line says so too.

"Faster" and "slower" follow one rule (``latency_change``): a difference whose p10-p90 spreads
overlap, or under compare's minimum effect (10%), is "same", never a trend. Cells carry a tone
(better / worse / same) for colour, and the words say the same without it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..precision.quantizers import DEFAULT_QUANTIZER
from ..analysis.compare import DEFAULT_MIN_EFFECT
from ..probes.adapter import FALLBACK_MARK
from ..results.rows import setting_columns
from .markdown import fmt_bytes, markdown_lines, number
from .steady import MARK_NOTE, any_marked, marked, steady_text

SETTING_KEY = ("sweep", *setting_columns())
"""One setting (results/rows.py: everything but the precision asked for)."""


@dataclass(frozen=True)
class Accuracy:
    """The accuracy figure a kind is judged by on the first screen, and the bar a pick meets."""

    column: str
    label: str
    spec: str
    higher_is_better: bool
    bar: float

    def text(self, value: Any) -> str:
        v = number(value)
        return "-" if v is None else format(v, self.spec)

    def meets(self, value: Any) -> bool:
        v = number(value)
        if v is None:
            return False
        return v >= self.bar if self.higher_is_better else v <= self.bar

    @property
    def bar_text(self) -> str:
        return f"{self.label} {'≥' if self.higher_is_better else '≤'} {format(self.bar, self.spec)}"


@dataclass(frozen=True)
class Figure:
    """A speed figure of a kind's own in its headline table (column, header, format)."""

    column: str
    label: str
    spec: str


@dataclass(frozen=True)
class Glance:
    """What a workload kind shows on the report's first screen."""

    title: str
    accuracy: Accuracy
    figures: tuple[Figure, ...] = ()
    note: str = ""
    """What its rows are and why its bar is what it is (under "How to read this")."""


DEFAULT_GLANCE = Glance("Other work", Accuracy("rel_error_vs_float", "error vs float", ".1e", False, 0.05))
"""For a kind without a registry entry of its own."""
HEADLINE = ("setting", "workload", "precision", "median (p10-p90)", "vs float32", "steady")
TAIL = ("weight memory",)


@dataclass(frozen=True)
class Cell:
    text: str
    tone: str = ""
    """'better', 'worse', 'same' or '' (no judgement)."""


@dataclass(frozen=True)
class Pick:
    """The answer for one setting: which precision, and what it costs against float32."""

    setting: str
    workload: str
    precision: str
    costs: str
    chosen: Any = None
    """The summary row picked (None when none was): what the file to ship is made from (ship.py)."""

    @property
    def text(self) -> str:
        return f"{self.setting}, {self.workload}: {self.precision}: {self.costs}"


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


def _mixed(plan: Any) -> bool:
    return isinstance(plan, str) and plan.startswith("mixed")


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def setting_name(row: pd.Series, show_sweep: bool) -> str:
    name = f"{row['browser']} · {row['engine']} {row['platform']}"
    if row["platform"] == "webnn":
        extra = " ".join(v for v in (_text(row.get("device_type")), _text(row.get("precision_mode"))) if v)
        name += f" ({extra})" if extra else ""
    if _text(row.get("adapter")).endswith(FALLBACK_MARK):
        name += " · fallback adapter"
    return f"{row['sweep']}: {name}" if show_sweep else name


def what_ran(row: pd.Series) -> str:
    """'ran as 8-bit', 'ran on wasm', '3 nodes on the CPU': where the row ran other than asked
    ('' when as asked)."""
    notes = []
    executed = number(row.get("bits_executed"))
    if executed is not None and int(executed) != int(row["bits_requested"]):
        notes.append(f"ran as {int(executed)}-bit")
    ran_on = _text(row.get("executed_on"))
    if ran_on and ran_on != row["platform"]:
        notes.append(f"ran on {ran_on}")
    off = number(row.get("nodes_fallback"))  # an ONNX file's nodes ORT put on its CPU provider
    if off:
        some = f"{int(off)}" if number(row.get("nodes_placed")) else f"at least {int(off)}"
        notes.append(f"{some} node{'s' if off > 1 else ''} on the CPU")
    return ", ".join(notes)


def precision_text(row: pd.Series, forms: int = 1, observers: int = 1, quantizers: int = 1) -> str:
    """The precision asked for, short: 'float32', '8-bit', '8-bit per-channel W8A8 gemm_qdq',
    '4-bit mixed:8x24,4x12', 'Q4_0', '4-bit hqq'. ``forms`` / ``observers`` / ``quantizers``: how
    many graph forms, activation observers and weight quantizers the setting has (each is named
    only when it tells rows apart; a quantizer other than the default always)."""
    bits = int(row["bits_requested"])
    plan = _text(row.get("precision_plan"))
    fmt = _text(row.get("format_requested"))
    text = "float32" if bits == 32 and not _mixed(plan) else f"{bits}-bit"
    if fmt:
        text += f" {fmt}"
    if _mixed(plan):
        text += f" {plan}"
    if _text(row.get("granularity")) == "per-channel":
        text += " per-channel"
    quantizer = _text(row.get("weight_quant"))
    if quantizer and (quantizer != DEFAULT_QUANTIZER or quantizers > 1):
        text += f" {quantizer}"
    acts = number(row.get("act_bits"))
    if acts is not None and int(acts) == 8:
        text += f" W{bits}A8"
        if observers > 1 and _text(row.get("observer")):
            text += f" ({_text(row.get('observer'))})"
    form = _text(row.get("graph_form"))
    if forms > 1 and form:
        text += f" {form}"
    return text


def _baseline(setting: pd.DataFrame) -> pd.Series | None:
    """The fastest uniform float32 run of the setting that ran as asked (one that ran otherwise
    only when there is no other; None without one)."""
    f32 = setting[(setting["bits_requested"] == 32) & ~setting.get("precision_plan", pd.Series("", index=setting.index))
                  .map(_mixed)]
    as_asked = f32[[not what_ran(row) for _, row in f32.iterrows()]]
    f32 = as_asked if not as_asked.empty else f32
    medians = pd.to_numeric(f32["latency_ms_median"], errors="coerce")
    if medians.notna().sum() == 0:
        return None
    return f32.loc[medians.idxmin()]


def _settings(summary: pd.DataFrame) -> list[pd.DataFrame]:
    key = [c for c in SETTING_KEY if c in summary]
    return [group for _, group in summary.reset_index(drop=True).groupby(key, sort=False, dropna=False)]


def _label(setting: pd.DataFrame) -> Any:
    """row -> its precision text, naming graph forms, observers and quantizers where the setting has several."""
    def count(column: str) -> int:
        return setting[column].map(_text).nunique() if column in setting else 1

    forms = count("graph_form")
    acts8 = setting[pd.to_numeric(setting.get("act_bits", pd.Series(32, index=setting.index)),
                                  errors="coerce") == 8]
    observers = acts8["observer"].map(_text).nunique() if "observer" in acts8 else 1

    quantizers = setting["weight_quant"].map(_text).replace("", pd.NA).nunique() if "weight_quant" in setting else 1

    def label(row: pd.Series) -> str:
        text = precision_text(row, forms, observers, quantizers)
        ran = what_ran(row)
        return f"{text} ({ran})" if ran else text
    return label


def _kernel(row: pd.Series) -> Cell:
    """The kernel check: the engine's error against the float64 reference on the same weights,
    against its tolerance."""
    err, tol = number(row.get("rel_error_vs_dequantized")), number(row.get("kernel_tolerance"))
    if err is None:
        return Cell("-")
    if tol is not None and err > tol:
        return Cell(f"over tolerance ({err:.0e} > {tol:.0e})", "worse")
    return Cell(f"ok ({err:.0e})")


def _ms(value: float) -> str:
    """Milliseconds with three significant digits, never in scientific notation ('4,602')."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def median_text(row: pd.Series, fmt: Any = _ms, unit: str = " ms", blank: str = "-") -> str:
    """A row's median latency with its p10-p90 ('7.75 ms (7.38-10.9)'), each number by ``fmt``."""
    med = number(row["latency_ms_median"])
    if med is None:
        return blank
    lo, hi = number(row.get("latency_ms_p10")), number(row.get("latency_ms_p90"))
    spread = f" ({fmt(lo)}-{fmt(hi)})" if lo is not None and hi is not None else ""
    return f"{fmt(med)}{unit}{spread}"


def _memory(row: pd.Series) -> Cell:
    text = fmt_bytes(row.get("weight_bytes")) or "-"
    compression = number(row.get("compression"))
    if int(row["bits_requested"]) != 32 and compression and compression > 1:
        return Cell(f"{text} ({compression:.1f}x less)", "better")
    return Cell(text)


def headline_columns(glance: Glance) -> tuple[str, ...]:
    return (*HEADLINE, *(f.label for f in glance.figures), *TAIL, glance.accuracy.label, "kernel check")


def headline_rows(summary: pd.DataFrame, glance: Glance = DEFAULT_GLANCE
                  ) -> tuple[list[list[Cell]], list[str]]:
    """(rows of cells, footnotes): one row per configuration of the summary, in its order;
    footnotes say why a row ran other than asked."""
    rows: list[list[Cell]] = []
    footnotes: list[str] = []
    if summary.empty:
        return rows, footnotes
    show_sweep = summary["sweep"].nunique() > 1
    for setting in _settings(summary):
        base = _baseline(setting)
        label = _label(setting)
        for _, row in setting.iterrows():
            name = setting_name(row, show_sweep)
            precision = label(row)
            if what_ran(row):
                if _text(row.get("fallback")):
                    footnotes.append(f"{name}, {row['workload']}, {precision}: {row['fallback']}")
                    precision += f" [{len(footnotes)}]"
            accuracy = glance.accuracy
            value = row.get(accuracy.column)
            rows.append([
                Cell(name), Cell(f"{row['workload']} {row['shape']}"), Cell(precision),
                Cell(marked(median_text(row), row)), _speed(row, base), Cell(steady_text(row)),
                *(Cell(format(v, f.spec) if (v := number(row.get(f.column))) is not None else "-")
                  for f in glance.figures),
                _memory(row),
                Cell(accuracy.text(value), "" if number(value) is None else ("better" if accuracy.meets(value)
                                                                            else "worse")),
                _kernel(row),
            ])
    return rows, footnotes


def _costs(row: pd.Series, base: pd.Series | None, accuracy: Accuracy) -> str:
    """What a precision costs and buys against float32, in words."""
    parts = []
    if base is None:
        parts.append("no float32 run of this setting to compare with")
    elif base.name != row.name:
        speed = _speed(row, base)
        parts.append("as fast as float32 (no difference beyond noise)" if speed.tone == "same"
                     else f"{speed.text} than float32" if speed.tone else "")
    compression = number(row.get("compression"))
    if int(row["bits_requested"]) != 32 and compression and compression > 1:
        parts.append(f"{compression:.1f}x less weight memory{_measured(row, base)}")
    parts.append(f"{accuracy.label} {accuracy.text(row.get(accuracy.column))}")
    return ", ".join(p for p in parts if p)


MEASURED_MEMORY = (("gpu_peak_bytes", "GPU peak"), ("wasm_peak_bytes", "wasm peak"),
                   ("webnn_constant_bytes", "WebNN constants"))
"""The measured memory a pick names beside the weights' (web/meter.js), the first the row has."""


def _measured(row: pd.Series, base: pd.Series | None) -> str:
    """' (measured: GPU peak 60 MB against float32's 110 MB)', or '' where either run lacks it."""
    if base is None or base.name == row.name:
        return ""
    for column, what in MEASURED_MEMORY:
        mine, theirs = number(row.get(column)), number(base.get(column))
        if mine and theirs:
            return f" (measured: {what} {fmt_bytes(mine)} against float32's {fmt_bytes(theirs)})"
    return ""


def _fewest_bytes(frame: pd.DataFrame) -> pd.Series:
    """The row with the fewest weight bytes; the faster of equal (or unknown) ones."""
    order = pd.DataFrame({"bytes": pd.to_numeric(frame["weight_bytes"], errors="coerce").fillna(float("inf")),
                          "ms": pd.to_numeric(frame["latency_ms_median"], errors="coerce")}, index=frame.index)
    return frame.loc[order.sort_values(["bytes", "ms"], kind="stable").index[0]]


def picks(summary: pd.DataFrame, glance: Glance = DEFAULT_GLANCE) -> list[Pick]:
    """One pick per setting (see the module's doc for the rule)."""
    out: list[Pick] = []
    if summary.empty:
        return out
    show_sweep = summary["sweep"].nunique() > 1
    accuracy = glance.accuracy
    for setting in _settings(summary):
        first = setting.iloc[0]
        name, workload = setting_name(first, show_sweep), f"{first['workload']} {first['shape']}"
        base = _baseline(setting)
        label = _label(setting)
        timed = setting[pd.to_numeric(setting["latency_ms_median"], errors="coerce") > 0]
        if timed.empty:
            out.append(Pick(name, workload, "none", "no timed run"))
            continue
        measured = timed[[number(v) is not None for v in timed.get(accuracy.column, pd.Series(index=timed.index))]]
        if measured.empty:
            out.append(Pick(name, workload, "none", f"{accuracy.label} was not measured"))
            continue
        within = measured[[accuracy.meets(v) for v in measured[accuracy.column]]]
        if within.empty:
            out.append(Pick(name, workload, "none", f"no precision meets the bar ({accuracy.bar_text})"))
            continue
        fastest = within.loc[pd.to_numeric(within["latency_ms_median"]).idxmin()]
        tied = within[[r.name == fastest.name or bool((c := latency_change(r, fastest)) and c[1])
                       for _, r in within.iterrows()]]
        chosen = _fewest_bytes(tied)
        costs = _costs(chosen, base, accuracy)
        smallest = _fewest_bytes(within)
        if smallest.name != chosen.name and number(smallest.get("weight_bytes")) is not None \
                and number(smallest["weight_bytes"]) < (number(chosen.get("weight_bytes")) or float("inf")):
            costs += f"; fewest weight bytes within the bar: {label(smallest)}, {_costs(smallest, base, accuracy)}"
        out.append(Pick(name, workload, label(chosen), costs, chosen))
    return out


def _kinds(summary: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(summary["kind"])) if "kind" in summary and not summary.empty else []


def _md(text: str) -> str:
    """Text from rows (a browser's reason among it) as literal Markdown: no emphasis, no HTML."""
    for char in ("\\", "`", "*", "_", "<", ">", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text


def glance_markdown(summary: pd.DataFrame, glances: Mapping[str, Glance]) -> str:
    if summary.empty:
        return "No ok runs."
    lines: list[str] = []
    for kind in _kinds(summary):
        glance = glances.get(kind, DEFAULT_GLANCE)
        own = summary[summary["kind"] == kind]
        lines += [f"### {glance.title}", "", f"Which precision to pick ({glance.accuracy.bar_text}):", ""]
        lines += [f"- {_md(p.setting)}, {_md(p.workload)}: **{_md(p.precision)}**: {_md(p.costs)}"
                  for p in picks(own, glance)]
        rows, footnotes = headline_rows(own, glance)
        lines += ["", *markdown_lines(headline_columns(glance), [[c.text for c in r] for r in rows])]
        for i, text in enumerate(footnotes, 1):
            lines += ["", f"[{i}] {_md(text)}"]
        if any_marked(own):
            lines += ["", _md(MARK_NOTE)]
        lines.append("")
    return "\n".join(lines).rstrip()


def _words(text: str) -> str:
    """A headline cell's text with each word unbreakable (a line may break between words, never
    inside one: not even at a hyphen, as in 'bert-base-ffn-gemv'); a no-break space joins what
    must stay on one line ('0.4 s')."""
    words: list[str] = []
    for word in filter(None, re.split(r"[ \t\r\n]+", text)):
        if words and len(words[-1]) == 1 and not words[-1].isalnum():  # '·' stays with the next word
            words[-1] += f" {word}"
        else:
            words.append(word)
    return " ".join(f'<span class="w">{html.escape(word)}</span>' for word in words)


def glance_html(summary: pd.DataFrame, glances: Mapping[str, Glance]) -> str:
    if summary.empty:
        return "<p>No ok runs.</p>"
    e = html.escape
    out: list[str] = []
    for kind in _kinds(summary):
        glance = glances.get(kind, DEFAULT_GLANCE)
        own = summary[summary["kind"] == kind]
        out += [f'<section class="glance" id="glance-{e(kind)}"><h3>{e(glance.title)}</h3>',
                f'<p class="bar">Which precision to pick ({e(glance.accuracy.bar_text)}):</p>',
                '<ul class="picks">']
        out += [f'<li class="pick">{e(p.setting)}, {e(p.workload)}: <b>{e(p.precision)}</b>: {e(p.costs)}</li>'
                for p in picks(own, glance)]
        out.append("</ul>")
        rows, footnotes = headline_rows(own, glance)
        out += ['<div class="scroll"><table class="data headline"><thead><tr>',
                *(f"<th>{_words(c)}</th>" for c in headline_columns(glance)), "</tr></thead><tbody>"]
        for r in rows:
            out.append("<tr>" + "".join(f'<td class="{c.tone}">{_words(c.text)}</td>' if c.tone
                                        else f"<td>{_words(c.text)}</td>" for c in r) + "</tr>")
        out.append("</tbody></table></div>")
        if footnotes:
            out.append('<ol class="footnotes">' + "".join(f"<li>{e(t)}</li>" for t in footnotes) + "</ol>")
        if any_marked(own):
            out.append(f'<p class="note">{e(MARK_NOTE)}</p>')
        out.append("</section>")
    return "\n".join(out)


def glance_notes(summary: pd.DataFrame, glances: Mapping[str, Glance]) -> list[str]:
    """What the first screen's rule is, and each present kind's note (for "How to read this")."""
    notes = [
        "At a glance: per kind of work, the pick for each setting (browser, engine, platform and "
        "workload) is, of the precisions whose accuracy meets the kind's bar, the fastest; of those "
        "as fast as it within noise, the one with the fewest weight bytes. 'vs float32' is against "
        "the fastest float32 run of the same setting: green is better, red is worse, grey is the "
        f"same (the p10-p90 spreads of the two runs overlap, or they differ by less than "
        f"{DEFAULT_MIN_EFFECT:.0%}); the words say the same without colour. The kernel check is the "
        "engine's relative error against the float64 reference on the same (dequantized) weights, "
        "within the row's tolerance."]
    notes += [f"{glances.get(k, DEFAULT_GLANCE).title}: {glances[k].note}" for k in _kinds(summary)
              if k in glances and glances[k].note]
    return notes

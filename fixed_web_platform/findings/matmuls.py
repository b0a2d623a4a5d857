"""Findings: lone matmuls. The default sweep (the harness's WGSL kernels at every width on the
default BERT-base shapes, Chrome and Firefox) as the report's first screen shows it, and the
kernels beside ONNX Runtime Web's WebGPU ``MatMulNBits`` (``benchmarks/kernels.py``, whose table
this module also prints)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..report.glance import latency_change
from ..report.markdown import markdown_lines
from ..report.plots import plot_latency
from ..report.steady import tally_line
from ..series.steady import SteadyClass
from .page import Data, Page, Plot, glance, number, rows_of, summary

DEFAULT_SWEEP = ("default-sweep",)
KERNELS = ("kernels",)
KERNEL_SHAPES = ("1x768x3072", "128x768x768", "1x4096x4096", "128x768x3072")
"""benchmarks/kernels.py's shapes: the default BERT-base ones, a large GEMV and the FFN's GEMM."""

NO_STEADY = SteadyClass.NO_STEADY.value
Key = tuple[str, str, int, str]
"""(browser, shape, bits, engine)"""


def _shape(row: Any) -> str:
    return f"{int(row['m'])}x{int(row['k'])}x{int(row['n'])}"


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _ms(value: Any) -> str:
    return f"{float(value):.1f}" if _known(value) else "-"


@dataclass(frozen=True)
class KernelLine:
    """One browser, shape and bits: the harness's kernel beside ORT's."""

    browser: str
    shape: str
    bits: int
    kernel: str
    harness: str
    """median (p10-p90) ms, or the run's outcome"""
    ort: str
    ort_over_harness: float | None
    """ORT's median / the harness's (above 1: the harness is faster)"""
    low_bit_over_f32: float | None
    """the harness's median / its own float32's (below 1: low-bit is faster)"""
    judged: str
    """'' for a change, else why it is the same (report/glance.latency_change)"""


def kernel_lines(summary: pd.DataFrame, rows: pd.DataFrame | None = None) -> list[KernelLine]:
    """From the report's summary rows (render.summary_table: one per configuration with an ok run)
    and, for configurations without one, the result rows' outcomes."""
    cell: dict[Key, Any] = {}
    outcome: dict[Key, str] = {}
    for _, r in (rows if rows is not None else pd.DataFrame()).iterrows():
        if r["platform"] == "webgpu":
            outcome[(str(r["browser"]), _shape(r), int(r["bits_requested"]), str(r["engine"]))] = str(r["outcome"])
    for _, r in summary.iterrows():
        if r["platform"] == "webgpu":
            cell[(str(r["browser"]), _shape(r), int(r["bits_requested"]), str(r["engine"]))] = r

    def shown(key: Key) -> str:
        r = cell.get(key)
        if r is None:
            return outcome.get(key, "-")
        return f"{_ms(r['latency_ms_median'])} ({_ms(r['latency_ms_p10'])}-{_ms(r['latency_ms_p90'])})"

    def ratio(a: Key, b: Key) -> float | None:
        x, y = cell.get(a), cell.get(b)
        if x is None or y is None or not _known(x["latency_ms_median"]) or not float(y["latency_ms_median"]) > 0:
            return None
        return float(x["latency_ms_median"]) / float(y["latency_ms_median"])

    configs = sorted({k[:3] for k in set(cell) | set(outcome)},
                     key=lambda c: (c[0], KERNEL_SHAPES.index(c[1]) if c[1] in KERNEL_SHAPES else 99, -c[2]))
    lines = []
    for browser, shape, bits in configs:
        ours, ort = (browser, shape, bits, "harness"), (browser, shape, bits, "ort")
        f32 = (browser, shape, 32, "harness")
        change = latency_change(cell[ours], cell[f32]) if bits != 32 and ours in cell and f32 in cell else None
        lines.append(KernelLine(browser, shape, bits, cell[ours]["kernel_variant"] if ours in cell else "",
                                shown(ours), shown(ort), ratio(ort, ours), ratio(ours, f32) if bits != 32 else 1.0,
                                change[1] if change else ""))
    return lines


def _verdict(line: KernelLine) -> str:
    """Low-bit against float32 by the report's rule: why it is the same, or 'faster'/'slower'."""
    return line.judged or ("faster" if (line.low_bit_over_f32 or 1) < 1 else "slower")


def _against_f32(line: KernelLine) -> str:
    if line.bits == 32:
        return "1"
    if line.low_bit_over_f32 is None:
        return "-"
    return f"{line.low_bit_over_f32:.2f} ({_verdict(line)})"


def ratio_table(summary: pd.DataFrame, rows: pd.DataFrame | None = None) -> str:
    """benchmarks/kernels.py's table (markdown): per browser, shape and bits, the kernel that ran,
    both medians, ORT / harness and the harness's low-bit / float32 judged by the report's rule."""
    return lines_table(kernel_lines(summary, rows))


def lines_table(lines: list[KernelLine]) -> str:
    body = [[x.browser, x.shape, str(x.bits), x.kernel, x.harness, x.ort,
             f"{x.ort_over_harness:.2f}" if x.ort_over_harness is not None else "-", _against_f32(x)]
            for x in lines]
    header = ["browser", "shape", "bits", "harness kernel", "harness ms (p10-p90)", "ORT ms (p10-p90)",
              "ORT / harness", "harness low-bit / f32"]
    return "\n".join(markdown_lines(header, body))


def _span(values: list[float]) -> str:
    return f"{number(min(values), 3)}-{number(max(values), 3)}" if len(values) > 1 else number(values[0], 3)


def kernels_say(lines: list[KernelLine]) -> list[str]:
    """Per browser: the harness's low-bit against its own float32 (judged), and ORT against it."""
    out = []
    for browser in dict.fromkeys(x.browser for x in lines):
        own = [x for x in lines if x.browser == browser]
        low = [x for x in own if x.bits != 32 and x.low_bit_over_f32 is not None]
        verdicts = pd.Series([_verdict(x) for x in low]).value_counts()
        if low:
            out.append(f"- **{browser.capitalize()}, the harness's low-bit kernels against its own float32**: "
                       f"{_span([x.low_bit_over_f32 for x in low])}x the float32 median over {len(low)} shape and "
                       "width pairs (" + ", ".join(f"{n} {v}" for v, n in verdicts.items()) + ").")
        for m_is_one, name in ((True, "GEMV (M = 1)"), (False, "GEMM (M = 128)")):
            pair = [x for x in own if x.ort_over_harness is not None and x.shape.startswith("1x") == m_is_one]
            if pair:
                worst = max(pair, key=lambda x: x.ort_over_harness)
                out.append(f"- **{browser.capitalize()}, ONNX Runtime Web's `MatMulNBits` against the harness, "
                           f"{name}**: ORT / harness {_span([x.ort_over_harness for x in pair])} (highest: "
                           f"{worst.bits}-bit {worst.shape}, {worst.ort} ms against {worst.harness}).")
    return out


def without_steady_state(rows: pd.DataFrame) -> str:
    """How many runs had no steady state, and which (browser, shape, bits: runs)."""
    ok = rows[rows["outcome"] == "ok"]
    none = ok[ok["steady_class"] == NO_STEADY]
    if none.empty:
        return f"Every one of the {len(ok)} ok runs had a steady state."
    which = none.assign(shape=none.apply(_shape, axis=1)).groupby(["browser", "shape", "bits_requested"]).size()
    listed = "; ".join(f"{b} {s} {int(bits)}-bit: {n}" for (b, s, bits), n in which.items())
    return (f"Runs without a steady state: {len(none)} of {len(ok)} ({number(100 * len(none) / len(ok), 2)}%): "
            f"{listed}.")


def default_sweep(data: Data) -> list[str]:
    rows = rows_of(data, *DEFAULT_SWEEP)
    return ["## The default sweep", "",
            "What `run_real_webgpu_webnn.py` measures with no options (every repetition a fresh page load), as "
            "the report's first screen shows it: a pick per browser and shape, then the figures behind it.", "",
            tally_line(rows), "", without_steady_state(rows), "", *glance(data, *DEFAULT_SWEEP), ""]


def kernels(data: Data) -> list[str]:
    rows = rows_of(data, *KERNELS)
    lines = kernel_lines(summary(data, *KERNELS), rows)
    return ["## The kernels beside ONNX Runtime Web", "",
            "The harness's WGSL kernels and ORT's WebGPU `MatMulNBits` (block 32, zero points) on the same shapes "
            "and bytes, per browser, shape and bits: the median of the repetitions' medians (GPU timestamps where "
            "the adapter has them) with p10-p90 of all their samples; ORT / harness above 1 means the harness is "
            "faster; low-bit / f32 below 1 means low-bit is faster than the harness's own float32, judged by the "
            "report's rule (\"same\" when the spreads overlap or the medians differ by less than 10%).", "",
            tally_line(rows), "", *kernels_say(lines), "", lines_table(lines), ""]


def body(data: Data) -> list[str]:
    return [*default_sweep(data), *kernels(data)]


PAGE = Page("matmuls", "Lone matmuls: the default sweep and the kernels beside ONNX Runtime Web",
            (*DEFAULT_SWEEP, *KERNELS), body,
            (Plot("default-sweep-latency", "The default sweep: median latency against bits per browser and shape",
                  DEFAULT_SWEEP, plot_latency),
             Plot("kernels-latency", "The kernels beside ORT: median latency against bits per browser, engine, shape",
                  KERNELS, plot_latency)))

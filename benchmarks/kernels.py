"""Kernel benchmark: the harness's WGSL matmul kernels and ONNX Runtime Web's WebGPU
``MatMulNBits`` side by side, in one browser session per browser and repetition, on the shapes
that matter (the default BERT-base shapes plus 1x4096x4096 and 128x768x3072).

    .venv/bin/python benchmarks/kernels.py                       # run, then print the table
    .venv/bin/python benchmarks/kernels.py --from results/<dir>  # the table of an earlier run

Per browser, shape and bits it prints the harness and ORT medians (GPU timestamps where the
adapter has them; the median of the repetitions' medians, each repetition a fresh browser and
page load, with p10-p90 of all their samples), ORT / harness (above 1: the harness is faster) and
the harness's low-bit / float32 ratio (below 1: low-bit is faster than our own float32), judged
by the report's one rule (report/glance.latency_change): "same" when the spreads overlap or the
medians differ by less than compare's minimum effect. A benchmark, not a test: the figures are
this machine's, in this run; compare within the run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.api import run_real_test  # noqa: E402
from fixed_web_platform.paths import RESULTS_ROOT  # noqa: E402
from fixed_web_platform.plan import TimingConfig  # noqa: E402
from fixed_web_platform.report.glance import latency_change  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402
from fixed_web_platform.report.render import load_sweeps, summary_table  # noqa: E402
from fixed_web_platform.results.reader import ResultSchemaError  # noqa: E402

SHAPES = ("1x768x3072", "128x768x768", "1x4096x4096", "128x768x3072")
BITS = (32, 8, 4, 2)
TIMING = TimingConfig(warmup=2, min_iterations=10, min_time_s=0.5)
REPETITIONS = 3
"""Fresh browser sessions per configuration (the page load is the unit of independence)."""


def _shape(row: Any) -> str:
    return f"{int(row['m'])}x{int(row['k'])}x{int(row['n'])}"


def _known(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _ms(value: float | None) -> str:
    return f"{value:.1f}" if _known(value) else "-"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if _known(a) and _known(b) and b > 0 else "-"


def ratio_table(summary: pd.DataFrame, rows: pd.DataFrame | None = None) -> str:
    """Markdown table from the report's summary rows (render.summary_table: one per configuration
    with an ok run) and, for configurations without one, the result rows' outcomes."""
    cell: dict[tuple[str, str, int, str], Any] = {}
    outcome: dict[tuple[str, str, int, str], str] = {}
    for _, r in (rows if rows is not None else pd.DataFrame()).iterrows():
        if r["platform"] == "webgpu":
            outcome[(str(r["browser"]), _shape(r), int(r["bits_requested"]), str(r["engine"]))] = str(r["outcome"])
    for _, r in summary.iterrows():
        if r["platform"] == "webgpu":
            cell[(str(r["browser"]), _shape(r), int(r["bits_requested"]), str(r["engine"]))] = r

    def median(key: tuple[str, str, int, str]) -> float | None:
        r = cell.get(key)
        return None if r is None else float(r["latency_ms_median"])

    def shown(key: tuple[str, str, int, str]) -> str:
        r = cell.get(key)
        if r is None:
            return outcome.get(key, "-")
        return f"{_ms(r['latency_ms_median'])} ({_ms(r['latency_ms_p10'])}-{_ms(r['latency_ms_p90'])})"

    def against_f32(key: tuple[str, str, int, str]) -> str:
        ours, f32 = cell.get(key), cell.get((*key[:2], 32, "harness"))
        if key[2] == 32:
            return "1"
        change = None if ours is None or f32 is None else latency_change(ours, f32)
        if change is None:
            return "-"
        speedup, same = change
        return f"{1 / speedup:.2f} ({same or ('faster' if speedup > 1 else 'slower')})"

    keys = set(cell) | set(outcome)
    configs = sorted({k[:3] for k in keys}, key=lambda c: (c[0], SHAPES.index(c[1]) if c[1] in SHAPES else 99, -c[2]))
    body = []
    for browser, shape, bits in configs:
        ours, ort = (browser, shape, bits, "harness"), (browser, shape, bits, "ort")
        variant = cell[ours]["kernel_variant"] if ours in cell else ""
        body.append([browser, shape, str(bits), variant, shown(ours), shown(ort),
                     _ratio(median(ort), median(ours)), against_f32(ours)])
    header = ["browser", "shape", "bits", "harness kernel", "harness ms (p10-p90)", "ORT ms (p10-p90)",
              "ORT / harness", "harness low-bit / f32"]
    return "\n".join(markdown_lines(header, body))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--browser", nargs="+", default=["chrome", "firefox"])
    ap.add_argument("--bits", nargs="+", type=int, default=list(BITS))
    ap.add_argument("--repetitions", type=int, default=REPETITIONS,
                    help=f"fresh browser sessions per configuration (default {REPETITIONS})")
    ap.add_argument("--output-dir", type=Path, default=None)
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="print the table of an earlier results folder instead of running")
    args = ap.parse_args(argv)
    folder = args.source
    if folder is None:
        folder = args.output_dir or RESULTS_ROOT / time.strftime("%Y%m%dT%H%M%SZ_kernel-benchmark", time.gmtime())
        try:
            asyncio.run(run_real_test(["webgpu"], browser=args.browser, bits=args.bits, engines=["harness", "ort"],
                                      shapes=list(SHAPES), timing=TIMING, repetitions=args.repetitions,
                                      output_dir=folder, progress=True))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        sweeps = load_sweeps([folder])
    except (ResultSchemaError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(ratio_table(summary_table(sweeps.rows, sweeps.samples), sweeps.rows))
    print(f"results: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

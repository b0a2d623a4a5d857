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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.api import run_real_test  # noqa: E402
from fixed_web_platform.findings.matmuls import KERNEL_SHAPES as SHAPES  # noqa: E402
from fixed_web_platform.findings.matmuls import ratio_table  # noqa: E402
from fixed_web_platform.paths import RESULTS_ROOT  # noqa: E402
from fixed_web_platform.report.render import load_sweeps, summary_table  # noqa: E402
from fixed_web_platform.results.reader import ResultSchemaError  # noqa: E402

BITS = (32, 8, 4, 2)
REPETITIONS = 3
"""Fresh browser sessions per configuration (the page load is the unit of independence)."""


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
                                      shapes=list(SHAPES), repetitions=args.repetitions,
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

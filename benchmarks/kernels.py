"""Kernel benchmark: the harness's WGSL matmul kernels and ONNX Runtime Web's WebGPU
``MatMulNBits`` side by side, in one browser session per browser, on the shapes that matter
(the default BERT-base shapes plus 1x4096x4096 and 128x768x3072).

    .venv/bin/python benchmarks/kernels.py                       # run, then print the table
    .venv/bin/python benchmarks/kernels.py --from results/<dir>  # the table of an earlier run

Per browser, shape and bits it prints the harness and ORT medians (GPU timestamps where the
adapter has them), ORT / harness (above 1: the harness is faster) and the harness's low-bit /
float32 ratio (below 1: low-bit is faster than our own float32). A benchmark, not a test: the
figures are this machine's, in this run; compare within the run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.api import run_real_test  # noqa: E402
from fixed_web_platform.plan import TimingConfig  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402

SHAPES = ("1x768x3072", "128x768x768", "1x4096x4096", "128x768x3072")
BITS = (32, 8, 4, 2)
TIMING = TimingConfig(warmup=2, min_iterations=10, min_time_s=0.5)


def _shape(row: Mapping[str, Any]) -> str:
    return f"{int(row['m'])}x{int(row['k'])}x{int(row['n'])}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}"


def ratio_table(rows: Iterable[Mapping[str, Any]]) -> str:
    """Markdown table from result rows (dicts with browser, engine, platform, m, k, n,
    bits_requested, outcome, latency_ms_median); not-ok runs show their outcome."""
    cell: dict[tuple[str, str, int, str], Mapping[str, Any]] = {}
    for r in rows:
        if r["platform"] == "webgpu":
            cell[(str(r["browser"]), _shape(r), int(r["bits_requested"]), str(r["engine"]))] = r

    def median(key: tuple[str, str, int, str]) -> float | None:
        r = cell.get(key)
        v = r.get("latency_ms_median") if r is not None and r["outcome"] == "ok" else None
        return None if v is None or v != v else float(v)

    def shown(key: tuple[str, str, int, str]) -> str:
        r = cell.get(key)
        return "-" if r is None else (_ms(median(key)) if r["outcome"] == "ok" else str(r["outcome"]))

    configs = sorted({k[:3] for k in cell}, key=lambda c: (c[0], SHAPES.index(c[1]) if c[1] in SHAPES else 99, -c[2]))
    body = []
    for browser, shape, bits in configs:
        ours, ort = (browser, shape, bits, "harness"), (browser, shape, bits, "ort")
        f32 = median((browser, shape, 32, "harness"))
        body.append([browser, shape, str(bits), shown(ours), shown(ort), _ratio(median(ort), median(ours)),
                     _ratio(median(ours), f32) if bits != 32 else "1"])
    header = ["browser", "shape", "bits", "harness ms", "ORT ms", "ORT / harness", "harness low-bit / f32"]
    return "\n".join(markdown_lines(header, body))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--browser", nargs="+", default=["chrome", "firefox"])
    ap.add_argument("--bits", nargs="+", type=int, default=list(BITS))
    ap.add_argument("--output-dir", type=Path, default=None)
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="print the table of an earlier results folder instead of running")
    args = ap.parse_args(argv)
    if args.source is not None:
        from fixed_web_platform.results.reader import ResultSchemaError, load

        try:
            rows = load(args.source).rows.to_dict("records")
        except (ResultSchemaError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    else:
        try:
            rows = asyncio.run(run_real_test(["webgpu"], browser=args.browser, bits=args.bits,
                                             engines=["harness", "ort"], shapes=list(SHAPES), timing=TIMING,
                                             output_dir=args.output_dir, progress=True))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    print(ratio_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

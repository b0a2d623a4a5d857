"""Command line: parse and validate everything, build the plan, run it, write results."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from . import capabilities
from .plan import build_plan, parse_shape
from .results import ResultWriter, new_results_dir
from .runner import SweepOptions, run_sweep
from .specs import (
    DEFAULT_BITS,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_WORKLOADS,
    SUPPORTED_BITS,
    BrowserName,
    Outcome,
    Platform,
    PrecisionMode,
    WEBNN_DEVICES,
    TimingConfig,
)

PLATFORMS = {
    "webgpu": [Platform.WEBGPU],
    "webnn": [Platform.WEBNN],
    "both": [Platform.WEBGPU, Platform.WEBNN],
}

DEFAULT_BROWSERS = (BrowserName.CHROME, BrowserName.FIREFOX)


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _browser(text: str) -> BrowserName:
    try:
        return BrowserName(text.lower())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown browser {text!r}; choose from {', '.join(b.value for b in BrowserName)}"
        ) from None


def _bits(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bits {text!r} is not an integer") from None
    if value not in SUPPORTED_BITS:
        raise argparse.ArgumentTypeError(
            f"bits {value} is not supported; choose from {' '.join(map(str, SUPPORTED_BITS))}"
        )
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="run_real_webgpu_webnn.py",
        description="Measure 16/8/4/2-bit matmul in real browsers through WebGPU (and WebNN).",
    )
    p.add_argument("--platform", choices=["webgpu", "webnn", "both"], default="webgpu",
                   help="webgpu (WGSL kernels), webnn (MLGraph), or both side by side")
    p.add_argument("--webnn-device", choices=list(WEBNN_DEVICES), default="cpu",
                   help="MLContext deviceType for WebNN runs (default cpu)")
    p.add_argument("--browser", nargs="+", type=_browser, default=list(DEFAULT_BROWSERS),
                   help="chrome edge firefox safari (default: chrome firefox)")
    p.add_argument("--bits", nargs="+", type=_bits, default=list(DEFAULT_BITS),
                   help="weight precisions: 32 (float32 baseline) 16 8 4 2 (default: all)")
    p.add_argument("--shape", nargs="+", default=[], metavar="MxKxN",
                   help="extra matmul shapes, added to the built-in BERT-base workloads")
    p.add_argument("--only-shapes", action="store_true",
                   help="run only the --shape workloads, not the built-in ones")
    p.add_argument("--block-size", type=_positive, default=DEFAULT_BLOCK_SIZE,
                   help="quantization block along K for 8/4/2-bit weights (default 32)")
    p.add_argument("--repetitions", type=_positive, default=1,
                   help="runs of each configuration (each a fresh page)")
    p.add_argument("--warmup", type=_non_negative, default=TimingConfig.warmup)
    p.add_argument("--iterations", type=_positive, default=TimingConfig.iterations)
    p.add_argument("--timeout", type=float, default=TimingConfig.timeout_s,
                   help="seconds one run may take before it is a timeout (default 120)")
    p.add_argument("--experimental-precision", action="store_true",
                   default=os.environ.get("WEBNN_EXPERIMENTAL_PRECISION") == "1",
                   help="WebNN: try the requested precision, no upgrade (also "
                        "WEBNN_EXPERIMENTAL_PRECISION=1)")
    p.add_argument("--mixed-precision", action="store_true")
    p.add_argument("--model", default=None)
    p.add_argument("--browser-binary", action="append", default=[], metavar="[NAME=]PATH",
                   help="browser binary to use instead of discovery")
    p.add_argument("--driver", action="append", default=[], metavar="[NAME=]PATH",
                   help="WebDriver binary to use instead of discovery")
    p.add_argument("--output-dir", type=Path, default=None,
                   help="write results here exactly (default results/<UTC time>_<label>/)")
    p.add_argument("--label", default="sweep")
    p.add_argument("--seed", type=int, default=0)
    return p


def _overrides(values: Sequence[str], browsers: Sequence[BrowserName], flag: str) -> dict[BrowserName, str]:
    result: dict[BrowserName, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if sep and name.lower() in {b.value for b in BrowserName}:
            result[BrowserName(name.lower())] = path
        elif len(browsers) == 1:
            result[browsers[0]] = value
        else:
            raise UsageError(f"{flag} {value!r}: with several browsers write NAME=PATH")
    for name, path in result.items():
        if not Path(path).is_file():
            raise UsageError(f"{flag} for {name}: no such file {path}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the rows measured so far are on disk", file=sys.stderr)
        return 130


def build_capabilities_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="run_real_webgpu_webnn.py capabilities",
        description="Launch each browser once and write its WebGPU/WebNN capability matrix.",
    )
    p.add_argument("--browser", nargs="+", type=_browser, default=list(BrowserName))
    p.add_argument("--webnn-device", nargs="+", choices=list(WEBNN_DEVICES), default=list(WEBNN_DEVICES))
    p.add_argument("--browser-binary", action="append", default=[], metavar="[NAME=]PATH")
    p.add_argument("--driver", action="append", default=[], metavar="[NAME=]PATH")
    p.add_argument("--output-dir", type=Path, default=None)
    return p


def _capabilities(argv: Sequence[str]) -> int:
    args = build_capabilities_parser().parse_args(argv)
    browsers = list(dict.fromkeys(args.browser))
    devices = list(dict.fromkeys(args.webnn_device))
    entries = asyncio.run(capabilities.collect(
        browsers, devices, _overrides(args.browser_binary, browsers, "--browser-binary"),
        _overrides(args.driver, browsers, "--driver"),
    ))
    out_dir = args.output_dir or new_results_dir("capabilities")
    json_path, md_path = capabilities.write(entries, devices, out_dir)
    print(md_path.read_text())
    print(f"capabilities: {json_path} {md_path}")
    return 1 if any(e["status"] in ("failed", "crash", "timeout") for e in entries) else 0


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["capabilities"]:
        return _capabilities(argv[1:])
    args = build_parser().parse_args(argv)
    if args.mixed_precision:
        raise UsageError("--mixed-precision is not supported yet")
    if args.model is not None:
        raise UsageError("--model is not supported yet; the built-in matmul workloads run without it")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    try:
        extra = [parse_shape(s) for s in args.shape]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.only_shapes and not extra:
        raise UsageError("--only-shapes needs at least one --shape")
    workloads = extra if args.only_shapes else [*DEFAULT_WORKLOADS, *extra]
    browsers = list(dict.fromkeys(args.browser))
    try:
        plan = build_plan(
            browsers,
            PLATFORMS[args.platform],
            workloads,
            args.bits,
            repetitions=args.repetitions,
            block_size=args.block_size,
            precision_mode=PrecisionMode.EXPERIMENTAL if args.experimental_precision else PrecisionMode.STANDARD,
            seed=args.seed,
            webnn_device=args.webnn_device,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    options = SweepOptions(
        timing=TimingConfig(warmup=args.warmup, iterations=args.iterations, timeout_s=args.timeout),
        binaries=_overrides(args.browser_binary, browsers, "--browser-binary"),
        drivers=_overrides(args.driver, browsers, "--driver"),
    )
    out_dir = args.output_dir or new_results_dir(args.label)
    writer = ResultWriter(out_dir)
    print(f"{len(plan)} runs planned; results in {out_dir}", flush=True)
    rows = asyncio.run(run_sweep(plan, writer, options))
    print(format_table(rows))
    print(f"results: {writer.csv_path}")
    return 1 if any(Outcome(r.outcome).is_failure for r in rows) else 0


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(rows: Sequence[object]) -> str:
    header = ("browser", "platform", "shape", "bits", "exec", "outcome", "median ms", "p10-p90 ms",
              "GFLOP/s", "rel err vs float", "kernel err")
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for r in rows:
        lines.append(" | ".join([
            r.browser, r.platform, f"{r.m}x{r.k}x{r.n}", str(r.bits_requested),
            "-" if r.bits_executed is None else str(r.bits_executed), r.outcome,
            _fmt(r.latency_ms_median, ".3f"),
            "-" if r.latency_ms_p10 is None else f"{r.latency_ms_p10:.3f}-{r.latency_ms_p90:.3f}",
            _fmt(r.gflops, ".2f"), _fmt(r.rel_error_vs_float, ".2e"),
            _fmt(r.rel_error_vs_dequantized, ".1e"),
        ]))
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

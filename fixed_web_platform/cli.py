"""Command line: parse and validate everything, build the plan, run it, write results."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import capabilities
from .errors import OneLineArgumentParser, UsageError
from .plan import build_plan, load_plan, parse_shape, save_plan
from .progress import for_terminal
from .results import ResultWriter, new_results_dir
from .runner import SweepOptions, run_sweep
from .specs import (
    DEFAULT_BITS,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_WORKLOADS,
    SUPPORTED_BITS,
    WEBNN_DEVICES,
    BrowserName,
    Outcome,
    Platform,
    PrecisionMode,
    RunSpec,
    TimingConfig,
)

PLATFORMS = {
    "webgpu": [Platform.WEBGPU],
    "webnn": [Platform.WEBNN],
    "both": [Platform.WEBGPU, Platform.WEBNN],
}

DEFAULT_BROWSERS = (BrowserName.CHROME, BrowserName.FIREFOX)


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
    p = OneLineArgumentParser(
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
    p.add_argument("--min-iterations", "--iterations", dest="min_iterations", type=_positive,
                   default=TimingConfig.min_iterations,
                   help="timed iterations per page at least (default 10)")
    p.add_argument("--min-time", type=float, default=TimingConfig.min_time_s,
                   help="seconds of timed iterations per page at least (default 1.0)")
    p.add_argument("--max-iterations", type=_positive, default=None,
                   help="cap on timed iterations per page (default 200 or --min-iterations, at most 2048)")
    p.add_argument("--repeat", type=_positive, default=TimingConfig.repeat,
                   help="page loads per run, samples pooled (default 1)")
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
    p.add_argument("--resume", type=Path, default=None, metavar="DIR",
                   help="continue an interrupted sweep in DIR, skipping runs already on disk "
                        "(its plan.json decides what runs)")
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
    p = OneLineArgumentParser(
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


SUBCOMMANDS = ("capabilities", "report", "compare")


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["capabilities"]:
        return _capabilities(argv[1:])
    if argv[:1] == ["report"]:
        from .report import report_command

        return report_command(argv[1:])
    if argv[:1] == ["compare"]:
        from .compare import compare_command

        return compare_command(argv[1:])
    args = build_parser().parse_args(argv)
    if args.mixed_precision:
        raise UsageError("--mixed-precision is not supported yet")
    if args.model is not None:
        raise UsageError("--model is not supported yet; the built-in matmul workloads run without it")
    if args.resume is not None:
        try:
            plan, timing = load_plan(args.resume)
        except (ValueError, OSError) as exc:
            raise UsageError(str(exc)) from None
    else:
        plan, timing = _plan_from_args(args)
    browsers = list(dict.fromkeys(r.browser for r in plan))
    binaries = _overrides(args.browser_binary, browsers, "--browser-binary")
    drivers = _overrides(args.driver, browsers, "--driver")
    if args.resume is not None:
        plan, writer = _resume(args.resume, plan)
    else:
        if args.output_dir is not None and (args.output_dir / "results.csv").exists():
            raise UsageError(f"--output-dir {args.output_dir} already holds a sweep; "
                             "use --resume to continue it, or choose another folder")
        writer = ResultWriter(args.output_dir or new_results_dir(args.label))
        save_plan(writer.directory, plan, timing)
        print(f"{len(plan)} runs planned; results in {writer.directory}", flush=True)
    progress = for_terminal(len(plan))
    options = SweepOptions(timing=timing, binaries=binaries, drivers=drivers, progress=progress)
    try:
        rows = asyncio.run(run_sweep(plan, writer, options))
    finally:
        progress.close()
    print(format_table(rows))
    print(f"results: {writer.csv_path}")
    return 1 if any(Outcome(r.outcome).is_failure for r in rows) else 0


def _resume(directory: Path, plan: list[RunSpec]) -> tuple[list[RunSpec], ResultWriter]:
    try:
        writer = ResultWriter(directory, resume=True)
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    done = writer.done_run_ids()
    remaining = [r for r in plan if r.run_id not in done]
    print(f"resuming {directory}: {len(plan) - len(remaining)} of {len(plan)} runs already on disk, "
          f"{len(remaining)} to go", flush=True)
    return remaining, writer


def _plan_from_args(args: argparse.Namespace) -> tuple[list[RunSpec], TimingConfig]:
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if not math.isfinite(args.min_time) or args.min_time < 0:
        raise UsageError(f"--min-time must be a non-negative number of seconds, got {args.min_time}")
    try:
        extra = [parse_shape(s) for s in args.shape]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.only_shapes and not extra:
        raise UsageError("--only-shapes needs at least one --shape")
    workloads = extra if args.only_shapes else [*DEFAULT_WORKLOADS, *extra]
    try:
        plan = build_plan(
            list(dict.fromkeys(args.browser)),
            PLATFORMS[args.platform],
            workloads,
            args.bits,
            repetitions=args.repetitions,
            block_size=args.block_size,
            precision_mode=PrecisionMode.EXPERIMENTAL if args.experimental_precision else PrecisionMode.STANDARD,
            seed=args.seed,
            webnn_device=args.webnn_device,
        )
        timing = TimingConfig(
            warmup=args.warmup, min_iterations=args.min_iterations, min_time_s=args.min_time,
            max_iterations=args.max_iterations or max(TimingConfig.max_iterations, args.min_iterations),
            repeat=args.repeat, timeout_s=args.timeout,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return plan, timing


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

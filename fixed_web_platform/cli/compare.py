"""`compare BASELINE CURRENT` or `compare OLDEST ... NEWER CURRENT` (folders of sweeps expand to
the sweeps inside them) `[--alpha 0.001] [--min-effect 0.10] [--force] [--output FILE.md]`: the
comparison's table, and exit 0 (no regression), 1 (regression) or 2 (bad input). With more than
two sweeps the newest is judged against the history of the earlier ones (analysis/history.py), and
--output also writes the history's plots and page beside the table (report/history.py)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..analysis.compare import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    MIN_PAGES,
    Comparison,
    Entry,
    MetadataMismatch,
    compare,
    pct,
)
from ..analysis.history import MAX_HISTORY, add_to_history, expand_sweeps, history_compare, matching_history
from ..errors import OneLineArgumentParser, UsageError
from ..report.history import draw_history_plots, format_history
from ..report.markdown import cell, markdown_lines
from ..results.reader import ResultSchemaError, ResultSet, load


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(e: Entry) -> str:
    i = e.interval
    if i is None or not (math.isfinite(i.low) and math.isfinite(i.high)):
        return "-"
    return f"{pct(i.low - 1)} to {pct(i.high - 1)}"


def summary_line(c: Comparison) -> str:
    counts = ", ".join(f"{n} {v.value}" for v, n in c.counts.items()) or "no configurations"
    status = "REGRESSION" if c.has_regression else "no regression"
    return (f"**Summary:** {counts} — {status} "
            f"(repetitions or page loads as the units: {1 - c.alpha:.1%} Welch interval of the "
            f"ratio from their medians, at least {MIN_PAGES} units a side, min effect {c.min_effect:.0%})")


def format_comparison(c: Comparison) -> str:
    lines = []
    if c.baseline_dir or c.current_dir:
        lines += [f"Baseline `{c.baseline_dir}` vs current `{c.current_dir}`", ""]
    if c.metadata_differences:
        lines += ["> **Warning:** compared despite differing set-ups (--force): "
                  + cell("; ".join(c.metadata_differences)), ""]
    if c.version_changes:
        lines += ["Versions changed between the sides (a known change point: each entry's verdict is "
                  "attributed to its change): " + cell("; ".join(c.version_changes)), ""]
    head = ["browser", "engine", "platform", "mode", "workload", "shape", "bits", "verdict", "baseline ms",
            "current ms", "change", f"{1 - c.alpha:.1%} interval", "units (base/cur)",
            "samples (base/cur)", "note"]
    body = []
    for e in c.entries:
        cfg = e.config_dict
        mode = cfg["precision_mode"] + (f"/{cfg['device_type']}" if cfg["device_type"] else "")
        bits = f"{cfg['bits_requested']}" + (f" (block {cfg['block_size']})" if cfg["block_size"] else "")
        if str(cfg.get("act_bits")) == "8":
            bits += f" a8 {cfg['observer']}"
        if cfg.get("format_requested"):  # a named format (transformers.js's dtypes, GGUF types) tells runs apart
            bits += f" {cfg['format_requested']}"
        change = "-" if e.effect is None or math.isnan(e.effect) else pct(e.effect)
        body.append([cfg["browser"], cfg["engine"], cfg["platform"], mode, cfg["workload"],
                 e.shape, bits, e.verdict.value,
                 _ms(e.baseline_median), _ms(e.current_median), change, _interval(e),
                 f"{e.pages_baseline}/{e.pages_current}", f"{e.n_baseline}/{e.n_current}",
                 e.note or "-"])
    lines += markdown_lines(head, body)
    lines += ["", summary_line(c)]
    return "\n".join(lines) + "\n"


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="run_real_webgpu_webnn.py compare",
        description="Compare result folders; exit 1 when the newest regressed (against BASELINE, or "
                    "against the history of every earlier sweep given).",
    )
    p.add_argument("sweeps", metavar="SWEEP", type=Path, nargs="+",
                   help="results folders, oldest first; the last is judged. Two: BASELINE CURRENT. More: "
                        "the newest against the history of the earlier ones (a folder of sweeps stands "
                        "for the sweeps inside it, oldest first)")
    p.add_argument("--alpha", type=_float, default=DEFAULT_ALPHA,
                   help="a change is called when the central 1-ALPHA interval of the median ratio "
                        f"excludes 1 (default {DEFAULT_ALPHA}, a 99.9%% interval)")
    p.add_argument("--min-effect", type=_float, default=DEFAULT_MIN_EFFECT,
                   help="smallest relative change of the median latency that counts "
                        f"(default {DEFAULT_MIN_EFFECT}, i.e. {DEFAULT_MIN_EFFECT * 100:g}%%)")
    p.add_argument("--force", action="store_true",
                   help="compare even when the machine (or grid node) differs; browser and engine "
                        "version changes are compared without it, each verdict attributed to its change")
    p.add_argument("--output", type=Path, default=None, metavar="FILE.md",
                   help="also write the Markdown table to this file")
    return p


def _load(path: Path, side: str) -> ResultSet:
    if not path.exists():
        raise UsageError(f"{side} {path}: no such folder")
    if not path.is_dir():
        raise UsageError(f"{side} {path}: not a folder")
    try:
        return load(path)
    except ResultSchemaError as exc:
        raise UsageError(str(exc)) from None
    except (OSError, ValueError) as exc:  # corrupt JSON/CSV (JSONDecodeError, pandas errors)
        raise UsageError(f"{side} {path}: unreadable results: {' '.join(str(exc).split())}") from None


def _compare_command(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    paths = expand_sweeps(args.sweeps)
    seen: dict[Path, Path] = {}
    for p in paths:
        if p.resolve() in seen:
            raise UsageError(f"{p}: the same sweep given twice (a folder of sweeps stands for the sweeps in it)")
        seen[p.resolve()] = p
    if len(paths) < 2:
        raise UsageError(f"give at least two results folders (baseline and current); got {len(paths)}")
    if len(paths) > 2:
        return _judge_history([_load(p, "sweep") for p in paths], args)
    return _judge_pair(_load(paths[0], "baseline"), _load(paths[1], "current"), args)


def _judge_pair(baseline: ResultSet, current: ResultSet, args: argparse.Namespace) -> int:
    try:
        comparison = compare(baseline, current, alpha=args.alpha, min_effect=args.min_effect,
                             force=args.force)
    except MetadataMismatch as exc:
        raise UsageError(f"{exc}; use --force to compare anyway") from None
    except (ResultSchemaError, ValueError) as exc:  # bad --alpha / --min-effect too
        raise UsageError(str(exc)) from None
    text = format_comparison(comparison)
    _write(args.output, text)
    print(text, end="")
    return 1 if comparison.has_regression else 0


def _write(output: Path | None, text: str) -> None:
    if output is None:
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    except OSError as exc:
        raise UsageError(f"--output {output}: {exc.strerror or exc}") from None


def _judge_history(sets: list[ResultSet], args: argparse.Namespace) -> int:
    try:
        judged = history_compare(sets, alpha=args.alpha, min_effect=args.min_effect, force=args.force)
    except MetadataMismatch as exc:
        raise UsageError(f"{exc}; use --force to compare anyway") from None
    except (ResultSchemaError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    plots: list[str] = []
    if args.output is not None:
        try:
            plots = draw_history_plots(judged, args.output.parent / f"{args.output.stem}-plots")
        except OSError as exc:
            raise UsageError(f"--output {args.output}: {exc.strerror or exc}") from None
        plots = [str(Path(p).relative_to(args.output.parent)) for p in plots]
    text = format_history(judged, plots)
    _write(args.output, text)
    print(text, end="")
    return 1 if judged.has_regression else 0


def _one_line_errors(command: Callable[[Sequence[str]], int], argv: Sequence[str] | None) -> int:
    """Run a subcommand: bad input is one error line and exit 2."""
    try:
        return command(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0


def compare_command(argv: Sequence[str] | None = None) -> int:
    """`compare BASELINE CURRENT ...`: 0 no regression, 1 regression, 2 bad input (one error line)."""
    return _one_line_errors(_compare_command, argv)



def build_history_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="run_real_webgpu_webnn.py history",
        description="Add a sweep to a history folder (the nightly's), keep the newest --keep, and judge "
                    "the sweep against the earlier ones; exit 1 on a regression.",
    )
    p.add_argument("history", metavar="HISTORY_DIR", type=Path, help="folder of earlier sweeps (made if absent)")
    p.add_argument("sweep", metavar="SWEEP", type=Path, help="the results folder to add and judge")
    p.add_argument("--keep", type=int, default=MAX_HISTORY + 1,
                   help=f"sweeps the history keeps, the newest (default {MAX_HISTORY + 1})")
    for action in build_parser()._actions:
        if action.option_strings and action.dest not in ("help",):
            p._add_action(action)
    return p


def _history_main(argv: Sequence[str]) -> int:
    args = build_history_parser().parse_args(list(argv))
    sweep = _load(args.sweep, "sweep")
    if args.history.exists() and not args.history.is_dir():
        raise UsageError(f"history {args.history}: not a folder")
    try:
        added = add_to_history(args.history, sweep, args.keep)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"history {args.history}: {exc.strerror or exc}") from None
    paths = expand_sweeps([args.history])
    print(f"history: {added} added; {len(paths)} sweep(s) in {args.history}")
    if len(paths) < 2:
        print("history: the first sweep of this history; nothing to judge it against yet")
        return 0
    sets = [_load(p, "sweep") for p in paths]
    kept, left = matching_history(sets, args.force)
    if len(kept) < 2:  # a new browser version or machine: tonight starts that set-up's history
        print(f"history: no earlier sweep has this one's set-up ({len(left)} left out: {left[-1]}); "
              "it starts a new history")
        return 0
    return _judge_pair(*kept, args) if len(kept) == 2 else _judge_history(kept, args)


def history_command(argv: Sequence[str] | None = None) -> int:
    """`history HISTORY_DIR SWEEP ...`: 0 no regression, 1 regression, 2 bad input (one error line)."""
    return _one_line_errors(_history_main, argv)

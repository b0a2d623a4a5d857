"""`report DIR [DIR ...] [--output-dir OUT]`: tables and plots from results folders."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import OneLineArgumentParser, UsageError, first_line
from ..report.render import load_sweeps, write_report
from ..results.reader import ResultSchemaError


def _history(folder: Path):  # noqa: ANN202 - a HistoryComparison
    from ..analysis.compare import MetadataMismatch
    from ..analysis.history import expand_sweeps, history_compare
    from ..results.reader import load

    if not folder.is_dir():
        raise UsageError(f"--history {folder}: no such folder")
    paths = expand_sweeps([folder])
    if len(paths) < 2:
        print(f"report: --history {folder} holds {len(paths)} sweep(s): nothing to judge yet, no History section")
        return None
    try:
        return history_compare([load(p) for p in paths])
    except MetadataMismatch as exc:  # a new browser version or machine: its history starts tonight
        print(f"report: --history {folder}: {first_line(exc)}; no History section")
        return None


def leave_report(directories: list[Path]) -> Path | None:
    """What a sweep leaves besides its results: report.md, report.html and the plots in
    ``<first folder>/report``; prints the page's path as the command's last line. A report that
    cannot be written costs the report, not the sweep: one warning line, None."""
    out_dir = directories[0] / "report"
    try:
        files = write_report(load_sweeps(directories), out_dir)
    except (ResultSchemaError, OSError, ValueError, KeyError) as exc:
        print(f"warning: no report: {first_line(exc)}; the results are on disk "
              f"(run_real_webgpu_webnn.py report {directories[0]})", file=sys.stderr)
        return None
    print(f"plots: {len(files.plots)} in {out_dir / 'plots'}")
    print(f"report: {files.html}")
    return files.html


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(
        prog="run_real_webgpu_webnn.py report",
        description="Summary tables (Markdown, HTML) and plots from one or more results folders.",
    )
    parser.add_argument("results", nargs="+", type=Path, metavar="RESULTS_DIR",
                        help="results folder(s) written by a sweep")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where to write the report (default: <first results folder>/report)")
    parser.add_argument("--history", type=Path, nargs="+", default=[], metavar="HISTORY_DIR",
                        help="a folder of sweeps, oldest first (the nightly's history): its newest judged "
                             "against the earlier ones in a History section with one plot per configuration")
    parser.add_argument("--screenshot", action="store_true",
                        help="open report.html in headless Chromium at 1280 and 390 px, check it (no "
                             "sideways scrolling, every plot loaded, no headline cell breaking a word) "
                             "and save screenshot.png, screenshot-390px.png and one PNG per "
                             "at-a-glance section")
    return parser


def report_command(argv: list[str]) -> int:
    """`report DIR [DIR ...] [--output-dir OUT]`: 0 on success, 2 (one error line) on bad input."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        sweeps = load_sweeps(args.results)
    except (ResultSchemaError, OSError, ValueError, KeyError) as exc:
        print(f"error: {first_line(exc)}", file=sys.stderr)
        return 2
    try:
        histories = [h for h in map(_history, args.history) if h is not None]
    except (UsageError, ResultSchemaError, OSError, ValueError, KeyError) as exc:
        print(f"error: {first_line(exc)}", file=sys.stderr)
        return 2
    out_dir = args.output_dir if args.output_dir is not None else args.results[0] / "report"
    try:
        files = write_report(sweeps, out_dir, histories)
    except OSError as exc:
        print(f"error: cannot write the report to {out_dir}: {first_line(exc)}", file=sys.stderr)
        return 2
    print(f"report: {files.markdown}")
    print(f"report: {files.html}")
    print(f"plots: {len(files.plots)} in {out_dir / 'plots'}")
    if not args.screenshot:
        return 0
    from ..report.screenshot import PHONE_WIDTH, WIDTH, view_report

    try:
        views = view_report(files.html, out_dir / "screenshot.png", widths=(WIDTH, PHONE_WIDTH), sections=True)
    except Exception as exc:  # noqa: BLE001 - no browser here: the report itself is written
        print(f"error: cannot open the report in a browser: {first_line(exc)}", file=sys.stderr)
        return 1
    problems = [problem for view in views for problem in view.problems()]
    for view in views:
        print(f"screenshot: {view.screenshot} ({view.width} px, {view.headline_rows} headline rows, "
              f"{len(view.picks)} picks)")
        for shot in view.section_shots:
            print(f"screenshot: {shot}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0

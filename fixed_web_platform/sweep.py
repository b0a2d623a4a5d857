"""Starting, resuming and running a sweep: the one path the CLI and the Python API share.

A new sweep gets its folder and its plan.json before any browser starts; a resumed sweep reads
its plan back and runs only what has no row on disk yet.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from .harness.runner import SweepOptions, run_sweep
from .plan import load_plan, save_plan
from .results.rows import ResultRow
from .results.writer import ResultWriter, new_results_dir
from .run_spec import RunSpec, TimingConfig
from .vocabulary import Outcome


class OutputDirError(ValueError):
    """The folder asked to hold a sweep's results cannot: ``{folder}: {why}``, which the CLI and
    the API prefix with the option's name."""


def _check_output_dir(folder: Path) -> None:
    """OutputDirError when ``folder`` cannot be a new sweep's results folder, found without
    writing anything: a file, an earlier sweep's folder, or a place this user cannot write.
    (What only creating it reveals, a read-only or pseudo file system, ``start`` says the same way,
    before it writes anything else.)"""
    if folder.exists():
        if not folder.is_dir():
            raise OutputDirError(f"{folder}: is a file, not a folder")
        if (folder / "results.csv").exists():
            raise OutputDirError(f"{folder}: already holds a sweep; resume it (--resume), or choose another folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputDirError(f"{folder}: is not writable")
        return
    parent = folder.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputDirError(f"{folder}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputDirError(f"{folder}: cannot create it, {parent} is not writable")


def start(plan: Sequence[RunSpec], timing: TimingConfig, *, output_dir: Path | None = None,
          label: str = "sweep") -> ResultWriter:
    """A fresh results folder (never an earlier sweep's) with the plan saved in it."""
    if output_dir is not None:
        _check_output_dir(output_dir)
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputDirError(f"{output_dir}: cannot create it ({exc.strerror or exc})") from None
    writer = ResultWriter(output_dir or new_results_dir(label))
    save_plan(writer.directory, plan, timing)
    writer.record_timing(dataclasses.asdict(timing))
    return writer


RETRIABLE = frozenset({Outcome.CRASH, Outcome.TIMEOUT, Outcome.ERROR})
"""Infrastructure failures (the browser died or hung, or our own bug) that --retry-failed runs
again; a browser's own 'failed', 'unsupported' or 'invalid' answer is not retried."""


def resume(directory: Path, *, retry_failed: bool = False,
           ) -> tuple[list[RunSpec], list[RunSpec], TimingConfig, ResultWriter]:
    """(whole plan, runs still to do, timing, writer appending to the folder's files). With
    ``retry_failed`` the rows of infrastructure failures are removed and run again."""
    plan, timing = load_plan(directory)
    writer = ResultWriter(directory, resume=True)
    if retry_failed:
        writer.drop_runs({rid for rid, outcome in writer.outcomes().items() if outcome in RETRIABLE})
    done = writer.done_run_ids()
    return plan, [r for r in plan if r.run_id not in done], timing, writer


async def execute(plan: Sequence[RunSpec], writer: ResultWriter,
                  options: SweepOptions = SweepOptions()) -> list[ResultRow]:
    """Run the plan; the folder is released for a later --resume however the sweep ends."""
    try:
        return await run_sweep(plan, writer, options)
    finally:
        writer.close()

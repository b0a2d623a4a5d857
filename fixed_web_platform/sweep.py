"""Starting, resuming and running a sweep: the one path the CLI and the Python API share.

A new sweep gets its folder and its plan.json before any browser starts; a resumed sweep reads
its plan back and runs only what has no row on disk yet.
"""

from __future__ import annotations

import dataclasses

from collections.abc import Sequence
from pathlib import Path

from .harness.runner import SweepOptions, run_sweep
from .plan import load_plan, save_plan
from .results.rows import ResultRow
from .results.writer import ResultWriter, new_results_dir
from .run_spec import RunSpec, TimingConfig
from .vocabulary import Outcome


def start(plan: Sequence[RunSpec], timing: TimingConfig, *, output_dir: Path | None = None,
          label: str = "sweep") -> ResultWriter:
    """A fresh results folder (never an earlier sweep's) with the plan saved in it."""
    if output_dir is not None and (output_dir / "results.csv").exists():
        raise ValueError(f"output folder {output_dir} already holds a sweep; resume it, or choose "
                         "another folder")
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

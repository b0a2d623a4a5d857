"""Sweep progress: a bar (runs done/planned, current run, elapsed/ETA) on a terminal, plain
lines otherwise (CI logs)."""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

from tqdm import tqdm

from .precision.quantizers import DEFAULT_QUANTIZER
from .results.rows import ResultRow
from .run_spec import RunSpec


def describe(run: RunSpec) -> str:
    fmt = f" {run.weight_format}" if run.weight_format else ""
    fmt += f" {run.weight_quant}" if run.weight_quant != DEFAULT_QUANTIZER else ""
    fmt += f" cache:{run.buffer_cache}" if run.buffer_cache else ""
    return f"{run.browser_key} {run.engine_key}/{run.platform} {run.bits}-bit{fmt} {run.workload.label}"


def result_line(index: int, total: int, run: RunSpec, row: ResultRow) -> str:
    median = f"{row.latency_ms_median:.3f} ms" if row.latency_ms_median is not None else "-"
    executed = (
        f" (ran {row.bits_executed}-bit)"
        if row.bits_executed is not None and row.bits_executed != row.bits_requested else ""
    )
    reason = f" ({row.reason})" if row.reason else ""
    return f"[{index}/{total}] {describe(run)}{executed}: {row.outcome} {median}{reason}"


class Progress(Protocol):
    def started(self, run: RunSpec, index: int, total: int) -> None: ...
    def finished(self, run: RunSpec, row: ResultRow, index: int, total: int) -> None: ...
    def close(self) -> None: ...


class PlainProgress:
    """One line per finished run."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def started(self, run: RunSpec, index: int, total: int) -> None:
        pass

    def finished(self, run: RunSpec, row: ResultRow, index: int, total: int) -> None:
        print(result_line(index, total, run, row), file=self.stream or sys.stdout, flush=True)

    def close(self) -> None:
        pass


class BarProgress:
    """A tqdm bar naming the run in progress; finished runs are printed above it."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.bar = tqdm(total=total, unit="run", file=self.stream, dynamic_ncols=True)

    def started(self, run: RunSpec, index: int, total: int) -> None:
        self.bar.set_description_str(describe(run))

    def finished(self, run: RunSpec, row: ResultRow, index: int, total: int) -> None:
        self.bar.write(result_line(index, total, run, row), file=self.stream)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def for_terminal(total: int) -> Progress:
    return BarProgress(total) if sys.stderr.isatty() else PlainProgress()

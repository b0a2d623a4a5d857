"""Where result rows go: results.csv (one row per run, written as each run ends),
samples.jsonl (raw samples) and environment.json, under results/<UTC timestamp>_<label>/."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import math
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from ..paths import RESULTS_ROOT
from ..vocabulary import SCHEMA_VERSION
from .rows import ResultRow, utc_now


def _drop_torn_last_line(path: Path) -> None:
    """An interrupted write can leave half a line at the end; appending after it would corrupt
    the next row, so cut the file back to its last complete line."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def new_results_dir(label: str, root: Path = RESULTS_ROOT) -> Path:
    """Create and return a fresh folder that is never an earlier run's (a suffix is added on a clash)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in label) or "sweep"
    root.mkdir(parents=True, exist_ok=True)
    for suffix in range(1, 1000):
        path = root / (f"{stamp}_{safe}" if suffix == 1 else f"{stamp}_{safe}-{suffix}")
        try:
            path.mkdir()  # atomic: two sweeps started in the same second get different folders
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not create a results folder under {root}")


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def json_safe(value: Any) -> Any:
    """JSON without NaN/Infinity tokens, so every JSON reader can load the files."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class ResultWriter:
    """Appends each row to disk as soon as its run ends, so an interrupted sweep keeps its rows."""

    def __init__(self, directory: Path, *, resume: bool = False) -> None:
        """A new folder's files are started afresh; ``resume`` appends to an interrupted sweep's."""
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.csv_path = directory / "results.csv"
        self.samples_path = directory / "samples.jsonl"
        self.environment_path = directory / "environment.json"
        self.log_path = directory / "harness.log"
        """Tracebacks of the harness's own errors (rows with outcome ``error``)."""
        self.rows: list[ResultRow] = []
        if resume and self.csv_path.is_file():
            for path in (self.csv_path, self.samples_path):
                _drop_torn_last_line(path)
            with self.csv_path.open(newline="") as f:
                header = next(csv.reader(f), [])
            if header != ResultRow.columns():
                raise ValueError(f"{self.csv_path} was written by another version (its columns differ); "
                                 "start a new sweep instead of resuming")
            self.environment = json.loads(self.environment_path.read_text())
            self.environment.setdefault("resumed_utc", []).append(utc_now())
        else:
            with self.csv_path.open("w", newline="") as f:
                csv.writer(f).writerow(ResultRow.columns())
            self.samples_path.write_text("")
            self.environment = {
                "schema_version": SCHEMA_VERSION,
                "created_utc": utc_now(),
                "machine": machine_info(),
                "browsers": {},
            }
        self.write_environment()

    def done_run_ids(self) -> set[int]:
        """Runs that already have a row on disk (whatever their outcome)."""
        with self.csv_path.open(newline="") as f:
            return {int(r["run_id"]) for r in csv.DictReader(f) if r.get("run_id", "").isdigit()}

    def add(self, row: ResultRow, samples: dict[str, Any] | None = None) -> None:
        self.rows.append(row)
        with self.csv_path.open("a", newline="") as f:
            csv.writer(f).writerow([_csv_value(v) for v in dataclasses.astuple(row)])
        if samples is not None:
            line = {"schema_version": SCHEMA_VERSION, "run_id": row.run_id, **samples}
            with self.samples_path.open("a") as f:
                f.write(json.dumps(json_safe(line)) + "\n")

    def log_harness_error(self, what: str, traceback_text: str) -> None:
        with self.log_path.open("a") as f:
            f.write(f"--- {utc_now()} {what}\n{traceback_text.rstrip()}\n")

    def record_browser(self, name: str, info: dict[str, Any]) -> None:
        self.environment["browsers"].setdefault(name, {}).update(info)
        self.write_environment()

    def write_environment(self) -> None:
        self.environment_path.write_text(json.dumps(json_safe(self.environment), indent=2) + "\n")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def machine_info() -> dict[str, Any]:
    uname = platform.uname()
    return {
        "system": uname.system,
        "release": uname.release,
        "machine": uname.machine,
        "processor": uname.processor,
        "cpu_count": psutil.cpu_count(logical=True),
        "memory_bytes": psutil.virtual_memory().total,
        "python": sys.version.split()[0],
        "packages": {d: _version(d) for d in ("selenium", "aiohttp", "numpy", "marionette-driver", "onnx",
                                            "onnxruntime")},
    }

"""Where result rows go: results.csv (one row per run, written as each run ends),
samples.jsonl (raw samples) and environment.json, under results/<UTC timestamp>_<label>/."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as dt
import io
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from ..files import replacing
from ..paths import PROJECT_ROOT, RESULTS_ROOT
from ..vocabulary import SCHEMA_VERSION
from ..workloads.base import SavedOutputs
from .rows import LayerRow, ResultRow, utc_now


class ResultsWriteError(OSError):
    """The results folder stopped taking writes (full disk, read-only): the sweep must end, and
    this is neither the browser's failure nor a bug in the harness."""


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    try:
        yield
    except ResultsWriteError:
        raise
    except OSError as exc:
        raise ResultsWriteError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` whole or not at all (a full disk never leaves half a file)."""
    with _writing(path), replacing(path) as partial:
        partial.write_text(text)


LOCK_FILE = ".lock"


def _take_lock(directory: Path) -> None:
    """One writing sweep per folder: the lock names the writing process; a live other process
    holding it is refused (a --resume of a sweep still running would duplicate rows), a dead
    one's lock is taken over."""
    lock = directory / LOCK_FILE
    try:
        holder = int(lock.read_text().strip())
    except (OSError, ValueError):
        holder = None
    if holder is not None and holder != os.getpid() and psutil.pid_exists(holder):
        raise ValueError(f"{directory} is being written by another sweep (process {holder}); "
                         "wait for it to end, or choose another folder")
    write_atomically(lock, f"{os.getpid()}\n")


def _complete_records(path: Path, columns: list[str]) -> list[list[str]]:
    """The CSV's records an interrupted write left whole: parsed with the csv module (a quoted
    field may hold line breaks), a last record without its line end dropped."""
    with path.open(newline="") as f:
        text = f.read()
    records = list(csv.reader(io.StringIO(text, newline="")))
    if records and not text.endswith(("\n", "\r")):
        records.pop()  # torn mid-record
    return [r for r in records[1:] if len(r) == len(columns)]


def _sample_lines(path: Path) -> dict[int, str]:
    """run_id -> its samples line; a torn or unreadable line is dropped."""
    lines: dict[int, str] = {}
    if not path.is_file():
        return lines
    for line in path.read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            continue
        try:
            lines[int(json.loads(line)["run_id"])] = line
        except (ValueError, KeyError, TypeError):
            continue
    return lines


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
    """One CSV cell; text is kept on one line (a page's multi-line error stays whole in the
    samples line)."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, str):
        return " ".join(value.split())
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
        self.layers_path = directory / "layers.csv"
        """Whole models: one line per linear layer of each run (written before the run's row)."""
        self.outputs_dir = directory / "outputs"
        """Whole models: outputs/<run_id>.npz, the run's embeddings with the token ids used."""
        self.log_path = directory / "harness.log"
        """Tracebacks of the harness's own errors (rows with outcome ``error``)."""
        self.rows: list[ResultRow] = []
        _take_lock(directory)
        if resume and self.csv_path.is_file():
            with self.csv_path.open(newline="") as f:
                header = next(csv.reader(f), [])
            if header != ResultRow.columns():
                raise ValueError(f"{self.csv_path} was written by another version (its columns differ); "
                                 "start a new sweep instead of resuming")
            self.environment = json.loads(self.environment_path.read_text())
            self.environment.setdefault("resumed_utc", []).append(utc_now())
            self.environment.setdefault("resumed_provenance", []).append(provenance())
            self.drop_runs(set())  # repair what an interruption tore
        else:
            write_atomically(self.csv_path, _csv_text([ResultRow.columns()]))
            write_atomically(self.samples_path, "")
            write_atomically(self.layers_path, _csv_text([LayerRow.columns()]))
            self.environment = {
                "schema_version": SCHEMA_VERSION,
                "created_utc": utc_now(),
                "provenance": provenance(),
                "machine": machine_info(),
                "browsers": {},
            }
        self.write_environment()

    def close(self) -> None:
        """Release the folder (its lock) for a later --resume; the files stay as they are."""
        lock = self.directory / LOCK_FILE
        try:
            if int(lock.read_text().strip()) == os.getpid():
                lock.unlink()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop_runs(self, run_ids: set[int]) -> None:
        """Rewrite both files without these runs, and without anything torn: a row stays only
        with its samples line, a samples line only with its row."""
        columns = ResultRow.columns()
        records = _complete_records(self.csv_path, columns)
        samples = _sample_lines(self.samples_path)
        at = columns.index("run_id")
        keep = [r for r in records if r[at].isdigit() and int(r[at]) not in run_ids and int(r[at]) in samples]
        kept_ids = {int(r[at]) for r in keep}
        write_atomically(self.samples_path, "".join(line for rid, line in samples.items() if rid in kept_ids))
        write_atomically(self.csv_path, _csv_text([columns, *keep]))
        if self.layers_path.is_file():
            layer_columns = LayerRow.columns()
            layers = _complete_records(self.layers_path, layer_columns)
            at = layer_columns.index("run_id")
            write_atomically(self.layers_path, _csv_text(
                [layer_columns, *(r for r in layers if r[at].isdigit() and int(r[at]) in kept_ids)]))

    def done_run_ids(self) -> set[int]:
        """Runs that already have a row on disk (whatever their outcome)."""
        with self.csv_path.open(newline="") as f:
            return {int(r["run_id"]) for r in csv.DictReader(f) if r.get("run_id", "").isdigit()}

    def outcomes(self) -> dict[int, str]:
        with self.csv_path.open(newline="") as f:
            return {int(r["run_id"]): r.get("outcome", "") for r in csv.DictReader(f)
                    if r.get("run_id", "").isdigit()}

    def save_outputs(self, run_id: int, arrays: SavedOutputs) -> str:
        """outputs/<run_id>.npz (named arrays), or outputs/<run_id>.json (a list of records, e.g.
        a speech run's transcripts), written whole or not at all; returns its path in the folder."""
        import numpy as np

        self.outputs_dir.mkdir(exist_ok=True)
        path = self.outputs_dir / f"{run_id}.{'json' if isinstance(arrays, list) else 'npz'}"
        tmp = path.with_name(f".{path.name}.partial")
        try:
            with _writing(path):
                with tmp.open("wb") as f:
                    if isinstance(arrays, list):
                        f.write(json.dumps(arrays, indent=1, ensure_ascii=False).encode("utf-8"))
                    else:
                        np.savez(f, **arrays)
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return str(path.relative_to(self.directory))

    def add(self, row: ResultRow, samples: dict[str, Any] | None = None,
            layers: list[LayerRow] | tuple[LayerRow, ...] = ()) -> None:
        """Layers and the samples line first, then the row: a row never exists without its
        samples (a samples line or layers left alone by a failed row write are dropped on resume)."""
        self.rows.append(row)
        if layers:
            with _writing(self.layers_path), self.layers_path.open("a", newline="") as f:
                csv.writer(f).writerows([_csv_value(v) for v in dataclasses.astuple(layer)] for layer in layers)
        line = {"schema_version": SCHEMA_VERSION, "run_id": row.run_id, "reason": row.reason,
                **(samples or {})}
        with _writing(self.samples_path), self.samples_path.open("a") as f:
            f.write(json.dumps(json_safe(line)) + "\n")
        with _writing(self.csv_path), self.csv_path.open("a", newline="") as f:
            csv.writer(f).writerow([_csv_value(v) for v in row.record().values()])

    def log_harness_error(self, what: str, traceback_text: str) -> None:
        with _writing(self.log_path), self.log_path.open("a") as f:
            f.write(f"--- {utc_now()} {what}\n{traceback_text.rstrip()}\n")

    def record_browser(self, name: str, info: dict[str, Any]) -> None:
        self.environment["browsers"].setdefault(name, {}).update(info)
        self.write_environment()

    def record_engine(self, engine: str, build: str) -> None:
        """An engine build a page loaded, as the page reported it (ONNX Runtime Web's version,
        wllama's llama.cpp build): environment.json's ``engines``, each build once."""
        builds = self.environment.setdefault("engines", {}).setdefault(engine, [])
        if build and build not in builds:
            builds.append(build)
            self.write_environment()

    def record_timing(self, timing: dict[str, Any]) -> None:
        """The timing protocol every page of the sweep follows (also in plan.json)."""
        self.environment["timing"] = timing
        self.write_environment()

    def write_environment(self) -> None:
        write_atomically(self.environment_path, json.dumps(json_safe(self.environment), indent=2) + "\n")


def _csv_text(records: list[list[Any]]) -> str:
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows(records)
    return buffer.getvalue()


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
        "cpu_model": _cpu_model() or uname.processor,
        "os": _os_name(),
        "cpu_count": psutil.cpu_count(logical=True),
        "memory_bytes": psutil.virtual_memory().total,
        "python": sys.version.split()[0],
        "packages": {d: _version(d) for d in ("selenium", "aiohttp", "numpy", "marionette-driver", "onnx",
                                            "onnxruntime", "torch", "transformers")},
    }


def _cpu_model() -> str:
    """The CPU's name ('Intel(R) Xeon(R) Processor @ 2.80GHz'); '' where /proc/cpuinfo has none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return ""


def _os_name() -> str:
    """The distribution ('Debian GNU/Linux 12 (bookworm)'), else the system and its release."""
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        return f"{platform.system()} {platform.release()}".strip()


SETTING_ENV_PREFIXES = ("FWP_", "WEBNN_", "WLLAMA_")
"""Environment variables that change what a sweep runs (FWP_TJS_ORT, WEBNN_EXPERIMENTAL_PRECISION,
...): part of its command."""


def provenance(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """What made a sweep: the process's exact command line with the settings the environment gave
    (``environment``: the variables named by SETTING_ENV_PREFIXES), its working folder, the
    project's version, and from a git checkout its commit and whether tracked files differed
    from it (``dirty``; None outside a checkout, where ``commit`` is ''), result data under
    results/ aside: committed findings folders are data, not the code that ran."""
    top, _, head = _git(root, "rev-parse", "--show-toplevel", "HEAD").partition("\n")
    commit = head if top == str(root) else ""
    return {
        "command": shlex.join(sys.orig_argv),
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(SETTING_ENV_PREFIXES)},
        "cwd": os.getcwd(),
        "version": _version("fixed-web-platform"),
        "commit": commit,
        "dirty": bool(_git(root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"))
        if commit else None,
    }


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""

"""Result rows and where they go: results.csv (one row per run, written as each run ends),
samples.jsonl (raw samples) and environment.json, under results/<UTC timestamp>_<label>/."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import math
import platform
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from .specs import SCHEMA_VERSION, Outcome, RunSpec

RESULTS_ROOT = Path(__file__).resolve().parent.parent / "results"


@dataclass(frozen=True)
class ResultRow:
    schema_version: int
    run_id: int
    repetition: int
    timestamp_utc: str
    browser: str
    browser_version: str
    platform: str
    precision_mode: str
    adapter: str
    device_type: str
    workload: str
    m: int
    k: int
    n: int
    bits_requested: int
    bits_executed: int | None
    weight_format: str
    weight_dtype: str
    scale_dtype: str
    zero_point_dtype: str
    compute_dtype: str
    block_size: int
    outcome: str
    reason: str
    latency_ms_median: float | None = None
    latency_ms_p10: float | None = None
    latency_ms_p90: float | None = None
    latency_cv: float | None = None
    latency_ms_mean: float | None = None
    latency_ms_stdev: float | None = None
    latency_ms_iqr: float | None = None
    n_samples: int = 0
    min_samples: int = 0
    samples_short: bool | None = None
    """True when fewer timed samples came back than the minimum asked for (time budget hit)."""
    unstable: bool | None = None
    instability: str = ""
    """Why the samples are unstable (CV over 10%, or the slowest sample over 2x the median)."""
    pages: int = 0
    timing_source: str = ""
    cold_ms: float | None = None
    wall_ms_median: float | None = None
    gpu_ms_median: float | None = None
    compile_ms: float | None = None
    gflops: float | None = None
    weight_bytes: int | None = None
    weight_bytes_f32: int | None = None
    compression: float | None = None
    gpu_buffer_bytes: int | None = None
    js_heap_bytes: int | None = None
    js_heap_source: str = ""
    proc_rss_baseline_bytes: int | None = None
    proc_rss_peak_bytes: int | None = None
    proc_rss_delta_bytes: int | None = None
    proc_uss_peak_bytes: int | None = None
    proc_pss_peak_bytes: int | None = None
    proc_count: int | None = None
    rel_error_vs_float: float | None = None
    max_abs_error_vs_float: float | None = None
    snr_db: float | None = None
    cosine_vs_float: float | None = None
    rel_error_vs_dequantized: float | None = None
    kernel_tolerance: float | None = None
    shader: str = ""

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def without_measurement(
        cls, run: RunSpec, outcome: Outcome, reason: str, *, browser_version: str = "",
        adapter: str = "", weight_format: str = "",
    ) -> ResultRow:
        """A row for a run that produced no figures: the outcome and the reason say why."""
        return cls(
            schema_version=SCHEMA_VERSION,
            run_id=run.run_id,
            repetition=run.repetition,
            timestamp_utc=utc_now(),
            browser=run.browser,
            browser_version=browser_version,
            platform=run.platform,
            precision_mode=run.precision_mode,
            adapter=adapter,
            device_type=run.webnn_device if run.platform == "webnn" else "",
            workload=run.workload.name,
            m=run.workload.m,
            k=run.workload.k,
            n=run.workload.n,
            bits_requested=run.bits,
            bits_executed=None,
            weight_format=weight_format,
            weight_dtype="",
            scale_dtype="",
            zero_point_dtype="",
            compute_dtype="",
            block_size=run.block_size if run.bits <= 8 else 0,
            outcome=outcome,
            reason=reason,
        )


def _drop_torn_last_line(path: Path) -> None:
    """An interrupted write can leave half a line at the end; appending after it would corrupt
    the next row, so cut the file back to its last complete line."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        "packages": {d: _version(d) for d in ("selenium", "aiohttp", "numpy", "marionette-driver")},
    }

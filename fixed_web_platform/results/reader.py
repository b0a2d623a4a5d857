"""Read result folders back (for report, compare, resume), refusing schemas newer than this tool."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..vocabulary import SCHEMA_VERSION, EngineName, Outcome, TimingSource

CONFIG_KEY = (
    "browser", "engine", "platform", "precision_mode", "device_type", "workload", "m", "k", "n",
    "bits_requested", "block_size",
)
"""Columns that identify one configuration across sweeps (what compare matches on)."""


class ResultSchemaError(ValueError):
    """A results folder this version cannot read; the message says why and what to do."""


@dataclass(frozen=True)
class ResultSet:
    directory: Path
    rows: pd.DataFrame
    samples: dict[int, dict[str, Any]]
    """Raw samples per run_id, as written to samples.jsonl."""
    environment: dict[str, Any]


def _check_version(version: Any, where: Path) -> None:
    try:
        v = int(version)
    except (TypeError, ValueError):
        raise ResultSchemaError(f"{where}: no readable schema_version") from None
    if v > SCHEMA_VERSION:
        raise ResultSchemaError(
            f"{where}: results schema version {v} is newer than this tool understands "
            f"({SCHEMA_VERSION}); upgrade the harness to read it"
        )


REQUIRED_COLUMNS = ("run_id", "browser", "platform", "workload", "m", "k", "n", "bits_requested",
                    "outcome")
INTEGER_COLUMNS = ("run_id", "m", "k", "n", "bits_requested", "bits_executed", "block_size",
                   "repetition", "n_samples")
FLOAT_COLUMNS = ("latency_ms_median", "latency_ms_p10", "latency_ms_p90", "latency_cv",
                 "wall_ms_median", "gpu_ms_median", "gflops", "weight_bytes", "weight_bytes_f32",
                 "compression", "rel_error_vs_float", "snr_db", "rel_error_vs_dequantized",
                 "kernel_tolerance", "proc_rss_peak_bytes", "proc_rss_delta_bytes", "js_heap_bytes")
SAMPLE_LISTS = ("wall_ms", "gpu_ms")


def _check_rows(rows: pd.DataFrame, where: Path) -> pd.DataFrame:
    """The one validation of a results.csv, for report and compare alike: the core columns are
    there, numbers are numbers, outcomes are the closed set."""
    missing = [c for c in REQUIRED_COLUMNS if c not in rows.columns]
    if missing:
        raise ResultSchemaError(f"{where}: missing column(s) {', '.join(missing)}")
    for column in (*INTEGER_COLUMNS, *FLOAT_COLUMNS):
        if column not in rows:
            continue
        raw = rows[column]
        numbers = pd.to_numeric(raw, errors="coerce")
        bad = raw.notna() & numbers.isna() & (raw.astype(str).str.lower() != "nan")
        if column in INTEGER_COLUMNS:
            bad |= numbers.notna() & (numbers % 1 != 0)
        if column in ("run_id", "m", "k", "n", "bits_requested"):
            bad |= numbers.isna()
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise ResultSchemaError(f"{where}: row {i + 1}, column {column} is not a number: "
                                    f"{raw.iloc[i]!r:.40}")
        rows[column] = numbers
    outcomes = {o.value for o in Outcome}
    unknown = sorted({str(v) for v in rows["outcome"] if str(v) not in outcomes})
    if unknown:
        raise ResultSchemaError(f"{where}: unknown outcome(s) {', '.join(unknown)[:80]}")
    return rows


def _check_sample(record: Any, where: Path, line_no: int) -> dict[str, Any]:
    if not isinstance(record, dict) or isinstance(record.get("run_id"), bool) \
            or not isinstance(record.get("run_id"), int):
        raise ResultSchemaError(f"{where}: line {line_no} is not a samples record with a run_id")
    for key in SAMPLE_LISTS:
        values = record.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) or v in ("inf", "-inf")
                for v in values):
            raise ResultSchemaError(f"{where}: line {line_no}: {key} is not a list of numbers")
    return record


def load(directory: str | Path) -> ResultSet:
    directory = Path(directory)
    csv_path = directory / "results.csv"
    if not csv_path.is_file():
        raise ResultSchemaError(f"{directory}: no results.csv (is this a results folder?)")
    env_path = directory / "environment.json"
    environment = json.loads(env_path.read_text()) if env_path.is_file() else {}
    if not isinstance(environment, dict):
        raise ResultSchemaError(f"{env_path}: not a JSON object")
    if environment:
        _check_version(environment.get("schema_version"), env_path)
    rows = pd.read_csv(csv_path, keep_default_na=True, na_values=[""], dtype=object)
    for version in rows.get("schema_version", pd.Series(dtype=object)).dropna().unique():
        _check_version(version, csv_path)
    rows = _check_rows(rows, csv_path)
    if "engine" not in rows:  # schema 2 and older: the harness was the only engine
        rows["engine"] = EngineName.HARNESS.value
    if "executed_on" not in rows:
        rows["executed_on"] = rows["platform"].where(rows["outcome"] == "ok", "")
    text = [c for c in rows.columns if c not in (*INTEGER_COLUMNS, *FLOAT_COLUMNS)]
    for column in text:
        rows[column] = rows[column].astype(object).where(rows[column].notna(), "").astype(str)
    samples: dict[int, dict[str, Any]] = {}
    samples_path = directory / "samples.jsonl"
    if samples_path.is_file():
        for line_no, line in enumerate(samples_path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = _check_sample(json.loads(line), samples_path, line_no)
            except (json.JSONDecodeError, RecursionError):
                raise ResultSchemaError(f"{samples_path}: line {line_no} is not JSON") from None
            _check_version(record.get("schema_version"), samples_path)
            samples[record["run_id"]] = record
    return ResultSet(directory=directory, rows=rows, samples=samples, environment=environment)


def headline_samples(record: dict[str, Any]) -> list[float]:
    """The samples the row's headline statistics came from (GPU timestamps or wall clock)."""
    key = "gpu_ms" if record.get("timing_source") == TimingSource.GPU_TIMESTAMP else "wall_ms"
    values = record.get(key) or []
    return [float(v) for v in values]

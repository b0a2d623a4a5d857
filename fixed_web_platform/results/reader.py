"""Read result folders back (for report, compare, resume), refusing schemas newer than this tool."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..vocabulary import SCHEMA_VERSION, EngineName, TimingSource

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


def load(directory: str | Path) -> ResultSet:
    directory = Path(directory)
    csv_path = directory / "results.csv"
    if not csv_path.is_file():
        raise ResultSchemaError(f"{directory}: no results.csv (is this a results folder?)")
    env_path = directory / "environment.json"
    environment = json.loads(env_path.read_text()) if env_path.is_file() else {}
    if environment:
        _check_version(environment.get("schema_version"), env_path)
    rows = pd.read_csv(csv_path, keep_default_na=True, na_values=[""])
    for version in rows.get("schema_version", pd.Series(dtype=int)).dropna().unique():
        _check_version(version, csv_path)
    if "engine" not in rows:  # schema 2 and older: the harness was the only engine
        rows["engine"] = EngineName.HARNESS.value
    if "executed_on" not in rows:
        rows["executed_on"] = rows["platform"].where(rows["outcome"] == "ok", "")
    for column in ("reason", "device_type", "engine", "executed_on", "engine_version", "weight_dtype", "scale_dtype", "zero_point_dtype",
                   "compute_dtype", "shader", "timing_source", "adapter", "browser_version"):
        if column in rows:
            rows[column] = rows[column].astype(object).fillna("").astype(str)
    samples: dict[int, dict[str, Any]] = {}
    samples_path = directory / "samples.jsonl"
    if samples_path.is_file():
        for line in samples_path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            _check_version(record.get("schema_version"), samples_path)
            samples[int(record["run_id"])] = record
    return ResultSet(directory=directory, rows=rows, samples=samples, environment=environment)


def headline_samples(record: dict[str, Any]) -> list[float]:
    """The samples the row's headline statistics came from (GPU timestamps or wall clock)."""
    key = "gpu_ms" if record.get("timing_source") == TimingSource.GPU_TIMESTAMP else "wall_ms"
    values = record.get(key) or []
    return [float(v) for v in values]

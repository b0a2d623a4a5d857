"""Read result folders back (for report, compare, resume), refusing schemas newer than this tool."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..precision.quantizers import DEFAULT_QUANTIZER
from ..vocabulary import SCHEMA_VERSION, EngineName, Outcome, SteadyClass, TimingSource
from ..workloads import DEFAULT_KIND, KINDS, ONNX_FILE, kind_columns, kind_named
from ..workloads.onnx_file.variants import RENAMED, RENAMED_SCHEMA
from .rows import LayerRow, identity_columns

CONFIG_KEY = identity_columns()
"""Columns that identify one configuration across sweeps (what compare matches on): results/rows.py."""


class ResultSchemaError(ValueError):
    """A results folder this version cannot read; the message says why and what to do."""


@dataclass(frozen=True)
class ResultSet:
    directory: Path
    rows: pd.DataFrame
    samples: dict[int, dict[str, Any]]
    """Raw samples per run_id, as written to samples.jsonl."""
    environment: dict[str, Any]
    layers: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(LayerRow.columns())))
    """layers.csv: one line per linear layer of each whole-model run (empty when absent)."""


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


REQUIRED_COLUMNS = ("run_id", "browser", "platform", "workload", "bits_requested", "outcome")
KIND_INTEGER_COLUMNS = tuple(c.name for c in kind_columns() if c.type is int)
KIND_FLOAT_COLUMNS = tuple(c.name for c in kind_columns() if c.type is float)
KIND_TEXT_COLUMNS = tuple(c.name for c in kind_columns() if c.type is str)
"""Every workload kind's columns: blank on rows of other kinds; folders written before a kind's
columns existed still load (filled blank / NaN)."""
INTEGER_COLUMNS = ("run_id", "bits_requested", "bits_executed", "block_size",
                   "repetition", "n_samples", "concurrent_sessions", "act_bits", *KIND_INTEGER_COLUMNS)
FLOAT_COLUMNS = ("latency_ms_median", "latency_ms_p10", "latency_ms_p90", "latency_cv",
                 "wall_ms_median", "gpu_ms_median", "gflops", "weight_bytes", "weight_bytes_f32",
                 "compression", "rel_error_vs_float", "snr_db", "rel_error_vs_dequantized",
                 "kernel_tolerance", "proc_rss_peak_bytes", "proc_rss_delta_bytes", "js_heap_bytes",
                 *KIND_FLOAT_COLUMNS)
LAYER_INTEGER_COLUMNS = ("run_id", "k", "n", "bits_requested", "bits_executed", "weight_bytes")
LAYER_FLOAT_COLUMNS = ("gpu_ms", "weight_error")
SAMPLE_LISTS = ("wall_ms", "gpu_ms")
FORMS_BEFORE_THE_COLUMN = ("transpose", "pretransposed_gemm")
CACHE_BEFORE_THE_COLUMN = "bucket"
"""What ORT (and transformers.js on it) ran on WebGPU before buffer_cache was a column: ORT's
default (engines/ort: DEFAULT_BUFFER_CACHE)."""
"""The graph forms the harness's WebNN graphs built for matmuls and for whole models before rows
named one (commit c4f7fda): a history, so not engines/webnn/forms.py's defaults of today."""


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
        parsed = pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw)
        numbers = raw if parsed else pd.to_numeric(raw, errors="coerce")  # read as numbers: nothing to parse
        bad = None if parsed else raw.notna() & numbers.isna() & (raw.astype(str).str.lower() != "nan")
        if column in INTEGER_COLUMNS and not pd.api.types.is_integer_dtype(numbers):
            fractional = numbers.notna() & (numbers % 1 != 0)
            bad = fractional if bad is None else bad | fractional
        if column in ("run_id", "bits_requested"):
            bad = numbers.isna() if bad is None else bad | numbers.isna()
        if bad is not None and bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise ResultSchemaError(f"{where}: row {i + 1}, column {column} is not a number: "
                                    f"{raw.iloc[i]!r:.40}")
        if not parsed:
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
    absent = [c for c in (*KIND_INTEGER_COLUMNS, *KIND_FLOAT_COLUMNS) if c not in rows]
    if absent:  # folders before a kind's columns (added at once: one column at a time fragments the frame)
        rows = pd.concat([rows, pd.DataFrame(float("nan"), index=rows.index, columns=absent)], axis=1)
    if "act_bits" not in rows:  # folders before activation precision: float activations
        rows["act_bits"] = 32
    judged = "steady_class" in rows  # folders before the steady-state protocol (schema 11): not judged
    if "granularity" not in rows:  # folders before per-channel weights: blockwise at 8/4/2 bits
        bits = pd.to_numeric(rows["bits_requested"], errors="coerce")
        rows = pd.concat([rows, pd.DataFrame({"granularity": np.where(bits <= 8, "block", "")}, index=rows.index)],
                         axis=1)
    if "weight_quant" not in rows:  # folders before the quantizer axis (schema 12): minmax made 8/4/2-bit codes
        bits = pd.to_numeric(rows["bits_requested"], errors="coerce")
        named = rows["format_requested"].notna() if "format_requested" in rows else pd.Series(False, index=rows.index)
        quantizer = pd.DataFrame({"weight_quant": np.where((bits <= 8) & ~named, DEFAULT_QUANTIZER, "")}, index=rows.index)
        rows = pd.concat([rows, quantizer], axis=1)  # one concat: inserting into a wide frame fragments it
    absent = [c for c in (*KIND_TEXT_COLUMNS, "outputs_file", "kernel_variant", "ran_on", "proc_memory_source",
                          "browser_build", "engine_build", "accuracy_level", "act_executed", "observer", "act_smoothing", "act_scale", "calibration", "format_requested", "steady_class", "steady_tally", "stop_reason")
              if c not in rows]
    if absent:
        rows = pd.concat([rows, pd.DataFrame("", index=rows.index, columns=absent)], axis=1)
    if not judged:
        rows.loc[rows["outcome"] == "ok", "steady_class"] = SteadyClass.NOT_JUDGED.value
    text = [c for c in rows.columns if c not in (*INTEGER_COLUMNS, *FLOAT_COLUMNS)]
    for column in text:
        rows[column] = rows[column].astype(object).where(rows[column].notna(), "").astype(str)
    _own_kind_columns(rows, csv_path)
    if "graph_form" not in rows:  # folders before graph forms: the harness's WebNN graphs had their default
        webnn = (rows["engine"] == EngineName.HARNESS.value) & (rows["platform"] == "webnn")
        default = np.where(rows["kind"] == "matmul", *FORMS_BEFORE_THE_COLUMN)
        rows["graph_form"] = np.where(webnn, default, "")
    if "backend" not in rows:  # folders before the column: ORT on WebGPU ran its native implementation
        native = (rows["engine"] == EngineName.ORT.value) & (rows["platform"] == "webgpu")
        rows["backend"] = np.where(native, "native", "")
    if "buffer_cache" not in rows:  # folders before the column: ORT (and transformers.js under it) on WebGPU had its default
        cached = rows["engine"].isin([EngineName.ORT.value, EngineName.TRANSFORMERSJS.value]) & (rows["platform"] == "webgpu")
        rows["buffer_cache"] = np.where(cached, CACHE_BEFORE_THE_COLUMN, "")
    _rename_variants(rows)
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
    _fill_blank_plans(rows, directory)
    return ResultSet(directory=directory, rows=rows, samples=samples, environment=environment,
                     layers=_load_layers(directory / "layers.csv"))


def _rename_variants(rows: pd.DataFrame) -> None:
    """ONNX files' variants by today's names: before schema 13, 'q8' was the 8-bit MatMulNBits
    variant (now 'q8-nbits'; 'q8' is dynamic int8, as transformers.js names it)."""
    if "schema_version" not in rows:
        return
    old = (rows["kind"] == ONNX_FILE.name) & (pd.to_numeric(rows["schema_version"], errors="coerce") < RENAMED_SCHEMA)
    for column in ("format_requested", "weight_format"):
        if column in rows and old.any():
            rows.loc[old, column] = rows.loc[old, column].map(lambda v: RENAMED.get(v, v))


def _own_kind_columns(rows: pd.DataFrame, where: Path) -> None:
    """Every row names its workload kind (folders before schema 8: a row with a model is an
    encoder's, any other a matmul's), and carries only its kind's columns: other kinds' are
    blank (schema 7 and older wrote m = k = n = 0 on whole-model rows)."""
    if "kind" not in rows:
        rows["kind"] = rows["model"].map(lambda m: "encoder" if m else DEFAULT_KIND) if "model" in rows else DEFAULT_KIND
    try:
        rows["kind"] = rows["kind"].map(lambda k: kind_named(k).name if k else DEFAULT_KIND)
    except ValueError as exc:
        raise ResultSchemaError(f"{where}: {exc}") from None
    others_of: dict[tuple[str, ...], pd.Series] = {}
    for column in kind_columns():
        having = tuple(k.name for k in KINDS if column.name in {c.name for c in k.columns})  # shared names: one column
        if having not in others_of:
            others_of[having] = ~rows["kind"].isin(having)
        others = others_of[having]
        if others.any():
            rows.loc[others, column.name] = "" if column.type is str else float("nan")


def _planned_rules(directory: Path) -> dict[int, str]:
    """run_id -> the precision rules of its whole-model workload (as JSON text, '' for none),
    from plan.json; empty when there is no readable plan."""
    path = directory / "plan.json"
    try:
        doc = json.loads(path.read_text())
        out = {}
        for run in doc["runs"]:
            workload = run.get("workload") or {}
            if workload.get("kind", DEFAULT_KIND) != DEFAULT_KIND:
                out[int(run["run_id"])] = json.dumps(workload.get("rules") or [], sort_keys=True)
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _fill_blank_plans(rows: pd.DataFrame, directory: Path) -> None:
    """A whole-model row written before its model was prepared (refused, unavailable, the
    browser failed to start) has no precision_plan; it gets the one its run would have had, so
    it lines up with its configuration's other rows: 'uniform:<bits>' when plan.json gives the
    run no precision rules, else the plan of a row of the same model, rules and bits that has
    one. Left blank when neither says."""
    if rows.empty:
        return
    blank = (rows["model"] != "") & (rows["precision_plan"] == "")
    if not blank.any():
        return
    rules = _planned_rules(directory)
    if not rules:
        return
    ids = rows["run_id"].astype("int64")
    rule_text = ids.map(lambda i: rules.get(int(i)))
    same = ["model", "weights", "batch_size", "seq_len", "inputs", "bits_requested", "block_size"]

    def key(i: Any) -> tuple[Any, ...]:
        return (*(str(rows.at[i, c]) for c in same), rule_text[i])

    known = {key(i): rows.at[i, "precision_plan"] for i in rows.index[~blank & (rows["model"] != "")]
             if rule_text[i] is not None}
    for i in rows.index[blank]:
        if rule_text[i] is None:
            continue
        if rule_text[i] == "[]":
            rows.at[i, "precision_plan"] = f"uniform:{int(rows.at[i, 'bits_requested'])}"
        elif key(i) in known:
            rows.at[i, "precision_plan"] = known[key(i)]


def _load_layers(path: Path) -> pd.DataFrame:
    """layers.csv checked like results.csv (numbers are numbers); empty when the file is absent."""
    columns = LayerRow.columns()
    if not path.is_file():
        return pd.DataFrame(columns=columns)
    try:
        layers = pd.read_csv(path, keep_default_na=True, na_values=[""], dtype=object)
    except pd.errors.EmptyDataError:
        return pd.DataFrame(columns=columns)
    except pd.errors.ParserError as exc:
        raise ResultSchemaError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in ("run_id", "layer", "bits_requested") if c not in layers.columns]
    if missing:
        raise ResultSchemaError(f"{path}: missing column(s) {', '.join(missing)}")
    for column in (*LAYER_INTEGER_COLUMNS, *LAYER_FLOAT_COLUMNS):
        if column not in layers:
            layers[column] = float("nan")
            continue
        raw = layers[column]
        numbers = pd.to_numeric(raw, errors="coerce")
        bad = raw.notna() & numbers.isna() & (raw.astype(str).str.lower() != "nan")
        if column in LAYER_INTEGER_COLUMNS:
            bad |= numbers.notna() & (numbers % 1 != 0)
        if column in ("run_id", "bits_requested"):
            bad |= numbers.isna()
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise ResultSchemaError(f"{path}: line {i + 2}, column {column} is not a number: "
                                    f"{raw.iloc[i]!r:.40}")
        layers[column] = numbers
    for column in columns:
        if column not in layers:
            layers[column] = ""
    for column in layers.columns:
        if column not in (*LAYER_INTEGER_COLUMNS, *LAYER_FLOAT_COLUMNS):
            layers[column] = layers[column].astype(object).where(layers[column].notna(), "").astype(str)
    return layers


def sweep_names(directories: list[Path] | tuple[Path, ...]) -> list[str]:
    """One short name per results folder (its folder name; the path where names repeat), as the
    report and the history name sweeps."""
    names: list[str] = []
    for d in directories:
        name = Path(d).resolve().name or str(d)
        if name in names:
            name = str(d)
        while name in names:
            name += "'"
        names.append(name)
    return names


def headline_key(record: dict[str, Any]) -> str:
    """Which samples list of a samples record the row's headline figures come from."""
    return "gpu_ms" if record.get("timing_source") == TimingSource.GPU_TIMESTAMP else "wall_ms"


def headline_samples(record: dict[str, Any]) -> list[float]:
    """The samples the row's headline statistics came from (GPU timestamps or wall clock)."""
    values = record.get(headline_key(record)) or []
    return [float(v) for v in values]


def page_samples(record: dict[str, Any]) -> list[list[float]]:
    """The headline samples of a run split by page load, the unit of independence.

    ``samples_per_page`` says how many timed samples each page load gave; a record without it (or
    whose counts do not add up) is one page. Null and non-finite samples are dropped within their
    page, and a page left empty is dropped."""
    values = record.get(headline_key(record)) or []
    counts = record.get("samples_per_page")
    valid = isinstance(counts, list) and all(isinstance(c, int) and c >= 0 for c in counts)
    if not valid or sum(counts) != len(values):
        counts = [len(values)]
    pages: list[list[float]] = []
    start = 0
    for count in counts:
        page = [float(v) for v in values[start:start + count] if v is not None]
        start += count
        page = [v for v in page if math.isfinite(v)]
        if page:
            pages.append(page)
    return pages

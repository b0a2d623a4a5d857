"""Report on one or more results folders: summary tables (Markdown and HTML) and PNG plots.

    run_real_webgpu_webnn.py report results/<sweep> [results/<other sweep> ...] [--output-dir DIR]

Every row of every folder is accounted for: ok rows are aggregated (median over repetitions) into
the summary table, every other row is listed with its outcome and reason. Plots: plots.py;
Markdown tables: markdown.py.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..precision.quantizers import DEFAULT_QUANTIZER
from ..probes.adapter import FALLBACK_MARK, adapter_label
from ..results import reader as result_files
from ..results.reader import (
    KIND_FLOAT_COLUMNS,
    KIND_INTEGER_COLUMNS,
    KIND_TEXT_COLUMNS,
    ResultSchemaError,
    page_samples,
)
from ..results.rows import LayerRow, identity_columns, setting_columns
from ..run_spec import protocol_words
from ..series.stats import median_interval, summarize
from ..workloads import DEFAULT_KIND, kind_columns, kind_named
from ..vocabulary import with_build
from .activations import activation_section
from .memory import memory_section
from .glance import glance_html, glance_markdown, glance_notes
from .builds import builds_section
from .history import history_section
from .markdown import fmt_bytes, how_to_read_html, how_to_read_markdown, html_table, markdown_table, number
from .plots import MEMORY_COLUMNS
from .run_sequence import steady_section
from .sections import SECTIONS
from .ship import ship_files, ship_section
from .sensitivity import sensitivity_section
from .steady import (
    MARK_NOTE,
    ROW_NUMBER_COLUMNS,
    ROW_TEXT_COLUMNS,
    any_marked,
    configuration_steady,
    marked,
    steady_text,
    tally_line,
)

REQUIRED_COLUMNS = ("run_id", "browser", "platform", "workload", "bits_requested", "outcome")
TEXT_COLUMNS = ("sweep", "browser", "engine", "platform", "executed_on", "precision_mode", "device_type", "kind",
                "workload", "outcome", "reason", "timing_source", "browser_version", "adapter", *KIND_TEXT_COLUMNS,
                "outputs_file", "granularity", "weight_quant", "graph_form", *ROW_TEXT_COLUMNS)
BASELINE_KEY = ("sweep", *setting_columns())
"""One benchmarked setting; the 16- and 32-bit rows under the same key (uniform precision plans
only) are the speed-up baselines."""
CONFIG_KEY = ("sweep", *identity_columns())
"""One configuration: its ok repetitions are aggregated into one summary row."""
ENGINE_OWN = ("engine", "engine_build", "buffer_cache", "backend", "accuracy_level")
"""Columns that say how an engine ran, not what work it ran: left out when engines are set side by side."""
PEER_KEY = ("sweep", *(c for c in setting_columns() if c not in ENGINE_OWN), "bits_requested",
            *(c for c in identity_columns() if c not in setting_columns() and c not in
              ("bits_requested", "block_size", "act_bits", "observer", *ENGINE_OWN)))
"""Rows of different engines under the same key ran the same work: the harness row is the one
every other engine's latency is set against (``latency_vs_harness``)."""


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    plots: list[Path]
    summary_csv: Path
    not_ok_csv: Path


@dataclass(frozen=True)
class Sweeps:
    """Every loaded folder, concatenated: ``rows`` has a ``sweep`` column (the folder's name)."""

    directories: list[Path]
    names: list[str]
    rows: pd.DataFrame
    samples: dict[tuple[str, int], dict[str, Any]]
    environments: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    layers: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["sweep", *LayerRow.columns()]))
    """Every folder's layers.csv (whole-model runs), with a ``sweep`` column."""


# ---------------------------------------------------------------------------------------- loading


METER_LABELS = {"gpu_peak_bytes": "GPU peak", "wasm_peak_bytes": "wasm peak", "webnn_constant_bytes": "WebNN constants"}
"""The measured memory columns (web/meter.js) the summary keeps, and their headers."""
METER_COLUMNS = (*METER_LABELS, "gpu_measured_peak_bytes", "gpu_largest_buffer_bytes", "webnn_tensor_peak_bytes")
"""Every measured memory column a configuration's summary carries (the median of its runs')."""


def load_sweeps(directories: Sequence[str | Path]) -> Sweeps:
    """Load every folder (result_files.load: schema check) and concatenate the rows.

    Raises ResultSchemaError for a folder that is missing, not a results folder, lacks the core
    columns, or was written by a newer schema.
    """
    dirs = [Path(d) for d in directories]
    if not dirs:
        raise ResultSchemaError("no results folder given")
    names = result_files.sweep_names(dirs)
    frames: list[pd.DataFrame] = []
    samples: dict[tuple[str, int], dict[str, Any]] = {}
    environments: dict[str, dict[str, Any]] = {}
    layer_frames: list[pd.DataFrame] = []
    for directory, name in zip(dirs, names):
        if not directory.is_dir():
            raise ResultSchemaError(f"{directory}: no such results folder")
        loaded = result_files.load(directory)
        missing = [c for c in REQUIRED_COLUMNS if c not in loaded.rows.columns]
        if missing:
            raise ResultSchemaError(
                f"{directory / 'results.csv'}: missing column(s) {', '.join(missing)}"
            )
        frame = loaded.rows.copy()
        frame.insert(0, "sweep", name)
        frames.append(frame)
        environments[name] = loaded.environment
        for run_id, record in loaded.samples.items():
            samples[(name, int(run_id))] = record
        if not loaded.layers.empty:
            layer_frame = loaded.layers.copy()
            layer_frame.insert(0, "sweep", name)
            layer_frames.append(layer_frame)
    rows = pd.concat(frames, ignore_index=True, sort=False) if frames else pd.DataFrame()
    layers = (pd.concat(layer_frames, ignore_index=True, sort=False) if layer_frames
              else pd.DataFrame(columns=["sweep", *LayerRow.columns()]))
    return Sweeps(dirs, names, _normalize(rows), samples, environments, layers=layers)


def _normalize(rows: pd.DataFrame) -> pd.DataFrame:
    """Fill the key columns older folders may lack; numbers as numbers, text as text."""
    rows = rows.copy()
    for column in TEXT_COLUMNS:
        if column not in rows:
            rows[column] = ""
        rows[column] = rows[column].fillna("").astype(str)
    rows.loc[rows["engine"] == "", "engine"] = "harness"  # folders before schema 3
    for name, build in (("browser", "browser_build"), ("engine", "engine_build")):
        # a build asked for is shown as part of its browser or engine (chrome@chromium, ort@1.31...),
        # so every table and plot keeps two builds apart; environment.json keys browsers so too
        named = rows.get(build, pd.Series("", index=rows.index)).fillna("").astype(str)
        rows[name] = list(map(with_build, rows[name], named))
    for column in ("block_size", "repetition"):
        if column not in rows:
            rows[column] = 0
    numeric = ("run_id", "repetition", "bits_requested", "bits_executed",
               "block_size", "latency_ms_median", "latency_ms_p10", "latency_ms_p90", "wall_ms_median",
               "n_samples",
               "gflops", "weight_bytes", "weight_bytes_f32", "rel_error_vs_float", "snr_db",
               "rel_error_vs_dequantized", "kernel_tolerance", *KIND_INTEGER_COLUMNS,
               *KIND_FLOAT_COLUMNS, *MEMORY_COLUMNS, *ROW_NUMBER_COLUMNS)
    for column in (*KIND_INTEGER_COLUMNS, *KIND_FLOAT_COLUMNS):
        if column not in rows:
            rows[column] = math.nan
    for column in numeric:
        if column in rows:
            rows[column] = pd.to_numeric(rows[column], errors="coerce")
    for column in ("block_size", "repetition"):
        rows[column] = rows[column].fillna(0).astype("int64")
    rows["outcome"] = rows["outcome"].str.strip().str.lower()
    return rows


# ------------------------------------------------------------------------------------ aggregation


def is_mixed(plan: Any) -> bool:
    """A precision plan with more than one bits value ('mixed:8x24,4x12')."""
    return isinstance(plan, str) and plan.startswith("mixed")


def shape_text(row: Any) -> str:
    """What was run, in one short cell, as the row's workload kind says it ('1x768x3072',
    '4x32 tokens')."""
    return kind_named(str(row.get("kind") or DEFAULT_KIND)).shape(row)


def _truthy(value: Any) -> bool | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("", "nan", "none"):
        return None
    return text in ("true", "1", "yes", "y", "unstable")


def _present(rows: pd.DataFrame, column: str) -> bool:
    """A column exists and at least one of these rows has a value in it."""
    if column not in rows or rows.empty:
        return False
    values = rows[column]
    if values.dtype == object or pd.api.types.is_string_dtype(values):
        return bool(values.map(lambda v: _truthy(v) is not None).any())
    return bool(values.notna().any())


def _unique_text(values: Iterable[Any]) -> str:
    seen = dict.fromkeys(str(v) for v in values if str(v) not in ("", "nan"))
    return "; ".join(seen)


def _pooled_runs(group: pd.DataFrame, samples: dict[tuple[str, int], dict[str, Any]]
                 ) -> list[list[list[float]]] | None:
    """Per repetition, its raw headline samples per page load, when all of them are on disk."""
    runs: list[list[list[float]]] = []
    for sweep, run_id in zip(group["sweep"], group["run_id"]):
        record = samples.get((sweep, int(run_id)))
        run_pages = page_samples(record) if record else []
        if not run_pages:
            return None
        runs.append(run_pages)
    return runs


def _interval_text(low: Any, high: Any, units: Any) -> str:
    """'4.850-5.200 (5 repetitions)', or the unit count alone when it has no interval."""
    count = str(units or "")
    if number(low) is None or number(high) is None:
        return f"- ({count})" if count else ""
    return f"{_fmt('.3f')(low)}-{_fmt('.3f')(high)}" + (f" ({count})" if count else "")


def summary_table(rows: pd.DataFrame,
                  samples: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per configuration with at least one ok run (numbers, not formatted).

    latency_ms_median is the median of the repetitions' medians; latency_ms_p10/_p90 are the
    percentiles of all repetitions' raw samples pooled (from samples.jsonl), or the median of the
    rows' own p10/p90 when samples are missing. latency_ms_ci_low/_high: the 95% interval of the
    typical latency from the units' medians (Student's t on their logarithms; units: the
    repetitions when several, else the page loads), so it includes the spread between them;
    blank with a single unit.
    Every other figure is the median over repetitions.
    """
    samples = samples or {}
    ok = rows[rows["outcome"] == "ok"] if "outcome" in rows else rows.iloc[0:0]
    memory = [c for c in MEMORY_COLUMNS if _present(ok, c)]
    has_unstable = _present(ok, "unstable")
    records: list[dict[str, Any]] = []
    for key, group in ok.groupby(list(CONFIG_KEY), sort=False, dropna=False):
        rec: dict[str, Any] = dict(zip(CONFIG_KEY, key))
        rec["shape"] = shape_text(rec)
        executed = group["bits_executed"].dropna() if "bits_executed" in group else pd.Series()
        rec["bits_executed"] = int(executed.mode().iloc[0]) if not executed.empty else None
        rec["runs"] = len(group)
        rec["page_loads"] = int(pd.to_numeric(group["pages"], errors="coerce").fillna(1).sum()) \
            if "pages" in group else len(group)
        rec["adapter"] = _unique_text(group.get("adapter", []))
        rec["compute_dtype"] = _unique_text(group.get("compute_dtype", []))
        rec["kernel_variant"] = _unique_text(group.get("kernel_variant", []))
        rec["n_samples"] = int(group["n_samples"].fillna(0).sum()) if "n_samples" in group else 0
        rec["timing_source"] = _unique_text(group.get("timing_source", []))
        rec.update(configuration_steady(group))
        median = group["latency_ms_median"].median() if "latency_ms_median" in group else math.nan
        rec["latency_ms_median"] = median
        runs = _pooled_runs(group, samples)
        spread = None
        rec["latency_ms_ci_low"] = rec["latency_ms_ci_high"] = math.nan
        rec["interval_units"] = ""
        if runs is not None:
            pages = [page for run in runs for page in run]
            pooled = summarize([s for page in pages for s in page])
            spread = (pooled.p10, pooled.p90)
            rec["page_loads"] = len(pages)
            # the units compare judges on: repetitions (fresh sessions) when several, else pages
            units = [[s for page in run for s in page] for run in runs] if len(runs) > 1 else pages
            rec["interval_units"] = (f"{len(runs)} repetitions" if len(runs) > 1 else
                                     f"{len(pages)} page load{'s' if len(pages) != 1 else ''}")
            if len(units) > 1:
                rec["latency_ms_ci_low"], rec["latency_ms_ci_high"] = median_interval(units)
        if spread is None:
            spread = (group["latency_ms_p10"].median() if "latency_ms_p10" in group else math.nan,
                      group["latency_ms_p90"].median() if "latency_ms_p90" in group else math.nan)
        rec["latency_ms_p10"], rec["latency_ms_p90"] = spread
        # the workload's FLOPs (each row's GFLOP/s x its median) over the configuration's median
        flops = (pd.to_numeric(group["gflops"], errors="coerce")
                 * pd.to_numeric(group["latency_ms_median"], errors="coerce") * 1e6).median() \
            if "gflops" in group else math.nan
        flops = round(flops) if math.isfinite(flops) else math.nan  # a workload's FLOPs: a whole number
        rec["gflops"] = flops / (median * 1e-3) / 1e9 if median and median > 0 else math.nan
        for column in ("wall_ms_median", "weight_bytes", "weight_bytes_f32", *METER_COLUMNS,
                       "rel_error_vs_float", "snr_db", "rel_error_vs_dequantized", "kernel_tolerance",
                       *KIND_FLOAT_COLUMNS, *(c for c in KIND_INTEGER_COLUMNS if c not in CONFIG_KEY)):
            rec[column] = pd.to_numeric(group[column], errors="coerce").median() if column in group else math.nan
        rec["outputs_file"] = _unique_text(group.get("outputs_file", []))
        # Process memory leaves out the first run of a browser session (the browser warming up)
        # when the configuration has other runs; the spread is over the runs kept.
        first = pd.to_numeric(group.get("session_run", pd.Series(1, index=group.index)), errors="coerce") == 0
        settled = group[~first] if (~first).any() else group
        rec["memory_warmup_only"] = bool(first.all()) and "session_run" in group
        for column in memory:
            values = pd.to_numeric(settled[column], errors="coerce").dropna()
            rec[column] = values.median() if not values.empty else math.nan
            rec[f"{column}_spread"] = (values.max() - values.min()) if len(values) > 1 else math.nan
        wb, wf = rec["weight_bytes"], rec["weight_bytes_f32"]
        rec["compression"] = wf / wb if wb and wb > 0 and not math.isnan(wf) else math.nan
        fallbacks = []
        for bits_exec, reason in zip(group.get("bits_executed", []), group.get("reason", [])):
            if pd.notna(bits_exec) and int(bits_exec) != int(rec["bits_requested"]):
                text = f"{int(rec['bits_requested'])} -> {int(bits_exec)}-bit"
                fallbacks.append(f"{text}: {reason}" if reason else text)
        for ran_on, reason in zip(group.get("executed_on", []), group.get("reason", [])):
            if ran_on and ran_on != rec["platform"]:
                fallbacks.append(f"ran on {ran_on}: {reason}" if reason else f"ran on {ran_on}")
        rec["executed_on"] = _unique_text(group.get("executed_on", []))
        rec["act_executed"] = _unique_text(group.get("act_executed", []))
        rec["fallback"] = _unique_text(fallbacks)
        if has_unstable:
            flags = [_truthy(v) for v in group["unstable"]]
            known = [f for f in flags if f is not None]
            rec["unstable"] = any(known) if known else None
            rec["instability"] = _unique_text(group["instability"]) if "instability" in group else ""
        records.append(rec)
    columns = ["sweep", "browser", "browser_build", "engine", "engine_build", "platform", "executed_on", "precision_mode",
               "device_type", "buffer_cache", "backend", "kind", "workload", "shape", "m", "k", "n", "granularity", "weight_quant", "block_size",
               "bits_requested",
               "format_requested", "bits_executed", "act_bits", "observer", "graph_form", "accuracy_level", "act_executed", "compute_dtype", "kernel_variant", "runs", "n_samples", "timing_source",
               "steady_class", "steady_warmup_s", "steady_class_runs", "latency_ms_median",
               "latency_ms_p10", "latency_ms_p90", "latency_ms_ci_low", "latency_ms_ci_high", "interval_units",
               "wall_ms_median", "gflops", "speedup_vs_16bit",
               "speedup_vs_f32", "latency_vs_harness", "weight_bytes", "weight_bytes_f32",
               "compression", *METER_COLUMNS, *memory, *(f"{c}_spread" for c in memory),
               "memory_warmup_only", "adapter", "page_loads", "rel_error_vs_float", "snr_db", "rel_error_vs_dequantized",
               "fallback", *(["unstable", "instability"] if has_unstable else []),
               *(c.name for c in kind_columns() if c.name not in ("m", "k", "n")),
               "kernel_tolerance", "outputs_file"]
    derived = ("speedup_vs_16bit", "speedup_vs_f32", "latency_vs_harness")
    table = pd.DataFrame.from_records(records, columns=[c for c in columns if c not in derived])
    if table.empty:
        return pd.DataFrame(columns=columns)
    for baseline, column in ((16, "speedup_vs_16bit"), (32, "speedup_vs_f32")):
        base = table[(table["bits_requested"] == baseline) & ~table["precision_plan"].map(is_mixed)]
        base = base.drop_duplicates(list(BASELINE_KEY))[[*BASELINE_KEY, "latency_ms_median"]]
        merged = table[list(BASELINE_KEY)].merge(
            base.rename(columns={"latency_ms_median": "_base"}), on=list(BASELINE_KEY), how="left"
        )
        table[column] = merged["_base"].to_numpy() / table["latency_ms_median"].to_numpy()
    # Set against the harness on one timing source: the headline when both rows have the same,
    # else wall clock (ORT Web gives the page no GPU timestamps; the harness's rows have both).
    harness = table[table["engine"] == "harness"].drop_duplicates(list(PEER_KEY))
    peer = harness[[*PEER_KEY, "latency_ms_median", "wall_ms_median", "timing_source"]].rename(
        columns={"latency_ms_median": "_h_ms", "wall_ms_median": "_h_wall", "timing_source": "_h_src"})
    merged = table[list(PEER_KEY)].merge(peer, on=list(PEER_KEY), how="left")
    same = (merged["_h_src"] == table["timing_source"]).to_numpy()
    ratio = np.where(same, table["latency_ms_median"].to_numpy() / merged["_h_ms"].to_numpy(),
                     table["wall_ms_median"].to_numpy() / merged["_h_wall"].to_numpy())
    table["latency_vs_harness"] = np.where(table["engine"].to_numpy() == "harness", np.nan, ratio)
    table["bits_requested"] = table["bits_requested"].astype("int64")
    for column in KIND_INTEGER_COLUMNS:  # a matmul's 768 stays 768 beside an encoder's blank
        table[column] = pd.to_numeric(table[column], errors="coerce").round().astype("Int64")
    table["bits_executed"] = table["bits_executed"].astype("Int64")
    return _ordered(table)[columns].reset_index(drop=True)


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    """Sweep, browser, workload, ... in order of first appearance; then bits 32 -> 2, and the
    engines and platforms of one bits value side by side."""
    table = table.copy()
    rank_cols = []
    for column in ("sweep", "browser", "precision_mode", "device_type", "workload", "shape"):
        order = {v: i for i, v in enumerate(dict.fromkeys(table[column]))}
        table[f"_rank_{column}"] = table[column].map(order)
        rank_cols.append(f"_rank_{column}")
    table["_rank_bits"] = -table["bits_requested"]
    table["_rank_mixed"] = table["precision_plan"].map(is_mixed)  # a mixed plan after the uniform one
    rank_cols += ["_rank_bits", "_rank_mixed"]
    for column in ("engine", "platform"):
        order = {v: i for i, v in enumerate(dict.fromkeys(table[column]))}
        table[f"_rank_{column}"] = table[column].map(order)
        rank_cols.append(f"_rank_{column}")
    table = table.sort_values(rank_cols, kind="stable")
    return table.drop(columns=rank_cols)


def not_ok_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Every row whose outcome is not ok, one per run, with its reason (never dropped)."""
    columns = ["sweep", "run_id", "repetition", "browser", "engine", "platform", "precision_mode",
               "device_type", "workload", "shape", "bits_requested", "bits_executed", "precision_plan",
               "outcome", "reason"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    bad = rows[rows["outcome"] != "ok"].copy()
    bad["shape"] = [shape_text(r) for _, r in bad.iterrows()]
    if "bits_executed" not in bad:
        bad["bits_executed"] = pd.NA
    bad["bits_executed"] = bad["bits_executed"].astype("Int64")
    bad["bits_requested"] = bad["bits_requested"].astype("Int64")
    bad["run_id"] = bad["run_id"].astype("Int64")
    return bad[columns].reset_index(drop=True)


# ------------------------------------------------------------------------------------- formatting




def _fmt(spec: str, suffix: str = ""):
    def f(value: Any) -> str:
        v = number(value)
        return "" if v is None else f"{v:{spec}}{suffix}"
    return f


def _fmt_int(value: Any) -> str:
    v = number(value)
    return "" if v is None else str(int(v))


def _fmt_flag(value: Any) -> str:
    flag = _truthy(value)
    return "" if flag is None else ("yes" if flag else "no")


def display_summary(summary: pd.DataFrame, *, show_sweep: bool) -> pd.DataFrame:
    """The summary with readable headers and formatted cells (strings)."""
    out = pd.DataFrame(index=summary.index)
    if show_sweep:
        out["sweep"] = summary["sweep"]
    out["browser"] = summary["browser"]
    out["engine"] = summary["engine"]
    out["platform"] = summary["platform"]
    out["ran on"] = summary["executed_on"]
    if (summary["platform"] == "webnn").any() or summary["precision_mode"].nunique() > 1:
        out["mode"] = summary["precision_mode"]
    if (summary["device_type"] != "").any():
        out["device"] = summary["device_type"]
    out["workload"] = summary["workload"]
    out["shape"] = summary["shape"]
    out["bits"] = summary["bits_requested"].map(_fmt_int)
    out["exec bits"] = summary["bits_executed"].map(_fmt_int)
    acts = pd.to_numeric(summary.get("act_bits", pd.Series(32, index=summary.index)), errors="coerce")
    if (acts == 8).any():
        out["activations"] = [f"int8 ({o})" if a == 8 else "float"
                              for a, o in zip(acts, summary.get("observer", [""] * len(summary)))]
    quantizers = summary.get("weight_quant", pd.Series("", index=summary.index)).fillna("")
    if (~quantizers.isin(["", DEFAULT_QUANTIZER])).any():
        out["quantizer"] = quantizers
    if (summary["precision_plan"].fillna("") != "").any():
        out["precision plan"] = summary["precision_plan"]
    out["runs"] = summary["runs"].map(_fmt_int)
    out["timing"] = summary["timing_source"]
    out["steady"] = [steady_text(row) for _, row in summary.iterrows()]
    out["median ms"] = [marked(_fmt(".3f")(row["latency_ms_median"]), row) for _, row in summary.iterrows()]
    out["p10-p90 ms"] = [
        f"{_fmt('.3f')(a)}-{_fmt('.3f')(b)}" if number(a) is not None and number(b) is not None else ""
        for a, b in zip(summary["latency_ms_p10"], summary["latency_ms_p90"])
    ]
    out["median 95% interval (units)"] = [
        _interval_text(lo, hi, units)
        for lo, hi, units in zip(summary["latency_ms_ci_low"], summary["latency_ms_ci_high"],
                                 summary["interval_units"])
    ]
    out["GFLOP/s"] = summary["gflops"].map(_fmt(".3g"))
    out["speed-up vs 16-bit"] = summary["speedup_vs_16bit"].map(_fmt(".2f", "x"))
    out["speed-up vs f32"] = summary["speedup_vs_f32"].map(_fmt(".2f", "x"))
    if (summary["engine"] != "harness").any():
        out["latency vs harness"] = summary["latency_vs_harness"].map(_fmt(".2f", "x"))
    out["weight bytes"] = summary["weight_bytes"].map(fmt_bytes)
    out["compression"] = summary["compression"].map(_fmt(".2f", "x"))
    for column, label in METER_LABELS.items():
        if column in summary and summary[column].notna().any():
            out[label] = summary[column].map(fmt_bytes)
    for column, label in (("proc_rss_peak_bytes", "RSS peak"), ("proc_rss_delta_bytes", "RSS delta"),
                          ("js_heap_bytes", "JS heap")):
        if column in summary:
            spread = summary.get(f"{column}_spread", pd.Series(math.nan, index=summary.index))
            warm = summary.get("memory_warmup_only", pd.Series(False, index=summary.index))
            out[label] = [
                fmt_bytes(v) + (f" (spread {fmt_bytes(sp)})" if number(sp) is not None else "")
                + (" (first run of a session: includes warm-up)" if _truthy(w) else "")
                for v, sp, w in zip(summary[column], spread, warm)
            ]
    out["rel err vs float"] = summary["rel_error_vs_float"].map(_fmt(".2e"))
    out["SNR dB"] = summary["snr_db"].map(_fmt(".1f"))
    out["kernel err (vs dequantized)"] = summary["rel_error_vs_dequantized"].map(_fmt(".1e"))
    out["fallback"] = summary["fallback"]
    if "unstable" in summary:
        why = summary["instability"] if "instability" in summary else pd.Series("", index=summary.index)
        out["unstable"] = [
            f"{_fmt_flag(flag)} ({text})" if _truthy(flag) and isinstance(text, str) and text
            else _fmt_flag(flag)
            for flag, text in zip(summary["unstable"], why)
        ]
    return out.reset_index(drop=True)


def display_not_ok(table: pd.DataFrame, *, show_sweep: bool) -> pd.DataFrame:
    out = pd.DataFrame(index=table.index)
    if show_sweep:
        out["sweep"] = table["sweep"]
    out["run"] = table["run_id"].map(_fmt_int)
    out["rep"] = table["repetition"].map(_fmt_int)
    out["browser"] = table["browser"]
    if (table["engine"] != "harness").any():
        out["engine"] = table["engine"]
    out["platform"] = table["platform"]
    if (table["device_type"] != "").any():
        out["device"] = table["device_type"]
    out["workload"] = table["workload"]
    out["shape"] = table["shape"]
    out["bits"] = table["bits_requested"].map(_fmt_int)
    out["exec bits"] = table["bits_executed"].map(_fmt_int)
    if (table["precision_plan"] != "").any():
        out["precision plan"] = table["precision_plan"]
    out["outcome"] = table["outcome"]
    out["reason"] = table["reason"]
    return out.reset_index(drop=True)


# ------------------------------------------------------------------------------------ environment


def environment_table(sweeps: Sweeps) -> pd.DataFrame:
    """Per sweep and browser: version, adapter, key features, binary (from environment.json)."""
    records: list[dict[str, str]] = []
    for name in sweeps.names:
        env = sweeps.environments.get(name) or {}
        browsers = env.get("browsers") if isinstance(env.get("browsers"), dict) else {}
        seen = list(browsers)
        in_rows = sweeps.rows.loc[sweeps.rows["sweep"] == name, "browser"] if not sweeps.rows.empty else []
        for browser in dict.fromkeys(in_rows):
            if browser not in seen:
                seen.append(browser)
        for browser in seen:
            info = browsers.get(browser) if isinstance(browsers.get(browser), dict) else None
            rec = {"sweep": name, "browser": browser}
            if info is None:
                outcomes = sweeps.rows.loc[(sweeps.rows["sweep"] == name)
                                           & (sweeps.rows["browser"] == browser), "outcome"]
                rec["version"] = ""
                rec["WebGPU adapter"] = f"not launched ({_unique_text(outcomes)})"
                records.append(rec)
                continue
            probe = info.get("probe") if isinstance(info.get("probe"), dict) else {}
            gpu = probe.get("webgpu") if isinstance(probe.get("webgpu"), dict) else {}
            features = set(gpu.get("features") or [])
            rec["version"] = str(info.get("version", ""))
            if gpu.get("available"):
                rec["WebGPU adapter"] = adapter_label(gpu)
                rec["shader-f16"] = "yes" if "shader-f16" in features else "no"
                rec["timestamp-query"] = "yes" if "timestamp-query" in features else "no"
            elif gpu:
                rec["WebGPU adapter"] = f"none: {gpu.get('reason', '')}"
            else:
                rec["WebGPU adapter"] = "(not probed)"
            webnn = info.get("webnn") if isinstance(info.get("webnn"), dict) else {}
            if webnn:
                rec["WebNN"] = ", ".join(
                    f"{d}: {'yes' if (c or {}).get('available') else 'no'}" for d, c in webnn.items()
                )
            elif isinstance(probe.get("webnn"), dict):
                rec["WebNN"] = "present" if probe["webnn"].get("present") else "absent"
            rec["binary"] = str(info.get("binary", ""))
            ran_on = info.get("ran_on") if isinstance(info.get("ran_on"), dict) else {}
            where = str(ran_on.get("where") or "local")
            rec["ran on"] = "this machine" if where == "local" else (
                f"{ran_on.get('node') or 'a node'} ({ran_on.get('platform') or '?'}) via {where}")
            records.append(rec)
    columns = ["sweep", "browser", "version", "ran on", "WebGPU adapter", "shader-f16",
               "timestamp-query", "WebNN", "binary"]
    return pd.DataFrame.from_records([{c: r.get(c, "") for c in columns} for r in records],
                                     columns=columns)


PATH_COLUMNS = ("binary", "WebGPU adapter", "ran on")
"""Environment cells holding paths or slash-joined names: they may wrap after each '/'."""


def env_html(env: pd.DataFrame) -> str:
    """The environment table: every word whole at a laptop's width, a path wrapping after its
    slashes rather than inside a name (the view check measures it)."""
    cells = env.fillna("").astype(str).map(html.escape)
    for column in PATH_COLUMNS:
        if column in cells:
            cells[column] = cells[column].str.replace("/", "/<wbr>", regex=False)
    cells.columns = [html.escape(str(c)) for c in env.columns]
    return html_table(cells, "data env", escape=False)


def machine_lines(sweeps: Sweeps) -> list[str]:
    lines = []
    for name in sweeps.names:
        env = sweeps.environments.get(name) or {}
        m = env.get("machine") if isinstance(env.get("machine"), dict) else {}
        if not m:
            lines.append(f"{name}: no environment.json")
            continue
        lines.append(
            f"{name}: {m['os'] + ', ' if m.get('os') else ''}{m.get('system', '')} {m.get('release', '')} "
            f"{m.get('machine', '')}, {m['cpu_model'] + ', ' if m.get('cpu_model') else ''}"
            f"{m.get('cpu_count', '?')} CPUs, {fmt_bytes(m.get('memory_bytes')) or '?'} RAM, "
            f"Python {m.get('python', '?')}; created {env.get('created_utc', '?')}{_engines(env)}"
            f"{_timing(env)}{_made_by(env)}{_warnings(env)}"
        )
    return lines


def _warnings(env: dict[str, Any]) -> str:
    """'; warnings: ...' (environment.json's: choices the sweep was warned about when it started)."""
    said = [str(w) for w in env.get("warnings") or [] if w]
    return f"; warnings: {'; '.join(said)}" if said else ""


def _engines(env: dict[str, Any]) -> str:
    """'; engine builds: ort 1.30.0, wllama ...' (the builds the pages reported loading)."""
    engines = env.get("engines") if isinstance(env.get("engines"), dict) else {}
    builds = [f"{name} {', '.join(map(str, got))}" for name, got in engines.items() if isinstance(got, list) and got]
    return f"; engine builds: {'; '.join(builds)}" if builds else ""


FIGURE_CLASSES = (("ttft_steady_class", ("decoder",), "the decoders' time to first token"),
                  ("decode_steady_class", ("decoder", "speech"), "decode tokens/s"))
"""Figures judged on a series of their own (series/steps.py): their class column, the kinds whose
rows have it, and the figure's name in the report's tallies."""


def figure_tallies(rows: pd.DataFrame) -> list[str]:
    """The header's tallies of the figures judged apart, over the rows of the kinds that have them."""
    if rows.empty or "kind" not in rows:
        return []
    return [tally_line(rows[rows["kind"].isin(kinds)], column, figure) for column, kinds, figure in FIGURE_CLASSES
            if rows["kind"].isin(kinds).any()]


def _timing(env: dict[str, Any]) -> str:
    """'; timing: steady mode ...' from environment.json (run_spec.protocol_words)."""
    t = env.get("timing") if isinstance(env.get("timing"), dict) else {}
    return f"; timing: {protocol_words(t)}" if t else ""


def _made_by(env: dict[str, Any]) -> str:
    """environment.json's provenance as the end of a machine line ('' for a sweep without it)."""
    made = env.get("provenance") if isinstance(env.get("provenance"), dict) else {}
    commit = str(made.get("commit") or "")
    code = (f"commit {commit[:12]}" + (" with uncommitted changes" if made.get("dirty") else "") if commit
            else f"version {made.get('version') or '?'} (not a git checkout)")
    settings = made.get("environment") if isinstance(made.get("environment"), dict) else {}
    command = " ".join([*(f"{k}={shlex.quote(str(v))}" for k, v in settings.items()), str(made.get("command") or "")])
    return f"; {code}; command: {command}" if made.get("command") else ""


# ---------------------------------------------------------------------------------------- writing

NOTES = (
    "Summary rows aggregate the ok runs of one configuration: median latency is the median of the "
    "repetitions' medians; p10-p90 spans all repetitions' raw timed samples (samples.jsonl). "
    "The 95% interval is that of the typical latency from the configuration's independent units, "
    "each unit's median one observation (Student's t on their logarithms): its repetitions (rounds, "
    "each in fresh browser sessions) when it has several, else its page loads; so it includes the "
    "spread between them, the noise a comparison between sweeps faces. It says which units and "
    "how many; a single one has no interval. "
    "GFLOP/s = 2*M*K*N / median latency (whole models, whose shape reads 'batch x sequence "
    "tokens': the FLOPs of one forward pass, linear layers and attention, / median latency). Speed-ups are the 16-bit (or float32) row's median latency "
    "divided by this row's, for the same sweep, browser, engine, platform and workload (blank when "
    "that row has no ok run). Latency vs harness (engines other than the harness, e.g. ONNX Runtime "
    "Web) is this row's median over the harness row's for the same browser, platform, workload and "
    "bits, on one timing source (GPU timestamps when both rows have them, else wall clock from "
    "submit to completion): above 1x the harness is faster. Compression = float32 weight bytes / weight bytes the kernel reads (packed "
    "weights + scales + zero points). Relative error vs float compares with the float64 result on "
    "the original weights (what quantization costs); the kernel error compares with the float64 "
    "result on the dequantized weights (is the kernel right). A fallback means the browser ran "
    "other bits than requested, or an engine ran the work on another provider than asked ('ran on'); "
    "the reason says why."
)


MEMORY_NOTES = (
    "How each memory figure is obtained. Weight memory (exact): the bytes of the weights the "
    "kernel or graph was handed (packed values + scales + zero points), against the float32 "
    "bytes of the same matrix. GPU peak, wasm peak, WebNN constants (measured, exact, every "
    "engine alike): web/meter.js counts, around the engine's own calls, the WebGPU buffers live at "
    "once (created until destroyed or collected), the WebAssembly memories' bytes and the bytes "
    "handed to WebNN as constants; the largest over the run's page loads. Process memory (measured, noisy): the browser's whole process "
    "tree sampled with psutil every 100 ms during the run (RSS, USS, PSS); 'delta' is the peak "
    "over the tree at rest before the page loaded. The first run after a browser starts also "
    "pays for the browser warming up, so it is left out of the process-memory figures when a "
    "configuration has other runs; the plot starts at zero and shows the spread over runs, so a "
    "difference inside that spread is not a trend. JS heap: performance.memory where the browser "
    "has it."
)


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:100%;overflow-wrap:break-word}"
    "@media (max-width:600px){body{margin:0.6em}}"
    "div.scroll{overflow-x:auto;max-width:100%;margin:0.5em 0 1.5em}"
    "table.data{border-collapse:collapse;font-size:12px}"
    # a word is never broken to squeeze a column: a table wider than the page scrolls in its box,
    # and only a word longer than a cell's widest (a path, a long reason) wraps inside itself
    "table.data th,table.data td{border:1px solid #ccc;padding:3px 6px;text-align:left;"
    "vertical-align:top;max-width:24em;overflow-wrap:break-word;hyphens:none}"
    "table.data th{background:#f0f0f0}table.data tr:nth-child(even) td{background:#fafafa}"
    "table.data.headline{font-size:13px}table.data.headline th,table.data.headline td{max-width:none;overflow-wrap:normal}"
    "table.data.headline span.w{white-space:nowrap}"
    "table.data.detail th,table.data.detail td{white-space:nowrap;max-width:none;overflow-wrap:normal}"
    "table.data.detail td:last-child{white-space:normal;min-width:16em}"
    "table.data.env td{overflow-wrap:normal;max-width:32em}"
    "table.data tr td.better{background:#dff3df}table.data tr td.worse{background:#f8dede}"
    "table.data tr td.same{background:#eeeeee}"
    "ul.picks{margin:0.3em 0 0.6em;padding-left:1.3em;max-width:70em}ul.picks li{margin:0.2em 0}"
    "p.bar{margin:0.2em 0;font-size:14px}section.glance h3{margin:1em 0 0.3em}"
    "ol.footnotes{font-size:12px;color:#444;max-width:70em}"
    "img{max-width:100%;height:auto;border:1px solid #ddd;margin:0.5em 0 1.5em}"
    "p.note{max-width:70em;font-size:13px;color:#444}"
    "p.caveat{max-width:70em;padding:0.4em 0.7em;border-left:4px solid #d08a00;background:#fff6e0}"
    "details{margin:0.5em 0 1.5em}details>summary{cursor:pointer;font-weight:600}"
)
"""The report page's one style sheet."""


def _context_line(sweeps: Sweeps) -> str:
    """'From 1 sweep, 50 runs: 50 ok.'"""
    count = len(sweeps.names)
    rows = sweeps.rows
    return f"From {count} sweep{'s' if count != 1 else ''}, {len(rows)} runs: {outcome_counts(rows)}."


def adapter_caveat(rows: pd.DataFrame) -> str:
    """The first screen's warning when WebGPU ran on a fallback (software) adapter: which
    browsers' adapters, and how many of the ok WebGPU runs ('' when none did)."""
    if rows.empty or "adapter" not in rows or "platform" not in rows:
        return ""
    gpu = rows[(rows["platform"] == "webgpu") & (rows["outcome"] == "ok")]
    soft = gpu[gpu["adapter"].fillna("").astype(str).str.endswith(FALLBACK_MARK)]
    if soft.empty:
        return ""
    which = "; ".join(f"{browser}: {adapter.removesuffix(FALLBACK_MARK)}"
                      for (browser, adapter), _ in soft.groupby(["browser", "adapter"], sort=True))
    share = (("The" if len(gpu) == 1 else f"All {len(gpu)}") if len(soft) == len(gpu)
             else f"{len(soft)} of the {len(gpu)}")
    return (f"Software adapter: {share} ok WebGPU run{'s' if len(gpu) != 1 else ''} here ran on a fallback adapter "
            f"({which}), which runs WebGPU on the CPU. Compare these figures with each other, not with a "
            f"GPU's; settings it affects say 'fallback adapter'.")


def promise_caveat(rows: pd.DataFrame) -> str:
    """The first screen's warning when a row ran an ONNX file whose name promises a precision its
    weight matmuls do not hold (the ``precision_promise`` column; '' when none did)."""
    if rows.empty or "precision_promise" not in rows:
        return ""
    broken = rows[rows["precision_promise"].fillna("").astype(str) != ""]
    if broken.empty:
        return ""
    files = "; ".join(f"{model}: {flag}" for (model, flag), _ in broken.groupby(["model", "precision_promise"]))
    return (f"Precision not as named: {len(broken)} row{'s' if len(broken) != 1 else ''} ran ONNX files whose "
            f"name promises a precision their nodes do not hold ({files}).")


def outcome_counts(rows: pd.DataFrame) -> str:
    if rows.empty:
        return "no rows"
    counts = rows["outcome"].value_counts(sort=False)
    return ", ".join(f"{count} {outcome}" for outcome, count in counts.items())


def write_report(sweeps: Sweeps, out_dir: Path, histories: Sequence[Any] = ()) -> ReportFiles:
    """``histories``: HistoryComparison (analysis/history.py) of each history to show, each in a
    History section with its plots."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = sweeps.rows
    show_sweep = len(sweeps.names) > 1
    summary = summary_table(rows, sweeps.samples)
    not_ok = not_ok_table(rows)
    summary_csv = out_dir / "summary.csv"
    not_ok_csv = out_dir / "not_ok.csv"
    summary.to_csv(summary_csv, index=False)
    not_ok.to_csv(not_ok_csv, index=False)
    # Each kind's part of the report (report/sections.py): its plots, and its own section or none.
    plots: list[tuple[str, Path]] = []  # under the shared "Plots" heading
    all_plots: list[Path] = []
    kind_md: list[str] = []
    kind_html: list[str] = []
    kinds = list(dict.fromkeys(rows["kind"])) if not rows.empty else []
    for kind in kinds:
        part = SECTIONS.get(kind)
        if part is None:
            continue
        own_summary = summary[summary["kind"] == kind] if not summary.empty else summary
        drawn = part.plots(own_summary, out_dir / "plots", show_sweep)
        all_plots += drawn
        titled = [(part.plot_titles.get(p.stem, p.stem), p) for p in drawn]
        if part.section is None:
            plots += titled
            continue
        md_part, html_part = part.section(rows[rows["kind"] == kind], own_summary, sweeps.layers, show_sweep,
                                          [(title, p.name) for title, p in titled])
        kind_md += md_part
        kind_html += html_part
    own_sections = [k for k in kinds if k in SECTIONS and SECTIONS[k].section is not None]
    env = environment_table(sweeps)
    env = env.loc[:, [c for c in env.columns if c == "sweep" and show_sweep or c != "sweep"]]
    env = env.loc[:, [c for c in env.columns if (env[c] != "").any() or c in ("browser", "version")]]
    shown_summary = display_summary(summary, show_sweep=show_sweep)
    shown_not_ok = display_not_ok(not_ok, show_sweep=show_sweep)
    created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    sweep_lines = []
    for name, directory in zip(sweeps.names, sweeps.directories):
        sub = rows[rows["sweep"] == name] if not rows.empty else rows
        sweep_lines.append(f"{name} ({directory}): {len(sub)} rows: {outcome_counts(sub)}")
    if summary.empty:
        plot_note = "No ok runs in these folders: no summary figures and no plots."
    elif not plots and summary["kind"].isin(own_sections).all():
        titles = " and ".join(SECTIONS[k].title for k in own_sections)
        plot_note = f"Only runs with a section of their own: their plots are in the {titles} section."
    elif not plots:
        plot_note = "The ok runs have no plottable figures: no plots."
    else:
        plot_note = ""
    memory_present = [c for c in MEMORY_COLUMNS if c in summary]
    memory_note = (
        "Process memory columns: " + ", ".join(memory_present) if memory_present
        else "No process memory figures in these folders (proc_rss_peak_bytes, "
             "proc_rss_delta_bytes, js_heap_bytes absent or empty)."
    )

    glances = {kind: part.glance for kind, part in SECTIONS.items()}
    how_to_read = [*glance_notes(summary, glances), NOTES, MEMORY_NOTES, memory_note]

    steady_tally = " ".join(filter(None, [tally_line(rows), *figure_tallies(rows)]))
    steady_md, steady_html, steady_plots = steady_section(rows, sweeps.samples, out_dir / "plots", show_sweep)
    all_plots += steady_plots
    summary_notes = [MARK_NOTE] if any_marked(summary) else []

    # Markdown
    caveats = [c for c in (adapter_caveat(rows), promise_caveat(rows)) if c]
    md = ["# Precision benchmark report", "", f"Generated {created}. {_context_line(sweeps)}", "",
          *([steady_tally, ""] if steady_tally else []),
          *(line for c in caveats for line in (f"**{c}**", "")),
          "## At a glance: which precision to pick, and what it costs", "", glance_markdown(summary, glances), "",
          *how_to_read_markdown(how_to_read), "## Sweeps", ""]
    md += [f"- {line}" for line in sweep_lines]
    md += ["", "## Environment", ""]
    md += [f"- {line}" for line in machine_lines(sweeps)]
    md += ["", markdown_table(env) if not env.empty else "(no browsers recorded)", ""]
    md += ["## Summary (ok runs)", ""]
    md += [markdown_table(shown_summary) if not summary.empty else "No ok runs.", ""]
    md += [line for note in summary_notes for line in (note, "")]
    md += ["## Runs without a measurement (not ok)", ""]
    md += [markdown_table(shown_not_ok) if not not_ok.empty else "Every run was ok.", ""]
    md += kind_md
    ship_md, ship_html = ship_section(ship_files(sweeps.directories, sweeps.names, summary, out_dir))
    md += ship_md
    md += steady_md
    sensitivity_md, sensitivity_html = sensitivity_section(list(sweeps.directories), out_dir / "plots")
    md += sensitivity_md
    builds_md, builds_html = builds_section(sweeps.directories, sweeps.names)
    md += builds_md
    activations_md, activations_html = activation_section(summary)
    md += activations_md
    memory_md, memory_html = memory_section(summary)
    md += memory_md
    history_html: list[str] = []
    for i, judged in enumerate(histories):
        history_md, history_parts, drawn = history_section(judged, out_dir / f"history-plots-{i + 1}")
        md += history_md
        history_html += history_parts
        all_plots += drawn
    md += ["## Plots", ""]
    if plot_note:
        md += [plot_note, ""]
    for title, p in plots:
        md += [f"### {title}", "", f"![{p.stem}](plots/{p.name})", ""]
    markdown_path = out_dir / "report.md"
    markdown_path.write_text("\n".join(md))

    # HTML (self-contained apart from the PNG files next to it)
    e = html.escape
    parts = [
        "<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        "<title>Precision benchmark report</title>", f"<style>{STYLE}</style>",
        "</head><body>", "<h1>Precision benchmark report</h1>",
        f"<p>Generated {e(created)}. {e(_context_line(sweeps))}</p>",
        *([f"<p class=\"steady\">{e(steady_tally)}</p>"] if steady_tally else []),
        *(f"<p class=\"caveat\">{e(c)}</p>" for c in caveats),
        "<h2 id=\"at-a-glance\">At a glance: which precision to pick, and what it costs</h2>",
        glance_html(summary, glances),
        how_to_read_html(how_to_read),
        "<h2>Sweeps</h2>", "<ul>", *(f"<li>{e(line)}</li>" for line in sweep_lines), "</ul>",
        "<h2>Environment</h2>", "<ul>", *(f"<li>{e(line)}</li>" for line in machine_lines(sweeps)),
        "</ul>", env_html(env) if not env.empty else "<p>(no browsers recorded)</p>",
        "<h2 id=\"summary\">Summary (ok runs)</h2>",
        "<p class=\"note\">One row per configuration with every column; the table scrolls sideways "
        "in its own box. The same figures are in summary.csv next to this page.</p>",
        html_table(shown_summary, "data detail") if not summary.empty else "<p>No ok runs.</p>",
        *(f"<p class=\"note\">{e(note)}</p>" for note in summary_notes),
        "<h2 id=\"not-ok\">Runs without a measurement (not ok)</h2>",
        html_table(shown_not_ok) if not not_ok.empty else "<p>Every run was ok.</p>",
        *kind_html,
        *ship_html,
        *steady_html,
        *sensitivity_html,
        *builds_html,
        *activations_html,
        *memory_html,
        *history_html,
        "<h2>Plots</h2>",
    ]
    if plot_note:
        parts.append(f"<p>{e(plot_note)}</p>")
    for title, p in plots:
        parts += [f"<h3>{e(title)}</h3>",
                  f"<a href=\"plots/{e(p.name)}\"><img src=\"plots/{e(p.name)}\" alt=\"{e(title)}\"></a>"]
    parts += ["</body></html>", ""]
    html_path = out_dir / "report.html"
    html_path.write_text("\n".join(parts))
    return ReportFiles(markdown_path, html_path, all_plots, summary_csv, not_ok_csv)


def build_report(result_dirs: list[Path], out_dir: Path) -> ReportFiles:
    """Load every results folder and write report.md, report.html, plots/*.png and the CSVs."""
    return write_report(load_sweeps(result_dirs), Path(out_dir))

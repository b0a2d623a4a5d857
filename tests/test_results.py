"""Unit tests for fixed_web_platform.results: rows reach disk at once, every file stays loadable."""

from __future__ import annotations

import csv
import dataclasses
import datetime as real_dt
import json
import math
import platform
import shlex
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.plan import RunSpec
from fixed_web_platform.results import writer as results
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter, new_results_dir
from fixed_web_platform.vocabulary import (
    SCHEMA_VERSION,
    BrowserName,
    Outcome,
    Platform,
    PrecisionMode,
)
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

REQUIRED_COLUMNS = (
    "schema_version browser browser_version platform adapter workload m k n bits_requested "
    "bits_executed weight_format compute_dtype block_size outcome reason latency_ms_median "
    "latency_ms_p10 latency_ms_p90 latency_cv n_samples timing_source gflops weight_bytes "
    "rel_error_vs_float max_abs_error_vs_float snr_db cosine_vs_float rel_error_vs_dequantized "
    "precision_mode"
).split()


def _run(run_id: int = 0, bits: int = 4) -> RunSpec:
    return RunSpec(run_id=run_id, browser=BrowserName.CHROME, platform=Platform.WEBGPU,
                   workload=Workload("w", 2, 64, 16), bits=bits, block_size=32, repetition=0,
                   precision_mode=PrecisionMode.STANDARD, seed=0)


def _strict_loads(text: str) -> object:
    def reject(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=reject)


def _csv_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_columns_include_every_documented_name() -> None:
    columns = ResultRow.columns()
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    assert missing == []
    assert len(columns) == len(set(columns))


def test_without_measurement_row() -> None:
    row = ResultRow.without_measurement(_run(run_id=5, bits=4), Outcome.UNAVAILABLE, "not here")
    assert (row.run_id, row.outcome, row.reason) == (5, "unavailable", "not here")
    assert (row["m"], row["k"], row["n"], row.bits_requested, row.block_size) == (2, 64, 16, 4, 32)
    assert row.kind == "matmul" and row["model"] is None
    assert row.bits_executed is None and row.latency_ms_median is None
    assert ResultRow.without_measurement(_run(bits=32), Outcome.FAILED, "x").block_size == 0


def test_csv_has_header_then_each_row_as_soon_as_added(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path / "out")
    header, rows = _csv_rows(writer.csv_path)
    assert header == ResultRow.columns()
    assert rows == []

    failed = ResultRow.without_measurement(_run(0), Outcome.FAILED, "boom, with a comma\nand a newline")
    writer.add(failed)
    _, rows = _csv_rows(writer.csv_path)
    assert len(rows) == 1
    assert rows[0]["outcome"] == "failed"
    assert rows[0]["reason"] == "boom, with a comma and a newline"  # one line in the CSV...
    line = json.loads(writer.samples_path.read_text().splitlines()[0])
    assert line["reason"] == "boom, with a comma\nand a newline"  # ...whole in samples.jsonl
    assert rows[0]["browser"] == "chrome"
    assert rows[0]["latency_ms_median"] == ""  # None is an empty cell

    ok = dataclasses.replace(
        ResultRow.without_measurement(_run(1), Outcome.OK, ""),
        bits_executed=4, latency_ms_median=1.5, latency_cv=math.nan, n_samples=1,
    )
    writer.add(ok)
    _, rows = _csv_rows(writer.csv_path)
    assert [r["run_id"] for r in rows] == ["0", "1"]
    assert rows[1]["bits_executed"] == "4"
    assert float(rows[1]["latency_ms_median"]) == 1.5
    assert rows[1]["latency_cv"] == "nan"
    assert rows[1]["schema_version"] == str(SCHEMA_VERSION)


def test_samples_jsonl_is_strict_json_even_with_nan_and_inf(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path)
    assert writer.samples_path.read_text() == ""
    row = ResultRow.without_measurement(_run(3), Outcome.OK, "")
    writer.add(row, {
        "outcome": row.outcome,
        "wall_ms": [1.0, math.nan, math.inf],
        "gpu_ms": (np.float64(-math.inf), 2.0),
        "cold_ms": math.nan,
        "nested": {"x": math.inf},
    })
    writer.add(ResultRow.without_measurement(_run(4), Outcome.FAILED, "x"))  # still a line: its reason
    writer.add(ResultRow.without_measurement(_run(5), Outcome.FAILED, "y"), {"outcome": "failed"})

    lines = writer.samples_path.read_text().splitlines()
    assert len(lines) == 3  # every row has its samples line
    first = _strict_loads(lines[0])
    assert first["schema_version"] == SCHEMA_VERSION
    assert first["run_id"] == 3
    assert first["outcome"] == "ok"
    assert first["wall_ms"] == [1.0, None, "inf"]
    assert first["gpu_ms"] == ["-inf", 2.0]
    assert first["cold_ms"] is None
    assert first["nested"] == {"x": "inf"}
    assert [_strict_loads(line)["run_id"] for line in lines[1:]] == [4, 5]


def test_environment_json(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path)
    env = _strict_loads(writer.environment_path.read_text())
    assert env["schema_version"] == SCHEMA_VERSION
    assert env["browsers"] == {}
    machine = env["machine"]
    assert machine["system"] == platform.uname().system
    assert machine["python"] == platform.python_version()
    assert isinstance(machine["cpu_count"], int) and machine["cpu_count"] >= 1
    assert isinstance(machine["memory_bytes"], int) and machine["memory_bytes"] > 0
    assert machine["packages"]["numpy"] == np.__version__


def test_environment_json_says_what_made_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FWP_TJS_ORT", "harness")  # a setting from the environment is part of the command
    monkeypatch.setenv("HOME_NOT_A_SETTING", "x")
    env = _strict_loads(ResultWriter(tmp_path / "sweep").environment_path.read_text())
    made = env["provenance"]
    # the process's own command line (a test worker's, under pytest-xdist: no "pytest" in it)
    assert made["command"] == shlex.join(sys.orig_argv) and "python" in made["command"]
    assert made["environment"]["FWP_TJS_ORT"] == "harness" and "HOME_NOT_A_SETTING" not in made["environment"]
    head = subprocess.run(["git", "-C", str(results.PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a checkout (CI's clean clone is one)
        assert made["commit"] == head.stdout.strip() and isinstance(made["dirty"], bool)


def test_provenance_tells_a_dirty_tree_and_a_folder_that_is_no_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("one")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    clean = results.provenance(repo.resolve())
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    (repo / "untracked.txt").write_text("not the project's")
    assert results.provenance(repo.resolve())["dirty"] is False
    (repo / "a.txt").write_text("two")
    assert results.provenance(repo.resolve()) == clean | {"dirty": True}
    inside = repo / "sub"
    inside.mkdir()
    assert results.provenance(inside.resolve())["commit"] == ""  # not the checkout's own root: no claim
    assert results.provenance(inside.resolve())["dirty"] is None


def test_record_browser_merges_and_is_written(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path)
    writer.record_browser("chrome", {"version": "150.0", "binary": "/a"})
    writer.record_browser("chrome", {"probe": {"score": math.nan}, "binary": "/b"})
    writer.record_browser("firefox", {"version": "128"})
    env = _strict_loads(writer.environment_path.read_text())
    assert env["browsers"] == {
        "chrome": {"version": "150.0", "binary": "/b", "probe": {"score": None}},
        "firefox": {"version": "128"},
    }


def test_writer_on_reused_folder_keeps_samples_consistent_with_csv(tmp_path: Path) -> None:
    first = ResultWriter(tmp_path)
    first.add(ResultRow.without_measurement(_run(0), Outcome.FAILED, "old"), {"outcome": "failed"})
    second = ResultWriter(tmp_path)
    _, rows = _csv_rows(second.csv_path)
    assert rows == []
    assert second.samples_path.read_text() == ""


class _FrozenDatetime(real_dt.datetime):
    @classmethod
    def now(cls, tz: real_dt.tzinfo | None = None) -> real_dt.datetime:
        return real_dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=tz)


def test_new_results_dir_never_reuses_a_folder_within_one_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "dt", types.SimpleNamespace(datetime=_FrozenDatetime, UTC=real_dt.UTC))
    seen = []
    for _ in range(3):
        path = new_results_dir("my run", root=tmp_path)
        assert path.is_dir() and not any(path.iterdir())  # created fresh and empty
        assert path.parent == tmp_path
        seen.append(path.name)
    assert len(set(seen)) == 3
    assert seen[0] == "20250102T030405Z_my-run"


def test_new_results_dir_label_cannot_escape_root(tmp_path: Path) -> None:
    path = new_results_dir("../../etc/x y", root=tmp_path)
    assert path.parent == tmp_path
    assert "/" not in path.name and ".." not in path.name
    assert new_results_dir("", root=tmp_path).name.endswith("_sweep")

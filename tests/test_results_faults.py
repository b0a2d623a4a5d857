"""Results folders under faults: torn files, full disks, runs to retry. A row never exists
without its samples, nothing torn survives a resume, and a write error is one line."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fixed_web_platform import sweep
from fixed_web_platform.cli import main as cli
from fixed_web_platform.plan import TimingConfig, build_plan, save_plan
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter, write_atomically
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads import MatmulWorkload

W = MatmulWorkload("w", 2, 64, 16)
PLAN = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], [32, 16, 8, 4, 2])


def _folder(tmp_path: Path, outcomes: list[Outcome]) -> ResultWriter:
    writer = ResultWriter(tmp_path)
    save_plan(tmp_path, PLAN, TimingConfig())
    for run, outcome in zip(PLAN, outcomes):
        writer.add(ResultRow.without_measurement(run, outcome, f"{outcome}\nsecond line"), {"outcome": outcome})
    return writer


def test_a_torn_row_with_a_multiline_reason_is_repaired_by_the_csv_parser(tmp_path: Path) -> None:
    writer = _folder(tmp_path, [Outcome.OK])
    row = ResultRow.without_measurement(PLAN[1], Outcome.FAILED, "x")
    cells = [str(v) for v in row.__dict__.values()]
    torn = ",".join(cells[:-5]) + ',"WebGPU error:\nline two'  # cut inside a quoted, multi-line field
    with writer.csv_path.open("a", newline="") as f:
        f.write(torn)
    resumed = ResultWriter(tmp_path, resume=True)
    resumed.add(ResultRow.without_measurement(PLAN[2], Outcome.OK, ""), {"outcome": "ok"})
    rows = pd.read_csv(writer.csv_path)
    assert list(rows["run_id"]) == [0, 2]
    assert list(rows["reason"].fillna("")) == ["ok second line", ""]


def test_a_row_whose_samples_line_is_torn_or_missing_is_dropped_and_run_again(tmp_path: Path) -> None:
    writer = _folder(tmp_path, [Outcome.OK, Outcome.OK])
    # a full disk: run 2's samples line made it but its row did not; run 1's samples line is torn
    lines = writer.samples_path.read_text().splitlines(keepends=True)
    writer.samples_path.write_text(lines[0] + lines[1][:10] + "\n" + json.dumps({"run_id": 2}) + "\n")
    plan, remaining, _, resumed = sweep.resume(tmp_path)
    assert resumed.done_run_ids() == {0}
    assert [r.run_id for r in remaining] == [1, 2, 3, 4]
    assert [json.loads(x)["run_id"] for x in resumed.samples_path.read_text().splitlines()] == [0]


def test_retry_failed_runs_again_only_infrastructure_failures(tmp_path: Path) -> None:
    _folder(tmp_path, [Outcome.OK, Outcome.CRASH, Outcome.FAILED, Outcome.TIMEOUT, Outcome.ERROR])
    _, remaining, _, writer = sweep.resume(tmp_path)
    assert remaining == []
    _, remaining, _, writer = sweep.resume(tmp_path, retry_failed=True)
    assert [r.run_id for r in remaining] == [1, 3, 4]
    assert writer.outcomes() == {0: "ok", 2: "failed"}
    assert len(writer.samples_path.read_text().splitlines()) == 2


def test_an_interrupted_atomic_write_leaves_the_old_file_whole(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "plan.json"
    write_atomically(path, "old")
    real = Path.write_text

    def full_disk(self, text, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        real(self, text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError):
        write_atomically(path, "new content")
    monkeypatch.undo()
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_an_output_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    target = tmp_path / "a-file"
    target.write_text("")
    assert cli.main(["--output-dir", str(target), "--bits", "8", "--browser", "chrome"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "a-file" in err[0]


def test_a_write_error_mid_sweep_is_one_line_and_exit_1(tmp_path: Path, monkeypatch, capsys) -> None:
    async def disk_full(plan, writer, options):  # noqa: ANN001, ANN202
        writer.add(ResultRow.without_measurement(plan[0], Outcome.OK, ""), {"outcome": "ok"})
        raise OSError(errno.ENOSPC, "No space left on device", str(writer.csv_path))

    monkeypatch.setattr(sweep, "execute", disk_full)
    out = tmp_path / "sweep"
    assert cli.main(["--output-dir", str(out), "--bits", "8", "--browser", "chrome", "--no-report"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "--resume" in err[0]
    assert ResultWriter(out, resume=True).done_run_ids() == {0}  # what finished is kept


def _corrupt(folder: Path, how: str) -> None:
    if how == "environment-is-a-list":
        (folder / "environment.json").write_text("[1, 2]")
    elif how == "samples-line-is-a-list":
        (folder / "samples.jsonl").write_text("[1, 2]\n")
    elif how == "samples-not-numbers":
        (folder / "samples.jsonl").write_text(json.dumps({"run_id": 0, "wall_ms": ["a", "b"]}) + "\n")
    else:
        rows = pd.read_csv(folder / "results.csv", dtype=object)
        if how == "empty-run-id":
            rows.loc[0, "run_id"] = None
        elif how == "m-is-four":
            rows.loc[0, "m"] = "four"
        elif how == "unknown-outcome":
            rows.loc[0, "outcome"] = "great"
        rows.to_csv(folder / "results.csv", index=False)


@pytest.mark.parametrize("how", ["environment-is-a-list", "samples-line-is-a-list", "samples-not-numbers",
                                 "empty-run-id", "m-is-four", "unknown-outcome"])
@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_refuse_a_broken_folder_in_one_line(tmp_path: Path, capsys, how: str,
                                                               command: str) -> None:
    good = tmp_path / "good"
    _folder(good, [Outcome.OK, Outcome.FAILED])
    bad = tmp_path / "bad"
    _folder(bad, [Outcome.OK, Outcome.FAILED])
    _corrupt(bad, how)
    argv = [command, str(bad)] if command == "report" else [command, str(good), str(bad)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "Traceback" not in err[0], err


def test_a_folder_another_live_sweep_writes_to_is_refused(tmp_path: Path, capsys) -> None:
    _folder(tmp_path, [Outcome.OK])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / ".lock").write_text(f"{other.pid}\n")
        assert cli.main(["--resume", str(tmp_path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "being written by another sweep" in err[0]
    finally:
        other.kill()
        other.wait()
    _, remaining, _, _ = sweep.resume(tmp_path)  # the holder is gone: its lock is taken over
    assert [r.run_id for r in remaining] == [1, 2, 3, 4]


def test_a_shape_that_cannot_fit_this_machine_is_refused_at_planning(capsys) -> None:
    assert cli.main(["--shape", "100000x100000x100000", "--only-shapes", "--bits", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GiB of host memory" in err[0]


def test_capabilities_refuses_an_unwritable_folder_before_launching(tmp_path: Path, capsys, monkeypatch) -> None:
    from fixed_web_platform.cli import capabilities

    async def no_launch(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a browser was launched before the folder was checked")

    monkeypatch.setattr(capabilities, "collect", no_launch)
    target = tmp_path / "a-file"
    target.write_text("")
    assert cli.main(["capabilities", "--browser", "chrome", "--output-dir", str(target / "sub")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot write to")

"""Sweeps through a real Selenium Grid 4 (standalone, the npm jar run by Java 17, started by
scripts/grid.sh) whose node runs the Debian Chromium with the Debian ChromeDriver: the same rows
as a local run, liveness and memory without a local process, --parallel 2, and what the grid
cannot give (Firefox without a geckodriver on its node)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fixed_web_platform.analysis.compare import MetadataMismatch, compare
from fixed_web_platform.results.reader import load

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
DEBIAN_CHROMIUM = "/usr/bin/chromium"
SWEEP = ["--platform", "webgpu", "--only-shapes", "--shape", "4x64x32", "--warmup", "1",
         "--min-iterations", "3", "--min-time", "0", "--timeout", "90"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def grid() -> str:
    port = str(_free_port())
    started = subprocess.run(["bash", "scripts/grid.sh", "start", port], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    if started.returncode != 0:
        pytest.fail(f"scripts/grid.sh start failed (run scripts/setup.sh first): {started.stderr.strip()}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", "scripts/grid.sh", "stop", port], cwd=ROOT, timeout=60)


def _sweep(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "run_real_webgpu_webnn.py", *SWEEP, *args,
                           "--no-report", "--output-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def _rows(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "results.csv", keep_default_na=False)


CONFIG = ["browser", "engine", "platform", "m", "k", "n", "bits_requested", "block_size"]


def test_a_sweep_through_the_grid_gives_the_rows_of_a_local_one(grid: str, tmp_path: Path) -> None:
    local = _sweep(tmp_path / "local", "--browser", "chrome", "--bits", "32", "4",
                   "--browser-binary", DEBIAN_CHROMIUM)
    remote = _sweep(tmp_path / "grid", "--browser", "chrome", "--bits", "32", "4", "--remote", grid)
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    a, b = _rows(tmp_path / "local"), _rows(tmp_path / "grid")
    assert a[CONFIG].to_dict("records") == b[CONFIG].to_dict("records")
    for rows in (a, b):
        assert list(rows["outcome"]) == ["ok", "ok"]
        assert list(rows["bits_executed"]) == [32, 4]
        assert (rows["rel_error_vs_dequantized"].astype(float) <= rows["kernel_tolerance"].astype(float)).all()
        assert (rows["concurrent_sessions"] == 1).all()
    assert a["browser_version"].iloc[0] == b["browser_version"].iloc[0]  # both Debian's Chromium
    # What ran the browser: this machine, or the grid's node as its capabilities said
    assert set(a["ran_on"]) == {"local"}
    assert all(r.endswith(f"via {grid}") and "(linux)" in r for r in b["ran_on"])
    assert a["proc_memory_source"].str.startswith("psutil").all()
    assert a["proc_rss_peak_bytes"].astype(float).gt(0).all()
    assert b["proc_memory_source"].str.startswith("unavailable: the browser runs on a remote node").all()
    assert (b["proc_rss_peak_bytes"] == "").all()
    env = json.loads((tmp_path / "grid" / "environment.json").read_text())["browsers"]["chrome"]
    assert env["ran_on"]["where"] == grid and env["ran_on"]["platform"] == "linux"
    assert env["driver_kind"] == "remote" and env["version"].startswith("156.")
    # compare tells the two set-ups apart by what ran the browser
    with pytest.raises(MetadataMismatch, match="chrome ran on: where"):
        compare(load(tmp_path / "local"), load(tmp_path / "grid"))


def test_parallel_sessions_through_the_grid_finish_every_run(grid: str, tmp_path: Path) -> None:
    out = tmp_path / "parallel"
    done = _sweep(out, "--browser", "chrome", "--bits", "32", "8", "4", "2", "--remote", grid,
                  "--parallel", "2")
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert sorted(rows["run_id"]) == [0, 1, 2, 3]
    assert (rows["outcome"] == "ok").all()
    assert sorted(rows["bits_executed"]) == [2, 4, 8, 32]
    assert rows["concurrent_sessions"].max() == 2  # the two sessions did overlap
    assert (rows["concurrent_sessions"] >= 1).all()
    again = subprocess.run([sys.executable, "run_real_webgpu_webnn.py", "--resume", str(out),
                            "--remote", grid, "--parallel", "2", "--no-report"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "4 of 4 runs already on disk, 0 to go" in again.stdout


def test_a_browser_the_grid_does_not_offer_is_unavailable(grid: str, tmp_path: Path) -> None:
    done = _sweep(tmp_path / "ff", "--browser", "firefox", "--bits", "4", "--remote", grid)
    assert done.returncode == 0, done.stderr  # unavailable is not a failure of the sweep
    row = _rows(tmp_path / "ff").iloc[0]
    assert row["outcome"] == "unavailable"
    assert f"the grid at {grid} has no node offering firefox (its nodes offer: chrome)" in row["reason"]


def test_an_endpoint_that_does_not_answer_is_unavailable_at_once(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    done = _sweep(tmp_path / "none", "--browser", "chrome", "--bits", "4", "--remote", url)
    assert done.returncode == 0, done.stderr
    row = _rows(tmp_path / "none").iloc[0]
    assert row["outcome"] == "unavailable"
    assert f"the WebDriver endpoint {url} does not answer" in row["reason"]

"""Faults a hostile-but-fair user meets, in real browsers: another Firefox on Marionette's default
port, SIGTERM mid-sweep, a driver that dies. After each, nothing of ours is left running."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from conftest import require_browser

from fixed_web_platform.browsers import launch, resolve
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads import MatmulWorkload

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent


def _other_firefox_on_default_port():  # noqa: ANN202
    """A Firefox that is not ours, holding Marionette's default port 2828."""
    logging.getLogger("mozversion").setLevel(logging.WARNING)
    from marionette_driver.marionette import Marionette

    resolved = resolve(BrowserName.FIREFOX)
    other = Marionette(bin=str(resolved.binary), port=2828, headless=True, startup_timeout=60)
    other.start_session()
    return other


def test_a_firefox_on_the_default_port_is_not_mistaken_for_ours() -> None:
    require_browser(BrowserName.FIREFOX)
    other = _other_firefox_on_default_port()
    other_pid = other.session_capabilities["moz:processID"]
    try:
        ours = launch(resolve(BrowserName.FIREFOX))
        try:
            assert ours.pid != other_pid and ours.is_alive()
            assert "marionette.port=2828" not in ours.launch_args
            ours.open("about:blank")
        finally:
            scratch = ours.scratch_dir
            ours.close()
        assert not psutil.pid_exists(ours.pid) or psutil.Process(ours.pid).status() == psutil.STATUS_ZOMBIE
        assert scratch is not None and not scratch.exists()
        assert psutil.pid_exists(other_pid), "closing our Firefox killed the other one"
        other.execute_script("return 1")  # the other Firefox still answers its own client
    finally:
        other.delete_session()
        other.cleanup()


def _profile_dirs(processes: list[psutil.Process]) -> set[Path]:
    """The --user-data-dir folders these processes were started with."""
    dirs = set()
    for proc in processes:
        try:
            dirs |= {Path(a.split("=", 1)[1]) for a in proc.cmdline() if a.startswith("--user-data-dir=")}
        except psutil.Error:
            continue
    return dirs


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_ends_like_ctrl_c_and_leaves_nothing(tmp_path: Path, sig: int, code: int) -> None:
    require_browser(BrowserName.CHROME)
    out = tmp_path / "sweep"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run_real_webgpu_webnn.py"), "--browser", "chrome", "--bits", "32", "16",
         "8", "4", "2", "--only-shapes", "--shape", "4x256x256", "--warmup", "1", "--min-iterations", "3",
         "--min-time", "0", "--repetitions", "3", "--no-report", "--output-dir", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    csv_path = out / "results.csv"
    deadline = time.time() + 120
    while time.time() < deadline and (not csv_path.is_file() or len(csv_path.read_text().splitlines()) < 3):
        time.sleep(0.2)
    # The sweep's own processes (driver, browser and its helpers): other harness runs on this
    # machine are not this sweep's leftovers.
    ours = psutil.Process(proc.pid).children(recursive=True)
    assert ours, "the sweep started no browser"
    profiles = _profile_dirs(ours)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "interrupted by" in stderr and "Traceback" not in stderr
    rows = pd.read_csv(csv_path)
    assert 2 <= len(rows) < 15 and set(rows["outcome"]) <= {"ok"}
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted(s["run_id"] for s in samples) == sorted(rows["run_id"])
    time.sleep(1)
    left = [p for p in ours if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(p.cmdline()[:2]) for p in left]
    assert profiles and not [d for d in profiles if d.exists()], profiles


def test_a_dead_chromedriver_is_a_crash_row_and_the_next_run_gets_a_fresh_one(tmp_path: Path) -> None:
    require_browser(BrowserName.CHROME)
    killed: list[int] = []
    ours: list[psutil.Process] = []  # every session's driver, browser and its helpers

    async def kill_driver_on_second_run(run, session, job):  # noqa: ANN001, ANN202
        await job.spec_fetched.wait()
        for pid in (session.driver_pid, session.pid):
            if pid:
                root = psutil.Process(pid)
                ours.extend([root, *root.children(recursive=True)])
        if run.run_id != 1:
            return
        killed.append(session.driver_pid)
        psutil.Process(session.driver_pid).kill()

    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [MatmulWorkload("drv", 32, 256, 256)], [8, 4, 2])
    timing = TimingConfig(warmup=2, min_iterations=50, min_time_s=0, max_iterations=50, timeout_s=90)
    writer = ResultWriter(tmp_path / "sweep")
    rows = asyncio.run(run_sweep(plan, writer, SweepOptions(timing=timing, on_run_start=kill_driver_on_second_run)))
    assert killed, "the hook never ran"
    assert [r.outcome for r in rows] == [Outcome.OK, Outcome.CRASH, Outcome.OK], [r.reason for r in rows]
    assert "driver (chromedriver) died" in rows[1].reason
    time.sleep(1)
    left = [p for p in ours if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(p.cmdline()[:2]) for p in left]

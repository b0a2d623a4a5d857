"""The runner with a fake browser session (a real browser is not the point here): a bug in the
harness is its own outcome with a traceback on disk, never the browser's 'failed'; a page that
sends malformed data is 'failed' with a clear reason; the sweep goes on either way."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixed_web_platform.browsers import PRODUCTS, DriverKind, ResolvedBrowser
from fixed_web_platform.browsers.sessions import BrowserSession
from fixed_web_platform.engines.wgsl.matmul import WgslMatmul
from fixed_web_platform.harness import runner as runner_module
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import (
    PROTOCOL_VERSION,
    BrowserName,
    Outcome,
    Platform,
)
from fixed_web_platform.workloads import MatmulWorkload

W = MatmulWorkload("tiny", 2, 64, 16)


@dataclass
class FakeSession(BrowserSession):
    """Answers each page load by posting ``reply`` to the server, as a page would."""

    reply: dict | None = None
    server_result: object = None

    def open(self, url: str) -> None:
        job_id = url.split("job=")[1].split("&")[0]
        job = self.server._jobs[job_id]  # type: ignore[attr-defined]
        job.result.get_loop().call_soon_threadsafe(job.result.set_result, self.reply)

    def ping(self) -> None:
        return None

    def _quit(self) -> None:
        return None

    def is_alive(self) -> bool:
        return True


def _sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reply: dict, bits=(8, 4)) -> tuple:
    resolved = ResolvedBrowser(PRODUCTS[BrowserName.CHROME], Path("/bin/true"), None, DriverKind.CHROMEDRIVER)
    monkeypatch.setattr(runner_module, "resolve", lambda *a: resolved)
    holder: dict = {}

    real_server = runner_module.JobServer

    class CapturingServer(real_server):  # type: ignore[misc, valid-type]
        async def start(self) -> None:
            await super().start()
            holder["server"] = self

    monkeypatch.setattr(runner_module, "JobServer", CapturingServer)

    def launch(_resolved: ResolvedBrowser) -> FakeSession:
        session = FakeSession(resolved=resolved, version="0.fake", pid=None, reply=reply)
        session.server = holder["server"]  # type: ignore[attr-defined]
        return session

    monkeypatch.setattr(runner_module, "launch", launch)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [W], list(bits))
    writer = ResultWriter(tmp_path / "sweep")
    timing = TimingConfig(min_iterations=1, max_iterations=4, min_time_s=0, timeout_s=10)
    rows = asyncio.run(run_sweep(plan, writer, SweepOptions(timing=timing)))
    return rows, writer


def test_a_harness_bug_is_an_error_row_with_its_traceback(tmp_path, monkeypatch) -> None:
    calls = []

    async def broken_job(self, engine, run, timing, browser):  # noqa: ANN001, ANN202
        calls.append(run.bits)
        if run.bits == 8:
            raise KeyError("a bug of ours")
        return await original(self, engine, run, timing, browser)

    original = WgslMatmul.job
    monkeypatch.setattr(WgslMatmul, "job", broken_job)
    rows, writer = _sweep(tmp_path, monkeypatch, {"status": "failed", "reason": "page said no",
                                                  "protocol_version": PROTOCOL_VERSION})
    assert calls == [8, 4]  # the sweep went on after the bug
    assert rows[0].outcome == Outcome.ERROR
    assert "harness error: KeyError" in rows[0].reason and "harness.log" in rows[0].reason
    assert rows[1].outcome == Outcome.FAILED and rows[1].reason == "page said no"
    log = writer.log_path.read_text()
    assert "Traceback" in log and "a bug of ours" in log and "broken_job" in log
    assert Outcome(rows[0].outcome).is_failure


@pytest.mark.parametrize("reply, why", [
    ({"status": "ok"}, "protocol version"),
    ({"status": "ok", "protocol_version": PROTOCOL_VERSION}, "compute_dtype"),
    ({"status": "maybe", "protocol_version": PROTOCOL_VERSION}, "unknown status"),
    ({"status": "ok", "protocol_version": PROTOCOL_VERSION, "compute_dtype": "f32", "compile_ms": 1,
      "cold_ms": 1, "wall_ms": [1.0], "start_ms": [0.0], "floor_iterations": 0, "stop_reason": "counts",
      "iterations_per_sample": 1, "shader": "matmul_quant_gemv.wgsl"}, "weight_buffer_bytes"),
])
def test_malformed_replies_are_failed_with_a_clear_reason(tmp_path, monkeypatch, reply, why) -> None:
    rows, writer = _sweep(tmp_path, monkeypatch, reply, bits=(4,))
    assert rows[0].outcome == Outcome.FAILED
    assert rows[0].reason.startswith("page sent malformed data") and why in rows[0].reason
    assert not writer.log_path.exists()  # not a harness error


def test_a_results_folder_that_stops_taking_writes_ends_the_sweep_not_as_a_harness_error(
        tmp_path, monkeypatch) -> None:
    import errno

    from fixed_web_platform.results.writer import ResultsWriteError

    real_write_text = Path.write_text
    environment_writes = []

    def write_text(self, text, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if self.name.startswith(".environment.json.") and self.name.endswith(".partial"):
            environment_writes.append(self)
            if len(environment_writes) > 1:  # the folder was fine when the sweep started
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write_text(self, text, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    with pytest.raises(ResultsWriteError) as info:
        _sweep(tmp_path, monkeypatch, {"status": "failed", "reason": "x", "protocol_version": PROTOCOL_VERSION})
    assert info.value.filename.endswith("environment.json") and len(environment_writes) == 2
    assert not (tmp_path / "sweep" / "harness.log").exists()  # not disguised as our own bug


def test_a_stop_signal_that_lands_in_a_sweep_task_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    """SIGTERM raises in whatever task the main thread runs; asyncio ends the loop with it (the CLI
    prints "interrupted by SIGTERM") and, when the task is collected, used to log it again with a
    traceback ("Task exception was never retrieved"): the SIGTERM end-to-end test failed on it."""
    import gc

    async def sweep_like() -> None:
        runner_module._say_interrupts_once(asyncio.get_running_loop())
        runner_module._say_interrupts_once(asyncio.get_running_loop())  # a second sweep on the loop

        async def where_the_signal_lands() -> None:
            raise KeyboardInterrupt

        asyncio.get_running_loop().create_task(where_the_signal_lands())
        await asyncio.sleep(5)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(sweep_like())
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]

"""The wait for a browser at rest: a busy process tree is waited for, an idle one is not."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from fixed_web_platform.probes.quiet import QUIET_CPU_PERCENT, wait_until_quiet

BUSY_THEN_IDLE = "import time\nend = time.time() + {busy}\nwhile time.time() < end: pass\ntime.sleep(30)"


def _child(busy_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY_THEN_IDLE.format(busy=busy_s)])


def test_a_busy_tree_is_waited_for_until_it_rests() -> None:
    proc = _child(1.2)
    try:
        quiet = asyncio.run(wait_until_quiet(proc.pid, max_wait_s=8))
    finally:
        proc.kill()
    assert quiet.settled and quiet.cpu_percent < QUIET_CPU_PERCENT
    assert 0.6 <= quiet.waited_s < 8


def test_a_tree_that_never_rests_is_reported_not_waited_for_forever() -> None:
    proc = _child(30)
    try:
        quiet = asyncio.run(wait_until_quiet(proc.pid, max_wait_s=1.0))
    finally:
        proc.kill()
    # the spinning child's share, above the quiet line (not "> 50": under load it gets less of a core)
    assert not quiet.settled and quiet.cpu_percent > QUIET_CPU_PERCENT
    assert 1.0 <= quiet.waited_s < 2.0


def test_no_pid_or_a_gone_process_does_not_wait() -> None:
    assert asyncio.run(wait_until_quiet(None)).settled
    proc = _child(0)
    proc.kill()
    proc.wait()
    assert asyncio.run(wait_until_quiet(proc.pid)).waited_s < 1.0

"""Golden files compared at the precision the page receives: float32.

A golden file (tests/fixtures/golden_jobs/) is text: a job's page part as JSON, or a WebNN graph's
trace. Its numbers with a fraction or an exponent are values the page receives as float32 (a
calibrated activation scale, an epsilon); the CPU that computed them decides their last bit (the
same float32 reduction summed in another order on another CPU: one unit in the last place). So two
texts match when every line has the same words, integers and digests, and each such number is
within a few float32 units in the last place of the golden one: a recomputed scale passes, a
changed scale, shape, op or tensor still fails. ``GOLDEN_UPDATE=1`` writes the file instead."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

FLOAT32_ULPS = 4
"""How many float32 units in the last place a number may differ by (float32's epsilon is 2**-23)."""
REL_TOL = FLOAT32_ULPS * 2.0 ** -23
NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
"""A number standing alone (not the digits of a digest or a name)."""


def _is_float(token: str) -> bool:
    return any(c in token for c in ".eE")


def _line_matches(line: str, golden: str) -> bool:
    if line == golden:
        return True
    if NUMBER.split(line) != NUMBER.split(golden):
        return False
    got, want = NUMBER.findall(line), NUMBER.findall(golden)
    return len(got) == len(want) and all(
        a == b if not (_is_float(a) or _is_float(b)) else math.isclose(float(a), float(b), rel_tol=REL_TOL)
        for a, b in zip(got, want))


def mismatch(text: str, golden: str) -> str | None:
    """The first line where ``text`` differs from ``golden`` beyond float32's last bits, or None."""
    lines, wanted = text.splitlines(), golden.splitlines()
    for number, (line, want) in enumerate(zip(lines, wanted), 1):
        if not _line_matches(line, want):
            return f"line {number}: {line.strip()!r}, golden {want.strip()!r}"
    if len(lines) != len(wanted):
        return f"{len(lines)} lines, golden {len(wanted)}"
    return None


def check_golden(text: str, path: Path, what: str) -> None:
    """Assert ``text`` is the golden file ``path`` (GOLDEN_UPDATE=1: write it first)."""
    if os.environ.get("GOLDEN_UPDATE") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {path.name}: run with GOLDEN_UPDATE=1 and review it"
    differs = mismatch(text, path.read_text())
    assert differs is None, f"{what} changed ({differs}): diff it with GOLDEN_UPDATE=1 and git diff"

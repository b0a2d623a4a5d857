"""The golden files' comparison (tests/golden.py): a calibrated scale's last float32 bit is no
failure (the same scale summed in another order on another CPU), a changed scale, shape, op or
tensor still is. Planted on the committed files themselves."""

from __future__ import annotations

import json

import numpy as np
from golden import mismatch
from test_golden_jobs import GOLDEN

TRACE = (GOLDEN / "encoder-webnn-w8a8.trace.txt").read_text()
JOB = (GOLDEN / "encoder-webgpu-w8a8.json").read_text()
SCALE = next(line for line in TRACE.splitlines() if 'shape:[1,1]}, =[' in line)
"""The first activation scale the WebNN graph quantizes with, held by value."""


def _value(line: str) -> float:
    return float(line.split("=[")[1].split("]")[0])


def _next_float32(x: float, steps: int = 1) -> float:
    value = np.float32(x)
    for _ in range(steps):
        value = np.nextafter(value, np.float32(np.inf))
    return float(value)


def test_a_scale_one_float32_step_away_matches() -> None:
    scale = _value(SCALE)
    assert mismatch(TRACE.replace(SCALE, SCALE.replace(repr(scale), repr(_next_float32(scale)))), TRACE) is None
    job = json.loads(JOB)
    act = next(linear["act"] for linear in job["options"]["linears"] if linear.get("act"))
    moved = JOB.replace(f'"scale": {act["scale"]!r}', f'"scale": {_next_float32(act["scale"])!r}', 1)
    assert moved != JOB and mismatch(moved, JOB) is None


def test_a_changed_scale_shape_op_or_tensor_is_a_failure() -> None:
    scale = _value(SCALE)
    changed = {
        "scale": TRACE.replace(SCALE, SCALE.replace(repr(scale), repr(_next_float32(scale, 64)))),
        "shape": TRACE.replace("-> int8[16,32]", "-> int8[16,33]", 1),
        "op": TRACE.replace("quantizeLinear(", "quantizeLinearX(", 1),
        "tensor": TRACE.replace("<f2d00e625892>", "<f2d00e625893>", 1),
        "a line": TRACE + "gelu(%1) -> float32[16,32]\n",
    }
    for what, text in changed.items():
        assert text != TRACE, what
        assert mismatch(text, TRACE) is not None, f"a changed {what} passed"

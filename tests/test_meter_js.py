"""web/meter.js's WebAssembly half under node (fast tier: no browser): engines still get real
WebAssembly.Memory objects, every memory an engine makes or a module exports is counted at its
size, and a memory that could not grow turns a failed page into 'out-of-memory'. Its WebGPU and
WebNN halves, and workers, are checked in real browsers (test_e2e_model, test_e2e_wllama,
test_e2e_webgpu's lost device)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = 65536


def test_the_meter_counts_every_wasm_memory_and_names_one_that_could_not_grow() -> None:
    node = "/usr/bin/node" if Path("/usr/bin/node").exists() else shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    out = subprocess.run([node, str(ROOT / "tests" / "js" / "meter_check.mjs"), (ROOT / "web" / "meter.js").as_uri()],
                         capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout)
    assert got["instanceOf"] and got["exportedInstanceOf"] and got["refused"] == "RangeError"
    wasm = got["figures"]["wasm"]
    assert wasm == {"memories": 2, "peak_bytes": (3 + 2) * PAGE}  # grown to 3 pages, and the module's 2
    assert got["figures"]["gpu"]["devices"] == 0 and got["figures"]["workers"] == 0
    assert got["status"]["status"] == "out-of-memory"
    assert got["status"]["reason"].startswith("WebAssembly memory could not grow: ")
    assert got["status"]["reason"].endswith("; the engine said: Aborted(OOM)")
    assert got["okStatus"] is None

"""web/engines/ort_common.js's reading of ORT's verbose node-placement log, under node (fast tier:
no browser): what ran where is what the row says, so no session's nodes may be lost."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "[V:onnxruntime:, session_state_utils.cc:1234 VerifyEachNodeIsAssignedToAnEp]"


def parse(lines: list[str]) -> dict[str, list[str]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (scripts/setup.sh installs it)")
    script = (f"import {{parsePlacement}} from '{(ROOT / 'web' / 'engines' / 'ort_common.js').as_uri()}';"
              f"console.log(JSON.stringify(parsePlacement({json.dumps(lines)})));")
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_sessions_listing_nodes_on_one_provider_add_up() -> None:
    """A pipeline's two sessions (Whisper's encoder and decoder) in one log: the second session's
    header for a provider must not drop the first session's nodes there."""
    log = [f"{PREFIX} Node(s) placed on [WebNNExecutionProvider]. Number of nodes: 2",
           f"{PREFIX}  MatMul (encoder.q)", f"{PREFIX}  MatMul (encoder.k)",
           f"{PREFIX} Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1", f"{PREFIX}  If (branch)",
           "an unrelated line",
           f"{PREFIX} Node(s) placed on [WebNNExecutionProvider]. Number of nodes: 1", f"{PREFIX}  MatMul (decoder.q)",
           f"{PREFIX} All nodes placed on [WebGpuExecutionProvider]. Number of nodes: 9"]
    assert parse(log) == {"WebNNExecutionProvider": ["MatMul (encoder.q)", "MatMul (encoder.k)", "MatMul (decoder.q)"],
                          "CPUExecutionProvider": ["If (branch)"], "WebGpuExecutionProvider": []}

"""The WebNN graphs the harness's pages build, call by call, held as golden files (no browser).

For the WebNN jobs of tests/test_golden_jobs.py (a tiny BERT, Llama and Whisper), node runs the
page runner (web/engines/webnn_*.js) against a fake WebNN (tests/js/webnn_trace.mjs) that records
every graph-builder call with its operands' data types and shapes and a digest of every constant.
The trace is compared with tests/fixtures/golden_jobs/<case>.trace.txt. The order of builder calls
decides which patterns a backend fuses (engines/webnn/forms.py), so a restructuring of how the
graphs are written (the op graph lowered to WebNN) keeps these files identical (numbers at float32's precision, tests/golden.py); a change
meant to alter them regenerates them with ``GOLDEN_UPDATE=1`` and the diff is reviewed.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from golden import check_golden
from test_golden_jobs import CASES, GOLDEN, Chromium, models  # noqa: F401 - models is the fixture
from test_webnn_precision import CHROMIUM_LIMITS

from fixed_web_platform.engines.base import EngineJob
from fixed_web_platform.engines.registry import build_job
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform

ROOT = Path(__file__).resolve().parents[1]
TRACER = ROOT / "tests" / "js" / "webnn_trace.mjs"
ONCE = TimingConfig(warmup=0, min_iterations=1, max_iterations=1, min_time_s=0)
WEBNN = [case for case, (_, platform, *_) in CASES.items() if platform is Platform.WEBNN]


def trace(job: EngineJob, folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(json.dumps(job.spec.to_json()))
    (folder / "limits.json").write_text(json.dumps(CHROMIUM_LIMITS))
    for name, data in job.tensors.items():
        (folder / name).write_bytes(data)
    page = ROOT / "web" / "engines" / f"{job.spec.runner}.js"
    done = subprocess.run([shutil.which("node") or "node", str(TRACER), page.as_uri(), str(folder)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (scripts/setup.sh installs it)")
@pytest.mark.parametrize("case", WEBNN)
def test_webnn_graphs_are_the_golden_ones(case: str, models: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    model, platform, bits, act_bits, mode = CASES[case]
    plan = build_plan([BrowserName.CHROME], [platform], [models[model]], [bits], engines=[EngineName.HARNESS],
                      act_bits=[act_bits], precision_mode=mode)
    (run,) = [r for r in plan if r.act_bits == act_bits]
    job = asyncio.run(build_job(run, ONCE, Chromium()))
    assert isinstance(job, EngineJob), job
    traced = trace(job, tmp_path / case)
    assert traced["reply"]["status"] == "ok", traced["reply"]
    assert traced["builds"] and all(calls[-1].startswith("build(") for calls in traced["builds"])
    text = "".join(f"# graph {i}\n" + "\n".join(calls) + "\n" for i, calls in enumerate(traced["builds"]))
    check_golden(text, GOLDEN / f"{case}.trace.txt", f"{case}'s WebNN graphs")

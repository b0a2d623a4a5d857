"""notebooks/precision_results.ipynb runs top to bottom on a real small sweep (Chromium, WebGPU)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import require_browser
from nbclient import NotebookClient

from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

pytestmark = pytest.mark.browser
NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "precision_results.ipynb"
TINY = Workload("test-tiny", 4, 64, 64)
QUICK = TimingConfig(warmup=1, min_iterations=3, min_time_s=0, max_iterations=3, timeout_s=90)


def _execute(nb: nbformat.NotebookNode, monkeypatch, results_dir: Path | None = None) -> None:
    if results_dir is not None:
        monkeypatch.setenv("PRECISION_RESULTS_DIR", str(results_dir))  # the kernel inherits it
    client = NotebookClient(nb, kernel_name="python3", timeout=180,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()


def test_committed_notebook_is_valid_and_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert "PRECISION_RESULTS_DIR" in "".join(c.source for c in code)
    raw = json.loads(NOTEBOOK.read_text())  # nbformat 4.5: every cell has an id (a future hard error)
    assert all(c.get("id") for c in raw["cells"])


def test_kernel_is_this_venvs_python(monkeypatch):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")])
    _execute(nb, monkeypatch)
    (output,) = nb.cells[0].outputs
    assert Path(output.text.strip()).resolve() == Path(sys.executable).resolve()


def test_notebook_runs_on_a_real_sweep(tmp_path, monkeypatch):
    require_browser(BrowserName.CHROME)
    out = tmp_path / "20990101T000000Z_notebook"
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [TINY], (8, 4))
    rows = asyncio.run(run_sweep(plan, ResultWriter(out), SweepOptions(timing=QUICK, progress=None)))
    assert [r.outcome for r in rows] == [Outcome.OK, Outcome.OK], [r.reason for r in rows]

    nb = nbformat.read(NOTEBOOK, as_version=4)
    _execute(nb, monkeypatch, out)  # raises CellExecutionError if any cell fails

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert str(out.resolve()) in text  # it read the folder from PRECISION_RESULTS_DIR
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) >= 3  # latency vs bits, error vs bits, accuracy vs latency
    tables = "".join(o.get("data", {}).get("text/plain", "") for o in outputs
                     if o.output_type == "execute_result")
    assert "test-tiny" in tables and "4x64x64" in tables


def test_notebook_plots_a_model_sweep(minilm_chrome, monkeypatch):  # noqa: ANN001
    """A whole-model folder (the shared MiniLM sweep): no matmul rows, and still every ok kind drawn."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    _execute(nb, monkeypatch, minilm_chrome.out)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    drawn = re.search(r"encoder: (\d+) ok configurations, (\d+) plots", text)
    assert drawn and int(drawn.group(1)) > 0 and int(drawn.group(2)) >= 3, text
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) == int(drawn.group(2))  # the matmul cells draw nothing here

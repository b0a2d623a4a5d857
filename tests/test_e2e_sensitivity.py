"""End to end in real Chromium (harness WebGPU): MiniLM's layer sensitivity by kind of layer at
2-bit, a plan for cosine>=0.99 searched from it and verified in the browser, and the report."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import require_browser

from fixed_web_platform.cli.main import main
from fixed_web_platform.models.rules import load_rules
from fixed_web_platform.vocabulary import BrowserName

pytestmark = pytest.mark.browser


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """``run_real_webgpu_webnn.py ARGV`` in this process (the entry script's own exit codes are
    tests/test_cli.py's): no second interpreter importing PyTorch and reading MiniLM again."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    require_browser(BrowserName.CHROME)
    tmp = tmp_path_factory.mktemp("sensitivity")
    texts = tmp / "texts.txt"
    texts.write_text("A cat sat on the mat.\nStocks fell sharply on Monday.\n"
                     "The recipe needs two eggs.\nRain is expected tomorrow.\n")
    out = tmp / "out"
    done = _cli("sensitivity", "--model", "all-MiniLM-L6-v2", "--browser", "chrome", "--platform", "webgpu",
                "--bits", "2", "--group", "kind", "--batch-size", "2", "--seq-len", "16", "--inputs", str(texts),
                "--accuracy-budget", "cosine>=0.99", "--no-report", "--output-dir", str(out))
    return out, done


def test_sensitivity_is_measured_and_predicted_per_kind(swept) -> None:  # noqa: ANN001
    out, done = swept
    assert done.returncode == 0, done.stderr[-2000:]
    table = pd.read_csv(out / "sensitivity.csv")
    assert len(table) == 6 and (table["outcome"] == "ok").all()
    assert set(table["probe"]) >= {"all query projections", "all FFN down (output)"}
    assert (table["layers"] == 6).all() and (table["bits"] == 2).all()
    # the browser's f32 kernels give what the numpy forward with the same weights predicts
    gap = (table["drop_cosine_mean"] - table["predicted_drop_cosine_mean"]).abs()
    assert (gap < 1e-4).all(), table[["probe", "drop_cosine_mean", "predicted_drop_cosine_mean"]]
    assert (table["drop_cosine_mean"] > 0).all()  # 2-bit anywhere costs accuracy
    assert (out / "sensitivity_chrome_harness_webgpu.png").stat().st_size > 10_000
    assert "drop (browser)" in done.stdout


def test_a_plan_for_the_budget_is_found_and_verified_in_the_browser(swept) -> None:  # noqa: ANN001
    out, done = swept
    assert done.returncode == 0, done.stderr[-2000:]
    rules = load_rules(out / "precision_plan.json")  # the models issue's --precision-rules reads it
    assert rules and any(r.bits == 2 for r in rules)
    search = json.loads((out / "plan_search.json").read_text())
    assert search["budget"] == "cosine_mean>=0.99" and search["predicted"]["cosine_mean"] >= 0.99
    frontier = pd.read_csv(out / "frontier.csv", keep_default_na=False)
    by_plan = {r["plan"]: r for r in frontier.to_dict("records")}
    assert set(by_plan) == {"found plan", "uniform 32-bit", "uniform 2-bit", "mixed-precision 2"}
    assert all(r["outcome"] == "ok" for r in by_plan.values())
    plan = by_plan["found plan"]
    assert plan["weight MiB"] < by_plan["uniform 32-bit"]["weight MiB"]
    assert plan["budget"] == "meets the budget" or plan["budget"].startswith("fails the budget in the browser")
    assert by_plan["uniform 2-bit"]["budget"] == "misses the budget"  # 2-bit everywhere is too much


def test_the_report_shows_sensitivity_and_the_frontier(swept, tmp_path: Path) -> None:  # noqa: ANN001
    out, _ = swept
    done = _cli("report", str(out), "--output-dir", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Layer sensitivity" in md and "accuracy vs weight bytes" in md
    assert list((tmp_path / "report" / "plots").glob("sensitivity-*/sensitivity_chrome_harness_webgpu.png"))


def test_an_onnx_files_matmuls_are_probed_and_its_plan_verified_in_the_browser(tmp_path: Path) -> None:
    """A user's ONNX file on Chrome's ORT wasm: each MatMul alone at 4 bits, measured beside
    onnxruntime's prediction on the CPU; a plan for a budget one MatMul at 4 bits meets and two do
    not, written as rules, its mixed file measured beside the uniform ones."""
    from onnx_models import tiny_classifier

    from fixed_web_platform.workloads.onnx_file import OnnxFileWorkload
    from fixed_web_platform.workloads.onnx_file import sensitivity as s

    require_browser(BrowserName.CHROME)
    model = tiny_classifier(tmp_path / "tiny.onnx")
    w = OnnxFileWorkload.create(str(model), dims={"batch": 2, "seq": 6})
    each = {p.name: s.predicted(s.probe_workload(w, p, 4, 32), 32, 32, "minmax")[0]["cosine_min"]
            for p in s.probes(w, "layer")}
    budget = (max(each.values()) + s.predicted(w, 4, 32, "minmax")[0]["cosine_min"]) / 2
    out = tmp_path / "out"
    done = _cli("sensitivity", "--model", str(model), "--dims", "batch=2", "seq=6", "--browser", "chrome",
                "--platform", "wasm", "--bits", "4", "--accuracy-budget", f"cosine_min>={budget:.6f}",
                "--no-report", "--output-dir", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    table = pd.read_csv(out / "sensitivity.csv")
    assert list(table["probe"]) == ["fc1", "head"] and (table["outcome"] == "ok").all()
    gap = (table["drop_cosine_min"] - table["predicted_drop_cosine_min"]).abs()  # ORT's wasm kernels = its CPU's
    assert (gap < 1e-4).all() and (table["drop_cosine_min"] > 0).all(), table
    (rule, rest) = load_rules(out / "precision_plan.json")
    assert rule.bits == 4 and rule.match == f"re:{max(each, key=each.__getitem__)}" and rest.bits == 32
    frontier = pd.read_csv(out / "frontier.csv", keep_default_na=False)
    plan = frontier[frontier["plan"] == "found plan"].iloc[0]
    assert plan["budget"] == "meets the budget" and plan["precision_plan"] == "mixed:32x1,4x1"
    assert set(frontier["plan"]) == {"found plan", "uniform 32-bit", "uniform 4-bit q4", "uniform 4-bit held minmax"}

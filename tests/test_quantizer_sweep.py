"""benchmarks/quantizer_sweep.py: each part is a command the main CLI takes (every quantizer, the
issue's bits), a part with a plan resumes, and a part is finished only when every planned run has
a row."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from fixed_web_platform.cli.run import build_parser, plan_from_args
from fixed_web_platform.plan import TimingConfig, build_plan, save_plan
from fixed_web_platform.precision.quantizers import QUANTIZERS
from fixed_web_platform.vocabulary import BrowserName, Platform
from fixed_web_platform.workloads.matmul import MatmulWorkload

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("quantizer_sweep", ROOT / "benchmarks" / "quantizer_sweep.py")
quantizer_sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(quantizer_sweep)


def test_every_part_is_a_command_the_main_cli_takes(tmp_path: Path) -> None:
    for model in quantizer_sweep.MODELS:
        for setting in quantizer_sweep.SETTINGS:
            args = build_parser().parse_args(quantizer_sweep.part_command(model, setting, tmp_path / model)[2:])
            assert args.weight_quant == list(QUANTIZERS) and args.output_dir == tmp_path / model
    # one part's plan, as the main command builds it: float once, each quantizer at 8, 4 and 2 bits
    args = build_parser().parse_args(quantizer_sweep.part_command("minilm", "webnn-chrome", tmp_path / "p")[2:])
    runs, _ = plan_from_args(args)
    assert sorted((r.bits, r.weight_quant) for r in runs) == sorted(
        [(32, "minmax")] + [(b, q) for b in (8, 4, 2) for q in QUANTIZERS])


def test_a_part_resumes_and_is_finished_when_every_planned_run_has_a_row(tmp_path: Path) -> None:
    folder = tmp_path / "minilm_webgpu-firefox"
    assert not quantizer_sweep.finished(folder)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [MatmulWorkload("q", 3, 64, 8)], [32, 4])
    folder.mkdir()
    save_plan(folder, plan, TimingConfig())
    assert "--resume" in quantizer_sweep.part_command("minilm", "webgpu-firefox", folder)
    pd.DataFrame({"run_id": [plan[0].run_id]}).to_csv(folder / "results.csv", index=False)
    assert not quantizer_sweep.finished(folder)
    pd.DataFrame({"run_id": [r.run_id for r in plan]}).to_csv(folder / "results.csv", index=False)
    assert quantizer_sweep.finished(folder)

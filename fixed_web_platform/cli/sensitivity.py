"""`sensitivity --model M --bits 4 [2] [--baseline-bits 32] [--group layer|kind|block] ...`:
which linear layers can take fewer bits, measured in the browser and predicted in Python. M is a
built-in encoder (predicted by the numpy float64 forward against PyTorch fp32) or an ONNX file
(each MatMul probed alone in the held variant, predicted by onnxruntime on the CPU running the same
file: workloads/onnx_file/sensitivity.py).

The sweep is an ordinary whole-model sweep (same folder, plan.json, rows, --resume): one baseline
run (every layer at --baseline-bits) and one run per probe and low bits (that layer or group at
the low bits, the rest at the baseline), per browser, engine and platform. Afterwards
``sensitivity.csv`` ranks the probes by the drop of each accuracy figure against the baseline
run of the same engine, beside the numpy float64 prediction of the same drop, and
``sensitivity.png`` draws it. Every other run flag (browsers, engines, platforms, timing,
--remote...) means what it means for a sweep.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..models import rules as layer_rules
from ..engines.transformersjs.encoder import as_onnx_file
from ..models.source import DEFAULT_MODEL, ONNX_WEIGHTS
from ..plan import build_plan, default_engines, load_plan
from ..report.markdown import markdown_lines, markdown_table
from ..run_spec import MODEL_TIMING, RunSpec, TimingConfig
from ..vocabulary import HELD_FORMAT, EngineName, PrecisionMode, parse_bits
from ..workloads.encoder import EncoderWorkload, accuracy, sensitivity
from ..workloads.encoder.plan_search import (
    Budget,
    parse_budget,
    search,
    workload_predictor,
)
from ..workloads.onnx_file import OnnxFileWorkload, is_onnx_model
from ..workloads.onnx_file import sensitivity as onnx_sensitivity
from .run import build_parser as run_parser
from .run import execute_sweep, model_workloads, platforms_from

SENSITIVITY_TIMING = TimingConfig(warmup=0, min_iterations=1, min_time_s=0.0, max_iterations=200,
                                  timeout_s=MODEL_TIMING.timeout_s)
"""Accuracy is the figure here: one timed pass per run (after the cold one) unless asked for more."""
TABLE_FILE = "sensitivity.csv"
PLAN_RULES_FILE = "precision_plan.json"
"""The found plan as precision rules (--precision-rules reads it)."""
VERIFY_DIR = "plan_verify"
FRONTIER_FILE = "frontier.csv"
SEARCH_FILE = "plan_search.json"


def build_parser() -> argparse.ArgumentParser:
    p = run_parser()
    p.prog = "run_real_webgpu_webnn.py sensitivity"
    p.description = ("Layer sensitivity of a whole model: each linear layer (or group) alone at "
                     "--bits, the rest at --baseline-bits; measured in the browser, predicted in Python.")
    p.add_argument("--baseline-bits", type=parse_bits, default=32,
                   help="precision of every layer not probed (default 32, float)")
    p.add_argument("--group", choices=sensitivity.GROUPINGS, default="layer",
                   help="probe each linear layer (default), each kind across the encoder "
                        "(all query projections...), or each encoder layer's attention and FFN")
    p.add_argument("--accuracy-budget", default=None, metavar="METRIC>=VALUE",
                   help="then search the plan with the fewest weight bytes meeting it (cosine>=0.99, "
                        "cosine_min>=, spearman>=, top1>=; candidate bits: --bits and the baseline), "
                        "write it as precision rules and run it in the browser to verify")
    p.set_defaults(model=DEFAULT_MODEL, bits=[4])
    return p


def plan_probes(args: argparse.Namespace) -> tuple[list[RunSpec], TimingConfig]:
    if args.mixed_precision or args.precision_rules is not None:
        raise ValueError("sensitivity makes its own precision rules: leave out --mixed-precision "
                         "and --precision-rules")
    if args.shape:
        raise ValueError("sensitivity probes a whole model: leave out --shape")
    base = model_workloads(args)[0]
    if not isinstance(base, (EncoderWorkload, OnnxFileWorkload)):  # probes are judged by their accuracy
        raise UsageError(f"sensitivity probes encoder models and ONNX files; {args.model} is a {base.kind} model")
    if getattr(base, "weights", "") == ONNX_WEIGHTS:  # a transformers.js folder without weights: its float graph
        base = as_onnx_file(base)
    low = list(dict.fromkeys(args.bits))
    higher = [b for b in low if b >= args.baseline_bits]
    if higher:
        raise ValueError(f"--bits {higher[0]} is not below the baseline {args.baseline_bits}-bit: "
                         "probe lower bits (or raise --baseline-bits)")
    workloads = [probe_workload(base, None, None, args.block_size)]
    for bits in low:
        for probe in probes_of(base, args.group):
            workloads.append(probe_workload(base, probe, bits, args.block_size))
    plan = build_plan(
        list(dict.fromkeys(args.browser)), platforms_from(args.platform), workloads,
        [args.baseline_bits], engines=engines_of(args, base),
        repetitions=args.repetitions, block_size=args.block_size,
        precision_mode=PrecisionMode.EXPERIMENTAL if args.experimental_precision else PrecisionMode.STANDARD,
        seed=args.seed, webnn_device=args.webnn_device, weight_quant=[quantizer(args)])
    return plan, sensitivity_timing(args)


def probes_of(workload: Any, group: str) -> list[sensitivity.Probe]:
    """The probes of an encoder (its architecture's layers, grouped) or of an ONNX file (its MatMuls)."""
    if isinstance(workload, OnnxFileWorkload):
        return onnx_sensitivity.probes(workload, group)
    return sensitivity.probes(workload.architecture(), workload.config(), group)


def probe_workload(base: Any, probe: sensitivity.Probe | None, bits: int | None, block_size: int) -> Any:
    if isinstance(base, OnnxFileWorkload):
        return onnx_sensitivity.probe_workload(base, probe, bits, block_size)
    return sensitivity.probe_workload(base, probe, bits, block_size)


def metric_of(workload: Any) -> str:
    """The figure probes are ranked by: an encoder's mean cosine, an ONNX file's lowest output cosine."""
    return onnx_sensitivity.METRIC if isinstance(workload, OnnxFileWorkload) else "cosine_mean"


def engines_of(args: argparse.Namespace, workload: Any) -> list[EngineName]:
    """The engines asked for, else the kind's default (the harness for encoders, ORT for ONNX files)."""
    return list(dict.fromkeys(args.engine or ([EngineName.HARNESS] if isinstance(workload, EncoderWorkload)
                                              else default_engines([workload]))))


def quantizer(args: argparse.Namespace) -> str:
    """The one weight quantizer a sensitivity run probes with (its probes, its plan search's
    predictions and the plan's verification all hold that quantizer's codes)."""
    if len(set(args.weight_quant)) != 1:
        raise ValueError(f"sensitivity probes one weight quantizer at a time, not {' '.join(args.weight_quant)}")
    return args.weight_quant[0]


def sensitivity_timing(args: argparse.Namespace) -> TimingConfig:
    """SENSITIVITY_TIMING, with any timing flag the user gave."""
    d = SENSITIVITY_TIMING

    def given(value: Any, default: Any) -> Any:
        return default if value is None else value

    return TimingConfig(
        warmup=given(args.warmup, d.warmup), min_iterations=given(args.min_iterations, d.min_iterations),
        min_time_s=given(args.min_time, d.min_time_s),
        max_iterations=args.max_iterations or d.max_iterations, repeat=args.repeat,
        timeout_s=given(args.timeout, d.timeout_s))


def _probe_of(run: RunSpec, by_label: dict[str, tuple[sensitivity.Probe, int]]) -> tuple[str, int, int]:
    """(probe name, layers, low bits) of a run; the baseline is ('baseline', 0, baseline bits)."""
    found = by_label.get(run.workload.rules_name)
    if found is None:
        return "baseline", 0, run.bits
    probe, bits = found
    return probe.name, len(probe.layers), bits


def sensitivity_table(directory: Path, grouping: str | None = None) -> list[sensitivity.SensitivityRow]:
    """The rows of a sensitivity sweep's folder as probes: measured (results.csv) and predicted
    (numpy, recomputed from the plan)."""
    plan, _ = load_plan(directory)
    rows = pd.read_csv(directory / "results.csv", keep_default_na=False)
    by_run = {int(r["run_id"]): r for r in rows.to_dict("records")}
    layers_path = directory / "layers.csv"
    layer_bits: dict[tuple[int, str], str] = {}
    if layers_path.is_file():
        for r in pd.read_csv(layers_path, keep_default_na=False).to_dict("records"):
            layer_bits[(int(r["run_id"]), str(r["layer"]))] = str(r["bits_executed"])
    workloads = {r.workload for r in plan}
    onnx = any(isinstance(w, OnnxFileWorkload) for w in workloads)
    labels: dict[str, tuple[sensitivity.Probe, int]] = {}
    for w in workloads:
        for group in ([grouping] if grouping else
                      onnx_sensitivity.GROUPINGS if isinstance(w, OnnxFileWorkload) else sensitivity.GROUPINGS):
            for probe in probes_of(w, group):
                for rule in w.rules:
                    if rule.match == probe.pattern:
                        labels[w.rules_name] = (probe, rule.bits)
    figures_of = onnx_sensitivity.row_figures if onnx else sensitivity.row_figures
    predicted: dict[Any, dict[str, float | None]] = {}
    for run in plan:  # an encoder's sweep saved both references with each output: read them back first
        key = (run.workload, run.bits, run.block_size)
        saved = str(by_run.get(run.run_id, {}).get("outputs_file") or "")
        if not onnx and key not in predicted and saved and (directory / saved).is_file():
            with np.load(directory / saved) as arrays:
                predicted[key] = sensitivity.figures(accuracy.compare(
                    arrays["reference_dequantized_f64"], arrays["reference_pytorch_fp32"]))
    for run in plan:  # the rest: the numpy forward, or onnxruntime on the file, again
        key = (run.workload, run.bits, run.block_size)
        if key not in predicted and isinstance(run.workload, OnnxFileWorkload):
            predicted[key] = onnx_sensitivity.predicted(run.workload, run.bits, run.block_size, run.weight_quant)[0]
        elif key not in predicted:
            acc, _ = sensitivity.predicted(run.workload, run.bits, run.block_size, run.seed, run.weight_quant)
            predicted[key] = sensitivity.figures(acc)
    baselines: dict[tuple[str, str, str], tuple[dict[str, float | None], dict[str, float | None]]] = {}
    for run in plan:
        if not run.workload.rules:
            row = by_run.get(run.run_id, {})
            measured = figures_of(row) if row.get("outcome") == "ok" else {}
            baselines[(run.browser, run.engine, run.platform)] = (
                measured, predicted[(run.workload, run.bits, run.block_size)])
    out = []
    for run in plan:
        if not run.workload.rules:
            continue
        row = by_run.get(run.run_id, {})
        name, layers, bits = _probe_of(run, labels)
        probe = labels.get(run.workload.rules_name, (None, 0))[0]
        ran = sorted({layer_bits.get((run.run_id, n), "") for n in (probe.layers if probe else ())} - {""},
                     key=int)
        base_measured, base_predicted = baselines.get((run.browser, run.engine, run.platform), ({}, {}))
        ok = row.get("outcome") == "ok"
        weight = row.get("weight_bytes")
        out.append(sensitivity.SensitivityRow(
            browser=run.browser, engine=run.engine, platform=run.platform, probe=name, layers=layers,
            bits=bits, baseline_bits=run.bits, run_id=run.run_id,
            outcome=str(row.get("outcome") or "not run"),
            weight_bytes=float(weight) if ok and weight not in ("", None) else None,
            bits_executed="/".join(ran),
            measured=figures_of(row) if ok else {},
            predicted=predicted[(run.workload, run.bits, run.block_size)],
            baseline_measured=base_measured, baseline_predicted=base_predicted))
    return out


def _fmt(value: float | None, spec: str = ".2e") -> str:
    return "-" if value is None else format(value, spec)


def format_ranked(rows: Sequence[sensitivity.SensitivityRow], limit: int | None = None,
                  metric: str = "cosine_mean") -> str:
    head = ["rank", "browser", "engine", "platform", "probe", "bits", "ran at", "outcome", metric.replace("_", " "),
            "drop (browser)", "drop (Python)", "Spearman drop", "top-1 drop"]
    body = []
    for key in dict.fromkeys((r.browser, r.engine, r.platform) for r in rows):
        ranked = sensitivity.rank([r for r in rows if (r.browser, r.engine, r.platform) == key], metric)
        for i, r in enumerate(ranked[:limit] if limit else ranked, 1):
            body.append([str(i), r.browser, r.engine, r.platform, r.probe, str(r.bits),
                         r.bits_executed or "-", r.outcome,
                         _fmt(r.measured.get(metric), ".5f"), _fmt(r.drop(metric)),
                         _fmt(r.drop(metric, "predicted")), _fmt(r.drop("spearman")),
                         _fmt(r.drop("top1_agreement"), ".3f")])
    return "\n".join(markdown_lines(head, body))


def write_outputs(directory: Path, rows: Sequence[sensitivity.SensitivityRow]) -> list[Path]:
    from ..report.sensitivity import sensitivity_plots

    table = pd.DataFrame.from_records([r.record() for r in rows])
    path = directory / TABLE_FILE
    table.to_csv(path, index=False)
    return [path, *sensitivity_plots(table, directory)]


def sensitivity_command(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    if args.model is None:
        raise UsageError("sensitivity needs --model")
    budget = None
    if args.accuracy_budget is not None:
        try:
            budget = parse_budget(args.accuracy_budget)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if budget is not None and is_onnx_model(args.model) and budget.metric not in onnx_sensitivity.BUDGET_METRICS:
        raise UsageError(f"--accuracy-budget {args.accuracy_budget}: an ONNX file is judged by its lowest output "
                         "cosine and top-1 (cosine_min>=, top1>=)")
    code, directory = execute_sweep(args, plan_probes)
    base = _baseline_workload(directory)
    rows = sensitivity_table(directory, None if args.resume else args.group)
    written = write_outputs(directory, rows)
    print()
    print(format_ranked(rows, metric=metric_of(base)))
    print("sensitivity: " + ", ".join(str(p) for p in written))
    if budget is not None:
        code = max(code, plan_and_verify(args, directory, rows, budget))
    if not args.no_report:
        from .report import leave_report

        leave_report([directory])
    return code


def _baseline_workload(directory: Path) -> Any:
    """The probed model, as the folder's plan holds it (its run without rules)."""
    plan, _ = load_plan(directory)
    base = next(r.workload for r in plan if not r.workload.rules)
    return dataclasses.replace(base, rules=(), rules_name="")


def ranking_from(rows: Sequence[sensitivity.SensitivityRow], probes: Sequence[sensitivity.Probe],
                 metric: str = "cosine_mean") -> dict[int, list[sensitivity.Probe]]:
    """Per low bits, the probes least sensitive first: the first engine's measured drop of
    ``metric``, the Python prediction where the browser gave none."""
    by_name = {p.name: p for p in probes}
    first = next(((r.browser, r.engine, r.platform) for r in rows), None)
    ranking: dict[int, list[sensitivity.Probe]] = {}
    for bits in sorted({r.bits for r in rows}):
        mine = [r for r in rows if r.bits == bits and (r.browser, r.engine, r.platform) == first]

        def drop(r: sensitivity.SensitivityRow) -> float:
            d = r.drop(metric)
            d = r.drop(metric, "predicted") if d is None else d
            return float("inf") if d is None else d
        ranking[bits] = [by_name[r.probe] for r in sorted(mine, key=drop) if r.probe in by_name]
    return ranking


def plan_and_verify(args: argparse.Namespace, directory: Path,
                    rows: Sequence[sensitivity.SensitivityRow], budget: Budget) -> int:
    """Search the plan, write it as rules, and run it in the browser beside the uniform
    precisions and --mixed-precision (the accuracy-vs-bytes frontier); 0, or 1 when a run failed."""
    base = _baseline_workload(directory)
    onnx = isinstance(base, OnnxFileWorkload)
    probes = probes_of(base, args.group)
    predictor = (onnx_sensitivity.predictor(base, args.baseline_bits, quantizer(args)) if onnx
                 else workload_predictor(base, args.baseline_bits, args.seed, quantizer(args)))
    found = search(ranking_from(rows, probes, metric_of(base)), budget, predictor,
                   baseline_bits=args.baseline_bits, block_size=args.block_size)
    layers = [layer.name for layer in (base.matmul_layers if onnx else base.config().linear_layers())]
    rules_path = directory / PLAN_RULES_FILE
    rules_path.write_text(json.dumps(found.rules_json(layers), indent=1) + "\n")
    print(f"\nplan for {budget.text}: {len(found.assignment)} of {len(probes)} probes below "
          f"{args.baseline_bits}-bit, predicted {budget.metric} {budget.value(found.predicted):.5f}; "
          f"rules: {rules_path}")
    planned = dataclasses.replace(base, rules=found.rules(layers), rules_name=str(rules_path))
    mixed = None if onnx else dataclasses.replace(base, rules=layer_rules.mixed_precision_rules(),
                                                  rules_name="mixed-precision")
    if onnx:  # the uniform low-bit file of the same quantizer beside onnxruntime's own
        base = dataclasses.replace(base, held=True)
    low = sorted(set(args.bits), reverse=True)

    def verify_plan(a: argparse.Namespace) -> tuple[list[RunSpec], TimingConfig]:
        timing = sensitivity_timing(a)
        common = {"engines": engines_of(a, base), "block_size": a.block_size,
                  "seed": a.seed, "webnn_device": a.webnn_device, "weight_quant": [quantizer(a)], "precision_mode": (
                          PrecisionMode.EXPERIMENTAL if a.experimental_precision else PrecisionMode.STANDARD)}
        browsers, platforms = list(dict.fromkeys(a.browser)), platforms_from(a.platform)
        runs = (build_plan(browsers, platforms, [planned], [a.baseline_bits], **common)
                + build_plan(browsers, platforms, [base], [a.baseline_bits, *low], **common)
                + (build_plan(browsers, platforms, [mixed], low, **common) if mixed is not None else []))
        return [dataclasses.replace(r, run_id=i) for i, r in enumerate(runs)], timing

    verify_args = argparse.Namespace(**{**vars(args), "output_dir": directory / VERIFY_DIR,
                                        "resume": None, "retry_failed": False})
    code, verify_dir = execute_sweep(verify_args, verify_plan)
    frontier = frontier_table(verify_dir, budget, found, onnx_sensitivity.row_figures if onnx else None)
    frontier.to_csv(directory / FRONTIER_FILE, index=False)
    print()
    print(markdown_table(frontier))
    (directory / SEARCH_FILE).write_text(json.dumps({
        "budget": budget.text, "algorithm": "ranked-prefix greedy from each floor (workloads/encoder/plan_search.py)",
        "baseline_bits": args.baseline_bits, "candidate_bits": low, "group": args.group,
        "predicted": found.predicted, "rules_file": str(rules_path),
        "moved": [{"probe": p.name, "bits": b} for p, b in found.assignment],
        "checks": [dataclasses.asdict(c) for c in found.checks],
        "frontier": frontier.to_dict("records")}, indent=1, default=str) + "\n")
    return code


def frontier_table(verify_dir: Path, budget: Budget, found: Any, figures_of: Any = None) -> pd.DataFrame:
    """Per engine: each plan's weight bytes and accuracy in the browser, and whether the budget
    holds there (the found plan's row says 'fails the budget in the browser' when it does not).
    ``figures_of``: a row's accuracy figures (an encoder's columns by default)."""
    figures_of = figures_of or sensitivity.row_figures


    rows = pd.read_csv(verify_dir / "results.csv", keep_default_na=False)
    records = []
    for r in rows.to_dict("records"):
        rules = str(r.get("precision_rules") or "")
        named = str(r.get("format_requested") or "")  # an ONNX file's variant, with its quantizer
        named += f" {r['weight_quant']}" if named == HELD_FORMAT and r.get("weight_quant") else ""
        label = ("found plan" if rules.endswith(PLAN_RULES_FILE) else
                 f"mixed-precision {r['bits_requested']}" if rules == "mixed-precision" else
                 f"uniform {r['bits_requested']}-bit" + (f" {named}" if named and named != "fp32" else ""))
        ok = r["outcome"] == "ok"
        value = budget.value(figures_of(r)) if ok else None
        verdict = ("" if not ok else "meets the budget" if value is not None and value >= budget.threshold
                   else "misses the budget")
        if label == "found plan" and ok and verdict == "misses the budget":
            verdict = (f"fails the budget in the browser: {budget.metric} {value:.5f} measured, "
                       f"{budget.value(found.predicted):.5f} predicted")
        weight = sensitivity.number(r.get("weight_bytes"))
        records.append({
            "browser": r["browser"], "engine": r["engine"], "platform": r["platform"], "plan": label,
            "precision_plan": r.get("precision_plan", ""), "outcome": r["outcome"],
            "weight MiB": None if weight is None else round(weight / 2**20, 2),
            budget.metric: value, "budget": verdict,
        })
    return pd.DataFrame.from_records(records)




"""Layer sensitivity of a user's ONNX file (``sensitivity --model FILE.onnx``): each MatMul with a
constant weight alone at the low bits (the held variant with one precision rule, the rest float32),
judged as every ONNX-file row is, against the file's own fp32 on the evaluated inputs; predicted in
Python by onnxruntime on the CPU running the same file (what the browser should compute). The
probes, the plan search and its verification are the encoders' (workloads/encoder/sensitivity.py,
plan_search.py); an ONNX file's figures are ``cosine_min`` (its rows' ``outputs_cosine_min``, the
lowest cosine of any float output) and ``top1_agreement`` (``top1_vs_fp32``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...models.rules import PrecisionRule
from ..encoder.sensitivity import Probe, layer_probe, probe_label
from .prepared import prepare
from .variants import HELD, variant_for
from .workload import OnnxFileWorkload

METRIC = "cosine_min"
"""What ranks an ONNX file's probes (its accuracy figure)."""
GROUPINGS = ("layer",)
"""An arbitrary graph's node names carry no block or role a grouping could read."""
BUDGET_METRICS = ("cosine_min", "top1_agreement")


def probes(workload: OnnxFileWorkload, grouping: str) -> list[Probe]:
    """One probe per MatMul with a constant weight, in graph order."""
    if grouping not in GROUPINGS:
        raise ValueError(f"--group {grouping}: an ONNX file's MatMuls are probed one by one (--group layer); "
                         "its node names carry no block or role to group by")
    return [layer_probe(layer.name) for layer in workload.matmul_layers]


def probe_workload(base: OnnxFileWorkload, probe: Probe | None, bits: int | None, block_size: int
                   ) -> OnnxFileWorkload:
    rules = () if probe is None else (PrecisionRule(probe.pattern, int(bits or 0), block_size),)
    return dataclasses.replace(base, rules=rules, rules_name=probe_label(probe, bits))


def row_figures(row: dict[str, Any]) -> dict[str, float | None]:
    from ...values import number

    return {"cosine_min": number(row.get("outputs_cosine_min")), "top1_agreement": number(row.get("top1_vs_fp32"))}


def predicted(workload: OnnxFileWorkload, bits: int, block_size: int, weight_quant: str
              ) -> tuple[dict[str, float | None], int]:
    """onnxruntime on the CPU running the file this run holds, against the file's fp32; and the
    weight bytes it holds."""
    name = HELD if workload.rules else variant_for(bits, 32, "")
    variant = workload.variant(name, bits, block_size, quantizer=weight_quant)
    prepared = prepare(workload, variant, bits, block_size)
    return row_figures(prepared.figures(prepared.held, None)), variant.weight_bytes


def predictor(workload: OnnxFileWorkload, baseline_bits: int, weight_quant: str) -> Any:
    """A plan's rules -> its predicted figures and weight bytes (plan_search.Predictor)."""
    def predict(rules: tuple[PrecisionRule, ...]) -> dict[str, float | None]:
        planned = dataclasses.replace(workload, rules=rules, rules_name="plan search")
        block = rules[0].block_size if rules else 32
        figures, weight_bytes = predicted(planned, baseline_bits, block, weight_quant)
        return {**figures, "weight_bytes": float(weight_bytes)}
    return predict

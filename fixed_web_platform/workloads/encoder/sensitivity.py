"""Layer sensitivity: which linear layers can take fewer bits.

A probe quantizes one linear layer (or one group of them) to the low bits while every other layer
stays at the baseline precision. Its accuracy against PyTorch fp32 is measured in the browser (a
whole-model run whose precision rules are the probe) and predicted in Python (the float64 numpy
forward with the very weights the run holds, which is also that run's kernel reference), so a
user sees where the prediction and the browser agree.

Groupings (data, ``GROUPINGS``): ``layer`` (each linear layer alone), ``kind`` (all query
projections, all keys, ... across the encoder), ``block`` (each encoder layer's attention and its
feed-forward).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...architectures import ArchConfig, Architecture
from ...models.rules import PrecisionRule
from ...precision.quantizers import DEFAULT_QUANTIZER
from ...values import number
from . import accuracy

_BLOCK = re.compile(r"^(?P<block>.*?\.(?P<index>\d+))\.(?P<suffix>.+)$")
"""A layer name as '<prefix>.<block index>.<suffix>' ('encoder.layer.3.output.dense')."""


@dataclass(frozen=True)
class Probe:
    """One layer or group quantized alone."""

    name: str
    """What a user reads: 'encoder.layer.3.intermediate.dense', 'all query projections',
    'layer 3 FFN'."""
    pattern: str
    """The precision-rules pattern that selects exactly its layers."""
    layers: tuple[str, ...]


def _regex(*names: str) -> str:
    return "re:" + "|".join(re.escape(n) for n in names)


def layer_probe(name: str) -> Probe:
    """The probe of one layer alone (``--group layer``), by its exact name."""
    return Probe(name, _regex(name), (name,))


def probes(arch: Architecture, cfg: ArchConfig, grouping: str) -> list[Probe]:
    """The probes of a model, in forward order. ``kind`` and ``block`` group the layers by the
    block index in their names and the architecture's layer labels and roles."""
    if grouping not in GROUPINGS:
        raise ValueError(f"--group {grouping!r} is not one of {', '.join(GROUPINGS)}")
    layers = cfg.linear_layers()
    if grouping == "layer":
        return [layer_probe(layer.name) for layer in layers]
    parts = [_BLOCK.match(layer.name) for layer in layers]
    if not all(parts):
        raise ValueError(f"--group {grouping}: the {arch.name} layer names carry no block index")
    groups: dict[tuple[str, str], list[str]] = {}
    for layer, part in zip(layers, parts):
        assert part is not None
        suffix = part["suffix"]
        if grouping == "kind":
            key = ("", f"all {arch.layer_labels.get(suffix, suffix)}")
        else:
            role = next((r for r, suffixes in arch.layer_kinds.items() if suffix in suffixes), suffix)
            key = (part["block"], f"layer {part['index']} {arch.role_labels.get(role, role)}")
        groups.setdefault(key, []).append(layer.name)
    return [Probe(label, _regex(*names), tuple(names)) for (_, label), names in groups.items()]


GROUPINGS = ("layer", "kind", "block")


def probe_rules(probe: Probe, bits: int, block_size: int) -> tuple[PrecisionRule, ...]:
    return (PrecisionRule(probe.pattern, bits, block_size),)


def probe_label(probe: Probe | None, bits: int | None) -> str:
    """The rules name a probe's workload carries (and its rows' precision_rules column)."""
    return "sensitivity: baseline" if probe is None else f"sensitivity: {probe.name} at {bits}-bit"


def probe_workload(base: Any, probe: Probe | None, bits: int | None, block_size: int) -> Any:
    """The base model workload with the probe's rules (None: the baseline, every layer at the
    run's bits)."""
    rules = () if probe is None else probe_rules(probe, int(bits or 0), block_size)
    return dataclasses.replace(base, rules=rules, rules_name=probe_label(probe, bits))


def predicted(workload: Any, bits: int, block_size: int, seed: int,
              weight_quant: str = DEFAULT_QUANTIZER) -> tuple[accuracy.EmbeddingAccuracy, int]:
    """The numpy float64 forward with the weights this run would hold (8/4/2-bit codes by
    ``weight_quant``), against PyTorch fp32; and the weight bytes it holds."""
    from .prepared import prepare_model

    prepared = prepare_model(workload, bits, block_size, seed, weight_quant=weight_quant)
    return accuracy.compare(prepared.ref_dequantized, prepared.ref_float), prepared.weight_bytes


METRICS = ("cosine_mean", "cosine_min", "spearman", "top1_agreement")


@dataclass(frozen=True)
class SensitivityRow:
    """One probe on one engine: its accuracy, the drop from the baseline run of that engine, and
    the Python prediction of both."""

    browser: str
    engine: str
    platform: str
    probe: str
    layers: int
    bits: int
    baseline_bits: int
    run_id: int
    outcome: str
    weight_bytes: float | None
    bits_executed: str
    """What the engine ran the probe's layers at (layers.csv): '4', '8' (standard-mode WebNN
    upgrades int4), '4/8' when they differ, '' when it could not tell."""
    measured: dict[str, float | None]
    predicted: dict[str, float | None]
    baseline_measured: dict[str, float | None]
    baseline_predicted: dict[str, float | None]

    def drop(self, metric: str, which: str = "measured") -> float | None:
        value = (self.measured if which == "measured" else self.predicted).get(metric)
        base = (self.baseline_measured if which == "measured" else self.baseline_predicted).get(metric)
        return None if value is None or base is None else base - value

    def record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "browser": self.browser, "engine": self.engine, "platform": self.platform,
            "probe": self.probe, "layers": self.layers, "bits": self.bits,
            "baseline_bits": self.baseline_bits, "run_id": self.run_id, "outcome": self.outcome,
            "bits_executed": self.bits_executed, "weight_bytes": self.weight_bytes,
        }
        for metric in METRICS:
            rec[metric] = self.measured.get(metric)
            rec[f"drop_{metric}"] = self.drop(metric)
            rec[f"predicted_{metric}"] = self.predicted.get(metric)
            rec[f"predicted_drop_{metric}"] = self.drop(metric, "predicted")
        return rec


def figures(acc: accuracy.EmbeddingAccuracy) -> dict[str, float | None]:
    return {m: getattr(acc, m) for m in METRICS}


def row_figures(row: dict[str, Any]) -> dict[str, float | None]:
    return {m: number(row.get(m)) for m in METRICS}


def rank(rows: Sequence[SensitivityRow], metric: str = "cosine_mean") -> list[SensitivityRow]:
    """Most sensitive first (largest measured drop; a probe that did not run last)."""
    def key(r: SensitivityRow) -> tuple[int, float]:
        d = r.drop(metric)
        return (1, 0.0) if d is None else (0, -d)
    return sorted(rows, key=key)

"""What int8 activations change in a model run's kernel check, for every kind that runs them
(encoder, decoder): the tolerance, and a fault the tolerance alone cannot see.

Rounding to int8 is discontinuous: float32 rounding flips a few values by one step, and each flip
moves later layers' values across other steps, so a correct engine can land far from the float64
reference (measured on MiniLM: 0.002-0.04 relative RMS; one flip in a 6-text run already moves it
0.034). The kernel tolerance is the largest error of FLIP_SEEDS references whose weights carry
FLIP_PERTURBATION noise (0.060-0.067 on MiniLM), never below the float tolerance. Planted faults
land beyond it: a scale 1% off 0.12, clamping at -127 0.29, floor for round 0.47, a zero point off
by one 0.87; int8 activations not applied at all 0.11, which the second check catches at any size:
the output must be nearer the int8-activation reference than the float-activation one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..architectures import ActQuant
from ..models import calibration, rules, smoothing, source
from ..precision.quant import error_metrics
from ..prepared_caches import per_configuration

FLIP_PERTURBATION = 1e-6
"""Relative noise on every weight of the perturbed references: ten times what float32 arithmetic
does to a correct engine (with float activations its output lands about 4e-7 from the float64
reference, as does a reference with 1e-7 noise)."""
FLIP_SEEDS = 3

Forward = Callable[[Mapping[str, np.ndarray], "ActQuant | None"], np.ndarray]
"""A kind's float64 reference on its run's inputs: (weights, act_quant) -> what the engine's judged
output is compared with."""


@dataclass(frozen=True, eq=False)
class Int8Check:
    floor: float
    """How far perturbed float64 references land from the int8-activation one (the largest of
    FLIP_SEEDS): the kernel tolerance."""
    float_acts: np.ndarray
    """The float64 reference with the same weights and float activations."""

    def tolerance(self, base: float) -> float:
        return max(base, self.floor)

    @property
    def basis(self) -> str:
        return f"int8 activations: references with {FLIP_PERTURBATION:g} weight noise move by up to {self.floor:.2g}"

    def problem(self, judged: np.ndarray, reference: np.ndarray) -> str:
        """'' unless ``judged`` is nearer the float-activation reference than the int8 one
        (``reference``): int8 activations did not run. Asked only where the two references lie
        further apart than the flip noise (else no output can tell them apart: a small random
        model's int8 activations may move its output less than one flip does)."""
        if error_metrics(self.float_acts, reference)["rel_error"] <= self.floor:
            return ""
        to_int8 = error_metrics(judged, reference)["rel_error"]
        to_float = error_metrics(judged, self.float_acts)["rel_error"]
        if to_float < to_int8:
            return (f"the output is nearer the float-activation reference ({to_float:.3g}) than the "
                    f"int8-activation one ({to_int8:.3g}): int8 activations did not run")
        return ""


def flip_floor(forward: Forward, weights: Mapping[str, np.ndarray], act: ActQuant, reference: np.ndarray) -> float:
    """How far ``forward`` with int8 activations ``act`` lands from ``reference`` when every weight
    carries FLIP_PERTURBATION noise (the largest of FLIP_SEEDS)."""
    errors = []
    for seed in range(1, FLIP_SEEDS + 1):
        rng = np.random.default_rng(seed)
        noisy = {k: np.asarray(v, dtype=np.float64) * (1 + FLIP_PERTURBATION * rng.standard_normal(np.shape(v)))
                 for k, v in weights.items()}
        errors.append(error_metrics(forward(noisy, act), reference)["rel_error"])
        del noisy
    return float(max(errors))


def int8_check(forward: Forward, weights: Mapping[str, np.ndarray], act: ActQuant, reference: np.ndarray) -> Int8Check:
    """The check of a run whose int8-activation reference is ``reference`` (``forward(weights, act)``)."""
    return Int8Check(flip_floor(forward, weights, act, reference), forward(weights, None))


def smoothed_model(workload: Any, seed: int, inputs: calibration.CalibrationInputs) -> source.LoadedModel:
    """The float model a workload's int8 activations are calibrated on: its model smoothed on its
    calibration ``inputs`` (models/smoothing.py)."""
    resolved = source.resolve(workload.model, workload.random_weights)
    return smoothing.smoothed(source.load(resolved, workload.random_weights, seed), inputs)


@per_configuration(maxsize=4)
def output_misses(workload: Any, inputs: calibration.CalibrationInputs, bits: int, block_size: int, seed: int,
                  observer: str) -> tuple[str, ...]:
    """The 8-bit layers of a generating workload's plan whose x @ W^T int8 cannot hold at
    ``inputs``' floor (models/calibration.output_misses), on its smoothed model: what its
    ``int8_outputs_held`` holds in float32."""
    model = smoothed_model(workload, seed, inputs)
    plan = rules.assign(model.config.linear_layers(), workload.rules, bits, block_size)
    return calibration.output_misses(model, inputs, plan, observer)

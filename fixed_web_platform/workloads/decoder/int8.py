"""What a decoder's int8 activations are calibrated on, and which layers the fused int8 form holds
in float32 (DecoderWorkload.int8_outputs_held): apart from prepared.py, which needs the workload
module that needs this (``workload``: a DecoderWorkload)."""

from __future__ import annotations

from typing import Any

from ...models import calibration, rules, smoothing, source
from ...prepared_caches import per_configuration


def int8_model(workload: Any, seed: int) -> tuple[source.LoadedModel, calibration.DecoderRows]:
    """The float model a decoder's int8 activations are calibrated on (smoothed: models/smoothing.py)
    and its calibration inputs."""
    resolved = source.resolve(workload.model, workload.random_weights)
    texts = calibration.DecoderRows(calibration.builtin_calibration_texts())
    return smoothing.smoothed(source.load(resolved, workload.random_weights, seed), texts), texts


@per_configuration(maxsize=4)
def int8_output_misses(workload: Any, bits: int, block_size: int, seed: int,
                       observer: str) -> tuple[str, ...]:
    """The 8-bit layers whose x @ W^T int8 cannot hold at the decoder's floor
    (models/calibration.output_misses)."""
    model, texts = int8_model(workload, seed)
    plan = rules.assign(model.config.linear_layers(), workload.rules, bits, block_size)
    return calibration.output_misses(model, texts, plan, observer)

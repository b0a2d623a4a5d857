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
    """The 8-bit layers whose x @ W^T int8 cannot hold at the decoder's floor, even with
    MAX_FLOAT_CHANNELS channels apart (models/calibration.calibrate_outputs): in the fused form
    such a layer would take int8 inputs into an unfused product, its int8 weight dequantized at
    every call, slower than float32 and less accurate."""
    model, texts = int8_model(workload, seed)
    plan = rules.assign(model.config.linear_layers(), workload.rules, bits, block_size)
    outs = calibration.calibrate_outputs(model, texts, observer, tuple(p.layer.name for p in plan))
    return tuple(p.layer.name for p in plan if p.bits == 8 and outs[p.layer.name] is None)

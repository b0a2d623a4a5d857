"""What a decoder's int8 activations are calibrated on, and which layers the fused int8 form holds
in float32 (DecoderWorkload.int8_outputs_held): apart from prepared.py, which needs the workload
module that needs this (``workload``: a DecoderWorkload)."""

from __future__ import annotations

from typing import Any

from ...models import calibration, source
from ..int8_activations import output_misses, smoothed_model


def calibration_rows() -> calibration.DecoderRows:
    return calibration.DecoderRows(calibration.builtin_calibration_texts())


def int8_model(workload: Any, seed: int) -> tuple[source.LoadedModel, calibration.DecoderRows]:
    """The float model a decoder's int8 activations are calibrated on (smoothed) and its
    calibration inputs."""
    texts = calibration_rows()
    return smoothed_model(workload, seed, texts), texts


def int8_output_misses(workload: Any, bits: int, block_size: int, seed: int, observer: str) -> tuple[str, ...]:
    """The 8-bit layers whose x @ W^T int8 cannot hold at the decoder's floor."""
    return output_misses(workload, calibration_rows(), bits, block_size, seed, observer)

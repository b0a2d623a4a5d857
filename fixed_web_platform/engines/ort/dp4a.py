"""ONNX Runtime's int8-activation MatMulNBits on WebGPU (its native implementation at
``accuracy_level`` 4, where the adapter has subgroups), as a float64 reference: the kernel check of
a run whose profile shows it ran (``act_executed`` 'int8').

ORT quantizes the activations itself (``DP4AMatMulQuantizeProgram``,
onnxruntime/contrib_ops/webgpu/quantization/dp4a_matmul_nbits.cc): per ``BLOCK`` consecutive values
of a row, the scale is their largest magnitude, each value becomes ``pack4x8snorm(a / scale)``
(``floor(0.5 + 127 * clamp(v, -1, 1))``) and is multiplied back by ``scale / 127``; then integer dot
products with the weights' codes (DP4A). The reference holds x so, in float32 as the shader divides,
and multiplies the held weights in float64. A value on a rounding boundary may round the other way
on the GPU (its division is not correctly rounded): the tolerance adds how far such flips alone
move the output, measured on references of x with FLIP_PERTURBATION noise.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...precision.quant import error_metrics
from ...workloads.int8_activations import FLIP_PERTURBATION, FLIP_SEEDS
from ...workloads.matmul import PreparedWorkload

BLOCK = 128
"""Values of a row sharing one activation scale (32 vec4 per workgroup)."""


def held_activations(x: np.ndarray) -> np.ndarray:
    """x [M, K] (K a multiple of BLOCK) as ORT's DP4A kernels hold it, float32."""
    m, k = x.shape
    blocks = np.asarray(x, dtype=np.float32).reshape(m, k // BLOCK, BLOCK)
    scale = np.abs(blocks).max(axis=2, keepdims=True)
    scale = np.where(scale > 0, scale, np.float32(1))
    q = np.floor(np.float32(0.5) + np.float32(127) * np.clip(blocks / scale, -1, 1))
    return (q * (scale / np.float32(127))).astype(np.float32).reshape(m, k)


def reference(x: np.ndarray, w_exec: np.ndarray) -> np.ndarray:
    return held_activations(x).astype(np.float64) @ np.asarray(w_exec, dtype=np.float64).T


def matmul_check(prepared: PreparedWorkload) -> tuple[Callable[[np.ndarray], tuple[np.ndarray, str]], float] | None:
    """(the check of a lone matmul's output against the DP4A reference, the flips' slack), or
    None where the rule does not apply (K not a multiple of BLOCK: ORT then runs float kernels)."""
    x, w = prepared.x, prepared.w_exec
    if w is None or x.shape[1] % BLOCK:
        return None
    ref = reference(x, w)
    rng = [np.random.default_rng(seed) for seed in range(1, FLIP_SEEDS + 1)]
    slack = max(error_metrics(reference(x * (1 + FLIP_PERTURBATION * r.standard_normal(x.shape)), w), ref)["rel_error"]
                for r in rng)
    return (lambda judged: (ref, "")), float(slack)

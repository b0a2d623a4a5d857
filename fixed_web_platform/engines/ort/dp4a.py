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

A whole model (encoder, decoder) holds, in its float64 forward, the inputs of the layers whose
nodes ORT's profile names DP4A programs for (``model_check``; a layer whose K or N does not fit
runs float kernels), through architectures/int8.linear, which takes this rule as a layer's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np

from ...architectures import ActQuant
from ...precision.quant import error_metrics
from ...workloads.decoder.prepared import PreparedDecoder
from ...workloads.encoder.prepared import PreparedModel
from ...workloads.int8_activations import FLIP_PERTURBATION, FLIP_SEEDS, Int8Check, flip_floor
from ...workloads.matmul import PreparedWorkload

MODELS = (PreparedModel, PreparedDecoder)
"""The whole models whose layers a DP4A reference holds as ORT's profile names them."""
Check = tuple[Callable[[np.ndarray], tuple[np.ndarray, str]], float]
"""(the check of a judged output: (its float64 reference, a problem or ''), the flips' slack)."""

BLOCK = 128
"""Values of a row sharing one activation scale (32 vec4 per workgroup)."""


def held_activations(x: np.ndarray) -> np.ndarray:
    """x [..., K] (K a multiple of BLOCK) as ORT's DP4A kernels hold it, float32."""
    k = x.shape[-1]
    blocks = np.asarray(x, dtype=np.float32).reshape(-1, k // BLOCK, BLOCK)
    scale = np.abs(blocks).max(axis=2, keepdims=True)
    scale = np.where(scale > 0, scale, np.float32(1))
    q = np.floor(np.float32(0.5) + np.float32(127) * np.clip(blocks / scale, -1, 1))
    return (q * (scale / np.float32(127))).astype(np.float32).reshape(x.shape)


def reference(x: np.ndarray, w_exec: np.ndarray) -> np.ndarray:
    return held_activations(x).astype(np.float64) @ np.asarray(w_exec, dtype=np.float64).T


def matmul_check(prepared: PreparedWorkload) -> Check | None:
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


def model_check(prepared: PreparedModel | PreparedDecoder, layers: Collection[str]) -> Check:
    """The check of a whole model whose ``layers`` ran DP4A kernels (as ORT's profile names them
    per node): the float64 forward with those layers' inputs held by ORT's rule and the others
    float. Its slack is how far references whose weights carry FLIP_PERTURBATION noise land
    (workloads/int8_activations.flip_floor, as for the harness's own int8 models); an output
    nearer the float-activation reference than this one is a problem (the kernels the profile
    named did not quantize as ORT's rule says)."""
    weights = prepared.held.exec_weights()
    rule: ActQuant = {name: held_activations for name in layers}
    ref = prepared.forward(weights, rule)
    slack = flip_floor(prepared.forward, weights, rule, ref)
    int8 = Int8Check(slack, prepared.ref_dequantized)
    return (lambda judged: (ref, int8.problem(judged, ref))), slack

"""The ``matmul`` workload kind: one matmul shape, out[M, N] = x[M, K] @ W[N, K]^T.

Preparation in Python: seeded weights, quantize + pack, float64 references. The page receives
exactly the bytes prepared here, and the two references (original float weights, dequantized
weights) are what its output (``out``, float32 [M, N]) is judged against.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import psutil

from ..models.rules import LayerPrecision, PrecisionRule
from ..precision import quant
from ..precision.held import hold_weights
from ..precision.observers import fake_quantize, make_observer
from ..precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS, input_moment
from ..vocabulary import PER_CHANNEL_BLOCK, check_packing
from .base import Column, TensorSpec, WorkloadKind, integer_text

OUTPUT = "out"
"""The page's one output tensor: float32 [M, N]."""

_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")
KERNEL_TOLERANCE_F32 = 1e-5
KERNEL_TOLERANCE_F16 = 1e-2
"""How close to the float64 dequantized reference a correct matmul is, by its arithmetic."""
HOST_MEMORY_SHARE = 0.5
"""A workload may take at most this share of the memory available when the sweep is planned
(the browser needs the rest)."""


@dataclass(frozen=True)
class MatmulWorkload:
    """One matmul shape: out[M, N] = x[M, K] @ W[N, K]^T (W stored row per output channel)."""

    name: str
    m: int
    k: int
    n: int
    kind: ClassVar[str] = "matmul"
    rules: ClassVar[tuple[PrecisionRule, ...]] = ()
    """One weight, at the run's bits."""

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n

    @property
    def calibration_label(self) -> str:
        """What int8-activation runs calibrate on: draws of x's own distribution (calibrate_activations)."""
        return "synthetic"

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"

    @property
    def label(self) -> str:
        return self.shape

    @property
    def host_bytes(self) -> int:
        """About what preparing it takes in Python: float32 and float64 copies of x and W, the
        quantized and dequantized weights, two float64 references."""
        return 12 * self.m * self.k + 40 * self.n * self.k + 24 * self.m * self.n

    def validate(self, bits: int, block_size: int) -> None:
        validate_shape(self, bits, block_size)
        available = psutil.virtual_memory().available
        if self.host_bytes > HOST_MEMORY_SHARE * available:
            raise ValueError(f"shape {self.shape} needs about {self.host_bytes / 2**30:.1f} GiB of host "
                             f"memory to prepare; this machine has {available / 2**30:.1f} GiB available")

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        return {"m": self.m, "k": self.k, "n": self.n}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "m": self.m, "k": self.k, "n": self.n}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> MatmulWorkload:
        return cls(str(doc["name"]), int(doc["m"]), int(doc["k"]), int(doc["n"]))


DEFAULT_WORKLOADS = (
    # BERT-base FFN up-projection for one token (decode-like GEMV) and an attention projection
    # over a 128-token sequence (prefill-like GEMM).
    MatmulWorkload("bert-base-ffn-gemv", 1, 768, 3072),
    MatmulWorkload("bert-base-attn-gemm", 128, 768, 768),
)


def parse_shape(text: str) -> MatmulWorkload:
    """'MxKxN' -> MatmulWorkload; ValueError with one clear line otherwise."""
    match = _SHAPE.match(text.strip().lower())
    if not match:
        raise ValueError(f"shape {text!r} is not MxKxN (three positive integers, e.g. 1x768x3072)")
    m, k, n = (int(g) for g in match.groups())
    if min(m, k, n) <= 0:
        raise ValueError(f"shape {text!r}: every dimension must be a positive integer")
    return MatmulWorkload(f"custom-{m}x{k}x{n}", m, k, n)


@dataclass(frozen=True)
class PreparedWorkload:
    workload: MatmulWorkload
    bits: int
    block_size: int
    weight_format: str
    weight_dtype: str
    """Element type of the stored weights: float32, float16, int8/int4/int2 (or uint* for WebNN)."""
    tensors: dict[str, bytes]
    """x, then the weight tensors in the order the WGSL kernels bind them: w[, scales, zero_points].
    Packed integers are little-endian u32 words, first element in the lowest bits."""
    weight_bytes: int
    ref_float: np.ndarray
    """float64 result with the ORIGINAL float weights: what quantization costs the user."""
    ref_dequantized: np.ndarray
    """float64 result with the weights (and activations) the kernel actually holds: is the
    kernel right."""
    act_bits: int = 32
    act_scale: float = 0.0
    act_zero_point: int = 0
    """int8 activations: x = (q - zero_point) * scale, per tensor, calibrated (0 at 32 bits)."""
    observer: str = ""
    out_scale: float = 0.0
    out_zero_point: int = 0
    """int8 outputs (the WebNN form whose output goes through quantizeLinear -> dequantizeLinear):
    out = (q - zero_point) * scale, per tensor, calibrated like x; 0 when the output stays float."""
    weight_quant: str = ""
    """The weight quantizer that made the codes (precision/quantizers.py); '' for float weights."""
    zero_point_dtype: str = ""
    """How the zero points are held: the weights' integer type, or float32 (a float offset)."""
    w_exec: np.ndarray | None = None
    """The weights as held, float32 [N, K]: what an engine that quantizes x by its own rule
    multiplies (ORT's DP4A kernels: engines/ort/dp4a.py)."""

    @property
    def x(self) -> np.ndarray:
        """The timed float32 x [M, K] (None-safe only at float activations)."""
        return np.frombuffer(self.tensors["x"], dtype="<f4").reshape(self.workload.m, self.workload.k)

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return (TensorSpec(OUTPUT, "float32", (self.workload.m, self.workload.n)),)

    def held_fields(self) -> dict[str, str]:
        """The EngineJob fields of what the run holds: the weight format and its data types."""
        return {"weight_format": self.weight_format, "weight_dtype": self.weight_dtype,
                "scale_dtype": "float32" if self.block_size else "", "zero_point_dtype": self.zero_point_dtype}

    @property
    def weight_bytes_f32(self) -> int:
        return self.workload.n * self.workload.k * 4

    layers: ClassVar[tuple[LayerPrecision, ...]] = ()
    """A lone matmul has no layer plan."""

    def tolerance(self, compute_dtype: str) -> float:
        own = KERNEL_TOLERANCE_F16 if compute_dtype == "f16" else KERNEL_TOLERANCE_F32
        if not self.out_scale:
            return own
        rms = float(np.sqrt(np.mean(self.ref_dequantized ** 2))) or 1.0
        return own + self.out_scale / rms

    @property
    def tolerance_basis(self) -> str:
        """Why the tolerance is what it is, where it is not the arithmetic's own: an int8 output
        may round to the next step where the browser's integer kernel requantizes differently."""
        return ("one int8 output step on every element (the integer kernel requantizes with its own "
                "rounding)") if self.out_scale else ""

    def kernel_problem(self, judged: np.ndarray) -> str:
        """A fault beyond the tolerance check (none for a matmul: its references are exact)."""
        return ""

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The part of the page's output the references cover (all of it)."""
        return outputs[OUTPUT]

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        """Row figures only this kind has (none: GFLOP/s is every kind's)."""
        return {}

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Nothing saved: the output is reproducible from the seed."""
        return {}


def _seed_for(workload: MatmulWorkload, seed: int) -> int:
    return zlib.crc32(f"{workload.m}x{workload.k}x{workload.n}:{seed}".encode())


def validate_shape(workload: MatmulWorkload, bits: int, block_size: int) -> None:
    """Raise ValueError with one clear line when a shape cannot run at these bits."""
    if min(workload.m, workload.k, workload.n) <= 0:
        raise ValueError(f"shape {workload.shape}: every dimension must be a positive integer")
    check_packing(workload.k, bits, block_size, f"shape {workload.shape}")
    if bits in (32, 16) and workload.k % 4:
        raise ValueError(f"shape {workload.shape}: K={workload.k} must be a multiple of 4 "
                         "(the kernels read K four values at a time)")


@functools.lru_cache(maxsize=4)
def _float_tensors(workload: MatmulWorkload, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(_seed_for(workload, seed))
    x = rng.standard_normal((workload.m, workload.k)).astype(np.float32)
    w = (rng.standard_normal((workload.n, workload.k)) / np.sqrt(workload.k)).astype(np.float32)
    return x, w


def float_input(workload: MatmulWorkload, seed: int) -> np.ndarray:
    """The timed x as float32, for pages that quantize it themselves (WebNN's quantizeLinear)."""
    return _float_tensors(workload, seed)[0]


CALIBRATION_BATCHES = 8
"""Synthetic calibration set of the matmul sweep's int8 activations and calibrated weight
quantizers (gptq): this many draws of x from the distribution the timed x comes from (other
seeds), seen by the observer (or the quantizer) before x is."""


def _calibration_draws(workload: MatmulWorkload, seed: int) -> list[np.ndarray]:
    return [np.random.default_rng(_seed_for(workload, seed) + 1 + i).standard_normal(
        (workload.m, workload.k)).astype(np.float32) for i in range(CALIBRATION_BATCHES)]


def _qparams(observer: str, values: list[np.ndarray]) -> tuple[float, int]:
    obs = make_observer(observer)
    for v in values:
        obs.observe(v)
    scale, zero_point = obs.qparams(8)
    return float(scale.reshape(-1)[0]), int(zero_point.reshape(-1)[0])


def calibrate_activations(workload: MatmulWorkload, seed: int, observer: str) -> tuple[float, int]:
    """(scale, zero point) of int8 activations, per tensor, from the synthetic calibration set."""
    return _qparams(observer, _calibration_draws(workload, seed))


def calibrate_outputs(workload: MatmulWorkload, seed: int, observer: str, w_exec: np.ndarray,
                      act: tuple[float, int]) -> tuple[float, int]:
    """(scale, zero point) of int8 outputs: the observer sees the calibration draws through the
    int8 inputs and the held weights, as it sees x."""
    scale, zero_point = np.float32(act[0]), np.int64(act[1])
    outs = []
    for x in _calibration_draws(workload, seed):
        xq = quant.dequantize_linear(quant.quantize_linear(x, scale, zero_point, "int8"), scale, zero_point)
        outs.append((xq.astype(np.float64) @ w_exec.astype(np.float64).T).astype(np.float32))
    return _qparams(observer, outs)


@functools.lru_cache(maxsize=4)
def prepare(
    workload: MatmulWorkload, bits: int, block_size: int, seed: int, unsigned: bool = False,
    act_bits: int = 32, observer: str = "", out_int8: bool = False, weight_quant: str = DEFAULT_QUANTIZER,
) -> PreparedWorkload:
    """Bytes and references for one configuration. ``unsigned`` stores 8/4-bit weights as
    uint8/uint4 (the same values shifted by 2^(bits-1), zero points too) for WebNN contexts
    that list only unsigned types; the WebGPU kernel reads the signed form. ``act_bits`` 8:
    x is held as int8 (four to a u32 word, first in the lowest bits) with the scale and zero
    point ``observer`` calibrated; ref_float stays the all-float result. ``out_int8`` (with
    ``act_bits`` 8): the output goes through int8 too, with its own calibrated parameters, and
    ref_dequantized with it. ``weight_quant``: the quantizer of 8/4/2-bit weights (precision/quantizers.py)."""
    validate_shape(workload, bits, block_size)
    x, w = _float_tensors(workload, seed)
    x64 = x.astype(np.float64)
    ref_float = x64 @ w.astype(np.float64).T
    # a calibrated quantizer (gptq) sees x's distribution through the calibration draws, never x
    hessian = input_moment(np.concatenate(_calibration_draws(workload, seed))) \
        if QUANTIZERS[weight_quant].calibrated and bits <= 8 else None
    held = hold_weights(w, bits, block_size, unsigned, weight_quant, hessian)
    tensors = {"x": x.tobytes(), **held.tensors}
    act: dict[str, Any] = {}
    if act_bits == 8:
        if workload.k % 4:
            raise ValueError(f"shape {workload.shape}: K={workload.k} must be a multiple of 4 for "
                             "int8 activations packed four to a word")
        scale, zero_point = calibrate_activations(workload, seed, observer)
        qx = quant.quantize_linear(x, np.float32(scale), np.int64(zero_point), "int8")
        x64 = quant.dequantize_linear(qx, np.float32(scale), np.int64(zero_point)).astype(np.float64)
        tensors["x"] = quant.pack_u32_words(qx, 8).tobytes()
        act = {"act_bits": 8, "act_scale": scale, "act_zero_point": zero_point, "observer": observer}
    ref_dequantized = x64 @ held.w_exec.astype(np.float64).T
    if out_int8:
        if act_bits != 8:
            raise ValueError("int8 outputs go with int8 activations")
        out_scale, out_zero_point = calibrate_outputs(workload, seed, observer, held.w_exec,
                                                      (act["act_scale"], act["act_zero_point"]))
        ref_dequantized = fake_quantize(ref_dequantized, np.float32(out_scale), np.int64(out_zero_point), 8)
        act |= {"out_scale": out_scale, "out_zero_point": out_zero_point}
    return PreparedWorkload(
        workload=workload,
        bits=bits,
        block_size=held.block_size,
        weight_format=held.weight_format,
        weight_dtype=held.weight_dtype,
        tensors=tensors,
        weight_bytes=held.weight_bytes,
        ref_float=ref_float,
        ref_dequantized=ref_dequantized,
        weight_quant=held.quantizer,
        zero_point_dtype=held.zero_point_dtype,
        w_exec=held.w_exec,
        **act,
    )


class MatmulKind(WorkloadKind):
    name = MatmulWorkload.kind
    columns = (
        Column("m", int, "Rows of x (tokens): out[M, N] = x[M, K] @ W[N, K]^T; blank on other kinds' rows."),
        Column("k", int, "The reduction dimension (quantization blocks run along it)."),
        Column("n", int, "Output channels (rows of W)."),
    )
    identity = ("m", "k", "n")

    def from_json(self, doc: Mapping[str, Any]) -> MatmulWorkload:
        return MatmulWorkload.from_json(dict(doc))

    def shape(self, row: Mapping[str, Any]) -> str:
        return "x".join(integer_text(row.get(c)) for c in ("m", "k", "n"))


MATMUL = MatmulKind()

"""A run of an ONNX file prepared in Python: the variant's bytes and the inputs for the page,
the references (reference.py), and the figures of a row.

The page returns every graph output, in the graph's order: float outputs as float32, integer
and bool outputs as int32. What the references judge (``judged``) is every float output,
flattened and joined in that order.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...formats import onnx_inventory
from ...models.rules import LayerPrecision
from ...precision.quant import cosine_similarity, max_abs_error
from ...vocabulary import PER_CHANNEL_BLOCK
from ..base import TensorSpec
from . import graph, reference
from .inputs import Feeds
from .variants import DYNAMIC_VARIANTS, QDQ, Variant
from .workload import OnnxFileWorkload

WIRE_DTYPES = {"f": "float32", "i": "int32", "u": "int32", "b": "int32"}
LOGITS_MIN_CLASSES = 2
LOGITS_MAX_RANK = 3
"""A float output of rank 2 or 3 ([batch, classes], [batch, positions, classes]) whose last
dimension is at least LOGITS_MIN_CLASSES is read as class scores or logits: its top-1 (argmax
over the last axis) is compared with fp32's, position by position. Rank-4 outputs are maps
([N, C, H, W]: a detector's probability map), whose rows are not classes."""


def input_key(index: int) -> str:
    """The page's binding name of graph input ``index`` (graph names may hold any character)."""
    return f"in{index}"


def looks_like_logits(value: np.ndarray) -> bool:
    return value.dtype.kind == "f" and 2 <= value.ndim <= LOGITS_MAX_RANK and value.shape[-1] >= LOGITS_MIN_CLASSES


def top1_agreement(out: np.ndarray, ref: np.ndarray) -> float:
    """Share of positions where the class ``out`` ranks first is one fp32 ranks first (a tie in
    fp32, e.g. saturated probabilities, accepts any of its tied classes)."""
    picked = np.take_along_axis(np.asarray(ref), np.argmax(out, axis=-1)[..., None], axis=-1)[..., 0]
    return float(np.mean(picked >= np.max(ref, axis=-1)))


@dataclass(frozen=True, eq=False)
class PreparedOnnx:
    workload: OnnxFileWorkload
    variant: Variant
    bits: int
    feeds: Feeds
    fp32: dict[str, np.ndarray]
    """The user's fp32 file on the CPU provider: what precision costs."""
    held: dict[str, np.ndarray]
    """The variant the browser runs, on the CPU provider: is the browser right (an int8 QDQ variant
    run as written, without ORT's fused integer kernels: ``prepare``)."""
    spread: float
    """How far the variant's CPU runs with and without ORT's graph optimizations land apart."""
    weight_bytes_f32: int
    layers: tuple[LayerPrecision, ...]

    @property
    def weight_bytes(self) -> int:
        return self.variant.weight_bytes

    @functools.cached_property
    def inventory(self) -> onnx_inventory.Inventory:
        """What the variant's file holds, read from its nodes."""
        return onnx_inventory.read(self.variant.path)

    def promise(self) -> str:
        """Whether the file holds what it is called: the user's file by its own name (fp32, the
        file as given), a variant by the variant's name ('q4')."""
        named = self.variant.path.name if self.variant.name == "fp32" else f"{self.variant.name}.onnx"
        return onnx_inventory.promise(named, self.inventory)

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return tuple(TensorSpec(name, WIRE_DTYPES[v.dtype.kind], tuple(int(d) for d in v.shape))
                     for name, v in self.fp32.items())

    @property
    def float_names(self) -> list[str]:
        return reference.float_outputs(self.fp32)

    def _join(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(values[n], np.float64).ravel() for n in self.float_names])

    @property
    def ref_float(self) -> np.ndarray:
        return self._join(self.fp32)

    @property
    def ref_dequantized(self) -> np.ndarray:
        return self._join(self.held)

    @property
    def tolerance_basis(self) -> str:
        evaluator = " and onnx's reference evaluator" if self.variant.name in DYNAMIC_VARIANTS else ""
        return (f"{reference.SPREAD_FACTOR:g}x the spread of this variant's onnxruntime CPU runs with and "
                f"without graph optimizations{evaluator} ({self.spread:.2g}), at least the arithmetic's floor")

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self._join(outputs)

    def tolerance(self, compute_dtype: str) -> float:
        return reference.tolerance(compute_dtype, self.variant.name == QDQ, self.spread)

    def kernel_problem(self, judged: np.ndarray) -> str:
        return "" if np.isfinite(judged).all() else "the outputs hold NaN or infinity"

    def accuracy(self, outputs: Mapping[str, np.ndarray]) -> dict[str, dict[str, float]]:
        """Per output vs fp32: cosine, relative RMS, max abs error, and top-1 agreement for outputs
        that look like class scores (integer outputs: the share of equal values)."""
        figures: dict[str, dict[str, float]] = {}
        for name, ref in self.fp32.items():
            out = np.asarray(outputs[name])
            if ref.dtype.kind != "f":
                figures[name] = {"equal": float(np.mean(out.ravel() == ref.ravel().astype(out.dtype)))}
                continue
            f = {"cosine": cosine_similarity(out, ref), "rel_rms": reference.rel_rms(out, ref),
                 "max_abs": max_abs_error(out, ref)}
            if looks_like_logits(ref):
                f["top1"] = top1_agreement(out, ref)
            figures[name] = f
        return figures

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        per = self.accuracy(outputs)
        cosines = [f["cosine"] for f in per.values() if "cosine" in f]
        top1 = [(f["top1"], int(np.prod(self.fp32[n].shape[:-1]))) for n, f in per.items() if "top1" in f]
        text = "; ".join(f"{n}: " + " ".join(f"{k} {v:.4g}" for k, v in f.items()) for n, f in per.items())
        return {
            "nodes": self.variant.nodes,
            "nodes_quantized": self.variant.nodes_quantized,
            "onnx_inventory": self.inventory.text(),
            "precision_promise": self.promise(),
            "outputs_cosine_min": min(cosines) if cosines else None,
            "top1_vs_fp32": (sum(a * w for a, w in top1) / sum(w for _, w in top1)) if top1 else None,
            "output_figures": text,
        }

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """What was fed and what the browser returned, with fp32's outputs to compare them to."""
        return ({f"input:{n}": a for n, a in self.feeds.arrays.items()}
                | {f"output:{n}": np.asarray(v) for n, v in outputs.items()}
                | {f"fp32:{n}": v for n, v in self.fp32.items()})

    def input_tensors(self) -> dict[str, bytes]:
        return {input_key(i): np.ascontiguousarray(self.feeds.arrays[s.name]).tobytes()
                for i, s in enumerate(self.workload.signature)}

    def input_options(self) -> list[dict[str, Any]]:
        return [{"name": s.name, "key": input_key(i), "dtype": self.feeds.arrays[s.name].dtype.name,
                 "shape": list(self.feeds.arrays[s.name].shape)}
                for i, s in enumerate(self.workload.signature)]


def prepare(workload: OnnxFileWorkload, variant: Variant, bits: int, block_size: int) -> PreparedOnnx:
    """The references of ``variant`` on the workload's inputs; OnnxFileError when onnxruntime
    cannot run the variant on the CPU provider or its outputs differ in shape from the file's."""
    feeds = workload.feeds()
    path = workload.path
    fp32 = reference.cached_run(path, workload.sha256, feeds.arrays, feeds.digest)
    key = variant.path.name if variant.path != path else workload.sha256  # cache files are named by content
    held = reference.cached_run(variant.path, key, feeds.arrays, feeds.digest)
    unoptimized = reference.cached_run(variant.path, key, feeds.arrays, feeds.digest, optimized=False)
    if variant.name == QDQ:
        # The graph as written (DequantizeLinear -> float op -> QuantizeLinear) is what an int8 QDQ
        # file means; ORT's fused int8 GEMM is one CPU's rendering of it, and on an AVX2 CPU without
        # VNNI its u8s8 kernel saturates 16-bit pair sums (0.12 relative RMS off on the test model).
        held, unoptimized = unoptimized, held
    for name, ref in fp32.items():
        if name not in held or held[name].shape != ref.shape:
            raise graph.OnnxFileError(f"variant {variant.name}'s output {name} differs from the file's in shape")
    plan = []
    for layer in workload.weight_layers:
        held_as = variant.node_dtypes.get(layer.name, "").partition("=")[0]
        low = _held_low(held_as)
        plan.append(LayerPrecision(layer, _layer_bits(held_as), block_size if held_as.startswith("MatMulNBits")
                                   else PER_CHANNEL_BLOCK, "--bits" if low or variant.name == "fp32"
                                   else "kept float by the tool"))
    spread = reference.spread(held, unoptimized)
    if onnx_inventory.read(variant.path).dynamic:
        spread = max(spread, reference.spread(held, reference.evaluate(variant.path, feeds.arrays)))
    return PreparedOnnx(workload, variant, bits, feeds, fp32, held, spread,
                        workload.weight_bytes_f32, tuple(plan))


def _held_low(dtype: str) -> bool:
    return dtype.startswith("MatMulNBits") or dtype.endswith((":float16", ":QDQ8"))


def _layer_bits(dtype: str) -> int:
    if dtype.startswith("MatMulNBits"):
        return int(dtype[len("MatMulNBits"):].split("=")[0])
    if dtype.endswith(":float16"):
        return 16
    if dtype.endswith(":QDQ8"):
        return 8
    return 32

"""A transformers.js run prepared in Python: the kind's float preparation (inputs, PyTorch fp32,
its figures) with the dtype file's own reference in place of the harness's held bytes.

Whether the browser is right is judged against onnxruntime on the CPU running the same dtype
file on the same inputs, as an ONNX file's variants are (workloads/onnx_file/reference.py): the
kernel tolerance is a multiple of how far that file's runs land apart with ORT's graph
optimizations on and off and, for dynamic int8 files, from onnx's own reference evaluator; never
below the arithmetic's floor. What precision costs is the kind's own figures against PyTorch fp32.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...formats import onnx_inventory
from ...workloads.base import TensorSpec
from ...workloads.onnx_file import OnnxFileError, reference

RunFile = Callable[[Mapping[str, Path], str], np.ndarray]
"""(the dtype's files by graph name, 'optimized' | 'unoptimized' | 'evaluator') -> the judged
outputs (float64)."""


@dataclass(frozen=True, eq=False)
class PreparedTjs:
    base: Any
    """The kind's preparation at 32 bits (workloads/<kind>/prepared.py)."""
    dtype: str
    files: dict[str, Path]
    """The dtype's graphs by their names in the folder ('onnx/model_q4.onnx': what each promises)."""
    ref_dequantized: np.ndarray
    """onnxruntime (CPU) on the same dtype file and inputs, as ``judged`` reads the page's outputs."""
    spread: float
    inventories: dict[str, onnx_inventory.Inventory]
    """What each file holds, by its name."""
    unloadable: str = ""
    """Why onnxruntime's CPU cannot load or run the dtype's files ('' when it can): the page still
    loads them, so a file the library fails on too is a failed row with the library's own error,
    and outputs of one it loads have nothing to be judged against."""

    @property
    def dynamic(self) -> bool:
        """A file quantizes activations at run time."""
        return self.inventory.dynamic

    @property
    def inventory(self) -> onnx_inventory.Inventory:
        return onnx_inventory.combined(self.inventories.values())

    def promise(self) -> str:
        return "; ".join(f for name, inv in self.inventories.items() if (f := onnx_inventory.promise(name, inv)))

    @property
    def ref_float(self) -> np.ndarray:
        return self.base.ref_float

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.base.outputs

    @property
    def weight_bytes(self) -> int:
        """Every constant byte of the dtype file (float tensors included), as a held model's."""
        return sum(self.inventory.bytes_by_precision().values())

    @property
    def weight_bytes_f32(self) -> int:
        return self.base.weight_bytes_f32

    @property
    def layers(self) -> tuple[Any, ...]:
        return ()

    @property
    def tolerance_basis(self) -> str:
        return (f"{reference.SPREAD_FACTOR:g}x the spread of the {self.dtype} files' onnxruntime CPU runs with and "
                f"without graph optimizations{' and onnx reference evaluator' if self.dynamic else ''} "
                f"({self.spread:.2g}), at least the arithmetic's floor")

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self.base.judged(outputs), np.float64)

    def tolerance(self, compute_dtype: str) -> float:
        return reference.tolerance(compute_dtype, False, self.spread)

    def kernel_problem(self, judged: np.ndarray) -> str:
        if self.unloadable:
            return f"{self.unloadable}: the browser's outputs cannot be judged"
        return "" if np.isfinite(judged).all() else "the outputs hold NaN or infinity"

    def precision_figures(self, judged: np.ndarray, compute_dtype: str) -> dict[str, Any]:
        base = getattr(self.base, "precision_figures", None)
        return base(judged, compute_dtype) if base else {}

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        return self.base.figures(outputs, median_ms) | {
            "onnx_inventory": self.inventory.text(),
            "precision_promise": self.promise()}

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> Any:
        arrays = {k: v for k, v in self.base.output_arrays(outputs).items() if not k.startswith("reference_")}
        return arrays | {"reference_onnxruntime_cpu": self.saved_reference()}

    def saved_reference(self) -> np.ndarray:
        """What outputs/<run_id> keeps of the CPU reference (all of it, unless a kind says less)."""
        return self.ref_dequantized


def judge_files(base: Any, dtype: str, files: dict[str, Path], run_files: RunFile,
                kind: type[PreparedTjs] = PreparedTjs) -> PreparedTjs:
    """The dtype files' references on the kind's inputs (``run_files``)."""
    try:
        held = run_files(files, "optimized")
    except OnnxFileError as exc:  # a user's file: the page still tries it (``unloadable``)
        return kind(base, dtype, files, np.array(np.nan), np.nan, {}, unloadable=str(exc))
    inventories = {n: onnx_inventory.read(p) for n, p in files.items()}
    dynamic = onnx_inventory.combined(inventories.values()).dynamic
    others = ("unoptimized", "evaluator") if dynamic else ("unoptimized",)
    spread = max(reference.rel_rms(run_files(files, how), held) for how in others)
    return kind(base, dtype, files, held, spread, inventories)


def run_graph(path: Path, feeds: Mapping[str, np.ndarray], how: str) -> dict[str, np.ndarray]:
    """The graph's outputs on ``feeds``: onnxruntime's CPU provider ('optimized', 'unoptimized')
    or onnx's reference evaluator ('evaluator')."""
    return reference.evaluate(path, feeds) if how == "evaluator" else reference.run(path, feeds, how == "optimized")

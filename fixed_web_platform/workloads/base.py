"""What a workload kind is to the rest of the harness (a plug-in: matmul, encoder, and next
decoder and speech), and the typed pieces every kind fills in.

- ``Workload``: one named piece of work of a kind (a matmul shape, a model at a batch x sequence
  length), validated up front, saved in plan.json.
- ``Prepared``: what a run of it prepares in Python: the named output tensors the page returns,
  the two float64 references and the tolerance rule, the kind's own figures of a row, and the
  arrays saved beside it.
- ``WorkloadKind``: the kind itself: its workload type, the columns its figures add to a row,
  which of them identify a configuration (compare, report), and any reply fields of its own
  (e.g. per-token timestamps of kinds that generate).

Adding a kind: a module or package ``workloads/<kind>`` with these, and one line in
``workloads/__init__.py``'s ``KINDS``. Engines that run it add their support modules and one
line each in ``engines/registry.py``; the report adds its section in ``report/sections.py``.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from ..models.rules import LayerPrecision, PrecisionRule
from ..vocabulary import parse_count

TENSOR_DTYPES = {"float32": "<f4", "int32": "<i4"}
SavedOutputs = dict[str, np.ndarray] | list[dict[str, Any]]
"""What a run's outputs/<run_id> file holds: named arrays (.npz), or one record per item (.json:
a speech run's clips with their transcripts)."""
"""Element types an output tensor may have on the wire (little-endian)."""


@dataclass(frozen=True)
class TensorSpec:
    """A named tensor the page returns: dtype and shape (outputs travel in this order, packed)."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.dtype not in TENSOR_DTYPES:
            raise ValueError(f"tensor {self.name}: dtype {self.dtype!r} is not one of {', '.join(TENSOR_DTYPES)}")

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(TENSOR_DTYPES[self.dtype]).itemsize

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class Column:
    """One column a kind adds to result rows."""

    name: str
    type: type
    """int, float or str: how readers parse it (ints and floats may be blank)."""
    doc: str
    performance: bool = False
    """A speed figure: blanked, like the core latency figures, in any row that is not ok."""


class Workload(Protocol):
    @property
    def kind(self) -> str:
        """The name of its workload kind (a ClassVar of the workload's class)."""

    @property
    def name(self) -> str: ...

    @property
    def label(self) -> str:
        """Short text for tables and progress lines (a matmul's MxKxN)."""

    @property
    def flops(self) -> int: ...

    @property
    def rules(self) -> tuple[PrecisionRule, ...]:
        """Precision rules setting some linear layers' bits apart from the run's (--mixed-precision,
        --precision-rules, a sensitivity probe); () where every weight is at the run's bits."""

    @property
    def calibration_label(self) -> str:
        """What int8-activation runs of it calibrate on (the row's ``calibration``)."""

    def validate(self, bits: int, block_size: int) -> None:
        """Raise ValueError with one clear line when this workload cannot run at these bits."""

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        """This workload's own columns of a result row (a matmul's m, k, n; a model's name,
        batch and sequence length), known before it runs."""

    def to_json(self) -> dict[str, Any]: ...


class Prepared(Protocol):
    """A run prepared in Python: what the page's output is judged against, and how."""

    @property
    def ref_float(self) -> np.ndarray:
        """float64 result with the ORIGINAL float weights (or PyTorch fp32): what precision costs."""

    @property
    def ref_dequantized(self) -> np.ndarray:
        """float64 result with the weights (and activations) the engine holds: is the engine right."""

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        """The tensors the page returns, in order."""

    @property
    def weight_bytes(self) -> int: ...

    @property
    def weight_bytes_f32(self) -> int: ...

    @property
    def layers(self) -> tuple[LayerPrecision, ...]:
        """The precision plan of a model's linear layers (layers.csv); () for a lone matmul."""

    @property
    def tolerance_basis(self) -> str:
        """Why the tolerance is what it is, where it is not the arithmetic's own ('' otherwise)."""

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The part of the outputs the references cover."""

    def tolerance(self, compute_dtype: str) -> float:
        """Relative RMS error vs ``ref_dequantized`` beyond which the engine is wrong."""

    def kernel_problem(self, judged: np.ndarray) -> str:
        """A fault the tolerance alone cannot see ('' for none). A kind whose page returns each
        stage's output may instead have ``staged_check(outputs) -> (reference, problem)``: the
        reference of the judged output computed from the page's own input to the last stage, and
        any fault of the stages before (speech with int8 activations: workloads/speech/prepared.py)."""

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        """The kind's own measured figures of the row (its declared columns), from the page's
        outputs (checked, by name). A kind may also have ``precision_figures(judged,
        compute_dtype)``: figures that depend on the arithmetic that ran (a decoder's float16
        overflow)."""

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> SavedOutputs:
        """What outputs/<run_id> holds ({} or []: nothing saved)."""


class HeldModelFacts:
    """What a whole-model kind's Prepared reads off the model it holds (``held``:
    models.quantized.HeldModel) and its layer plan (``plan``)."""

    held: Any
    plan: tuple[LayerPrecision, ...]

    @property
    def weight_bytes(self) -> int:
        return self.held.weight_bytes

    @property
    def weight_bytes_f32(self) -> int:
        return self.held.weight_bytes_f32

    @property
    def layers(self) -> tuple[LayerPrecision, ...]:
        return self.plan


@dataclass(frozen=True)
class KindTiming:
    """How the product's protocol times one kind's iterations when no flag says otherwise
    (run_spec.MODEL_TIMING leaves these to the kind; docs/concepts/steady-state.md#per-kind):
    set from the iteration times measured on the kind's default sweeps."""

    warmup: int
    """Iterations every page runs before any may count as steady (after the cold one)."""
    min_iterations: int
    """Iterations after the floor before a page may stop steady: the classifier's need
    (series/steady.py MIN_SERIES) for a series it can judge."""
    steady_cap_s: float
    """Seconds a page iterates at most, steady or not (after its floor)..."""
    cap_waits: int = 3
    """...but not before this many iterations after its floor (only the page's time budget stops
    it sooner): where a figure needs the classifier's minimum whatever an iteration costs (a
    decoder's time to first token, one a generation), the minimum."""


@dataclass(frozen=True)
class PageIterations:
    """One page load's iterations after its floor, as a kind's speed figures read them."""

    fields: Mapping[str, Any]
    """The kind's reply fields, their per-iteration lists from the floor on."""
    start_ms: tuple[float, ...]
    """Each of those iterations' start (ms from the page's first warm iteration)."""
    steady_start: int
    """The first of them the row's whole-iteration figures use (the steady segment's of the
    page's series, or 0)."""


def integer_text(value: Any) -> str:
    """'768' from 768, 768.0 or '768' (a table cell); '?' for a blank."""
    try:
        return str(int(float(value)))
    except (TypeError, ValueError, OverflowError):
        return "?"


class WorkloadKind(ABC):
    name: ClassVar[str]
    """The kind's name in plan files and rows ('matmul', 'encoder')."""
    aliases: ClassVar[tuple[str, ...]] = ()
    """Older names plan files may carry."""
    columns: ClassVar[tuple[Column, ...]] = ()
    """The columns this kind adds to a row (shared names across kinds mean the same thing)."""
    identity: ClassVar[tuple[str, ...]] = ()
    """Which of them tell what the work is apart (a matmul's shape; a model, its weights, inputs
    and shapes): with the core's, a setting compared across precisions."""
    precision_identity: ClassVar[tuple[str, ...]] = ()
    """Which of them are part of the precision asked for (a model's precision plan and rules)."""
    kind_timing: ClassVar[KindTiming] = KindTiming(warmup=3, min_iterations=10, steady_cap_s=10.0)
    """The protocol's per-kind values (a lone kernel's here: the main command's defaults)."""

    @abstractmethod
    def from_json(self, doc: Mapping[str, Any]) -> Workload:
        """A workload of this kind from its plan-file form."""

    @abstractmethod
    def shape(self, row: Mapping[str, Any]) -> str:
        """What a row of this kind ran, in one short cell of a table ('1x768x3072',
        '4x32 tokens'), from its identity columns (a row, a summary row or compare's config)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Command-line options only this kind takes (an encoder's --batch-size); none here."""

    def model_workloads(self, model: str, options: Mapping[str, Any]) -> tuple[Workload, ...]:
        """The workloads that run ``model`` (whose architecture this kind runs) with the user's
        options by name (the CLI's parsed arguments, or the API's keywords): one, or one per
        value of an option that takes several (a decoder's prompt lengths)."""
        raise ValueError(f"the {self.name} workload kind runs no models (model {model})")

    def reply_fields(self, payload: Mapping[str, Any], max_iterations: int) -> dict[str, Any]:
        """Fields of a page's reply only this kind has (e.g. per-token timestamps), checked; the
        page's data is not trusted (raise errors.PageDataError). None here."""
        return {}

    iteration_lists: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Reply-field lists with one entry per iteration, as (field, key): the figures take them
    from the floor on (``from_iteration``; PageIterations)."""

    def from_iteration(self, fields: Mapping[str, Any], start: int) -> dict[str, Any]:
        """A page's reply fields with its per-iteration lists from iteration ``start`` on."""
        out = dict(fields)
        for field, key in self.iteration_lists:
            if isinstance(out.get(field), dict) and isinstance(out[field].get(key), list):
                out[field] = {**out[field], key: out[field][key][start:]}
        return out

    def judged_wall(self, fields: Mapping[str, Any], wall_ms: Sequence[float]) -> Sequence[float]:
        """A page's wall-clock series as the steady-state classifier should see it: as measured
        here; a kind whose iterations are not alike by design (a speech page takes its clips in
        turn) evens them out. The figures always come from the measured series."""
        return wall_ms

    def speed_figures(self, workload: Workload, pages: Sequence[PageIterations]) -> dict[str, Any]:
        """The kind's own speed columns from each page load of a run (e.g. time to first token
        from per-token timestamps), each figure from its own series' steady segment where the
        kind judges one (series/steps.py), else from ``steady_start`` on. None here."""
        return {}


def positive_count(text: str) -> int:
    """An argparse type for a kind's counts (sizes, tokens, clips): a whole number of at least 1."""
    try:
        return parse_count(text, 1)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

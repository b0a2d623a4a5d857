"""The ``onnx`` workload: one ONNX file the user brings, fed one set of inputs (made from its
signatures or read from ``--inputs FILE.npz``), swept over its precision variants (variants.py).
Checked when it is made: the file parses, every symbolic dimension has a value, the inputs match,
and onnxruntime runs the fp32 file on the CPU provider (the reference) with float outputs to judge.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...architectures.base import LinearLayer
from ...models.rules import PrecisionRule
from ...vocabulary import PER_CHANNEL_BLOCK
from . import graph, inputs, reference
from .graph import OnnxFileError, TensorSig
from .variants import BITS_VARIANTS, NBITS_VARIANTS, Q4F16, QDQ, WIDTHS

MIN_BLOCK = 16
"""MatMulNBits blocks: a power of two, at least 16 (onnxruntime's quantizer and kernels)."""


@dataclass(frozen=True)
class OnnxFileWorkload:
    name: str
    """The file's name without .onnx (tables, progress lines)."""
    model: str
    """The model as the user named it (a file or a folder)."""
    path: str
    sha256: str
    dims: tuple[tuple[str, int], ...] = ()
    id_range: tuple[int, int] = inputs.DEFAULT_ID_RANGE
    inputs_file: str = ""
    """'' (inputs made from the signatures) or the --inputs .npz file."""
    seed: int = 0
    q4f16: bool = False
    """Also run the q4f16 variant at 4 bits (--q4f16)."""
    dtypes: tuple[str, ...] = ()
    """The variants named by --dtype (variants.WIDTHS), each run at its own bits; () for the
    variants --bits picks."""
    kind: ClassVar[str] = "onnx"
    rules: ClassVar[tuple[PrecisionRule, ...]] = ()
    """The file's MatMul weights all at the run's bits."""

    @classmethod
    def create(cls, model: str, *, dims: dict[str, int] | None = None, id_range: tuple[int, int] | None = None,
               inputs_file: str | Path | None = None, seed: int = 0, q4f16: bool = False,
               dtypes: tuple[str, ...] = ()) -> OnnxFileWorkload:
        unknown = [d for d in dtypes if d not in WIDTHS]
        if unknown:
            raise OnnxFileError(f"--dtype {' '.join(unknown)}: an ONNX file's variants are {', '.join(WIDTHS)}")
        path = graph.locate(model)
        if dims and inputs_file is not None:
            raise OnnxFileError("give --dims or --inputs, not both: an --inputs file's arrays fix every dimension")
        workload = cls(name=path.stem, model=model, path=str(path), sha256=graph.sha256(path),
                       dims=tuple(sorted((dims or {}).items())), id_range=id_range or inputs.DEFAULT_ID_RANGE,
                       inputs_file=str(inputs_file) if inputs_file is not None else "", seed=seed, q4f16=q4f16,
                       dtypes=tuple(dict.fromkeys(dtypes)))
        feeds = workload.feeds()  # a missing dimension or a bad inputs file fails here, in one line
        fp32 = reference.cached_run(path, workload.sha256, feeds.arrays, feeds.digest)
        if not reference.float_outputs(fp32):
            raise OnnxFileError(f"{path.name} has no float outputs to judge accuracy by")
        return workload

    @property
    def file(self) -> Path:
        return Path(self.path)

    def model_proto(self) -> Any:
        return graph.load(Path(self.path), self.sha256)

    @property
    def signature(self) -> tuple[TensorSig, ...]:
        return graph.inputs(self.model_proto())

    @property
    def weight_layers(self) -> tuple[LinearLayer, ...]:
        return graph.weight_layers(self.model_proto())

    @property
    def weight_bytes_f32(self) -> int:
        return graph.initializer_bytes(self.model_proto())

    def feeds(self) -> inputs.Feeds:
        return _feeds(self)

    @property
    def input_shapes(self) -> str:
        """'x:1x3x48x320' for every input, as fed."""
        arrays = self.feeds().arrays
        return " ".join(f"{s.name}:{'x'.join(str(d) for d in arrays[s.name].shape)}" for s in self.signature)

    @property
    def label(self) -> str:
        return f"{self.name} {self.input_shapes}"

    @property
    def flops(self) -> int:
        """Not counted for an arbitrary graph (no GFLOP/s in its rows)."""
        return 0

    @property
    def calibration_label(self) -> str:
        return f"the inputs fed ({self.inputs_file or 'synthesized'})"

    def variants(self, bits: int, act_bits: int = 32) -> tuple[str, ...]:
        """The variants a run at ``bits`` makes: those --dtype names at these bits, or one per --bits
        value (q4f16 beside q4 with --q4f16); int8-qdq with --act-bits 8."""
        if act_bits == 8:
            return (QDQ,) if not self.dtypes or (QDQ in self.dtypes and bits == WIDTHS[QDQ]) else ()
        if self.dtypes:
            return tuple(d for d in self.dtypes if WIDTHS[d] == bits and d != QDQ)
        name = BITS_VARIANTS[bits]
        return (name, Q4F16) if name == "q4" and self.q4f16 else (name,)

    def validate(self, bits: int, block_size: int) -> None:
        if bits not in BITS_VARIANTS:
            raise ValueError(f"bits {bits}: an ONNX file's variants are at {', '.join(map(str, BITS_VARIANTS))}")
        if bits in NBITS_VARIANTS.values() and block_size != PER_CHANNEL_BLOCK and \
                (block_size < MIN_BLOCK or block_size & (block_size - 1)):
            raise ValueError(f"--block-size {block_size}: MatMulNBits blocks are a power of two, at least {MIN_BLOCK}")

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        return {"model": self.name, "weights": "file", "inputs": self.feeds().description,
                "precision_plan": "", "precision_rules": "", "onnx_sha256": self.sha256[:16],
                "input_shapes": self.input_shapes}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "model": self.model, "path": self.path,
                "sha256": self.sha256, "dims": [list(d) for d in self.dims], "id_range": list(self.id_range),
                "inputs_file": self.inputs_file, "seed": self.seed, "q4f16": self.q4f16, "dtypes": list(self.dtypes)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> OnnxFileWorkload:
        return cls(name=str(doc["name"]), model=str(doc["model"]), path=str(doc["path"]), sha256=str(doc["sha256"]),
                   dims=tuple((str(n), int(v)) for n, v in doc.get("dims", ())),
                   id_range=tuple(int(v) for v in doc.get("id_range", inputs.DEFAULT_ID_RANGE)),  # type: ignore[arg-type]
                   inputs_file=str(doc.get("inputs_file", "")), seed=int(doc.get("seed", 0)),
                   q4f16=bool(doc.get("q4f16", False)), dtypes=tuple(str(d) for d in doc.get("dtypes", ())))


@functools.lru_cache(maxsize=8)
def _feeds(workload: OnnxFileWorkload) -> inputs.Feeds:
    sigs = workload.signature
    if workload.inputs_file:
        return inputs.load_npz(Path(workload.inputs_file), sigs)
    return inputs.synthesize(sigs, dict(workload.dims), workload.id_range, workload.seed)

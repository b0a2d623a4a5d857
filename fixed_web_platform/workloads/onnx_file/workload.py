"""The ``onnx`` workload: one ONNX file the user brings, fed one set of inputs (made from its
signatures or read from ``--inputs FILE.npz``), swept over its precision variants (variants.py).
What int8-qdq and a calibrated quantizer fit to is kept apart from what is evaluated: the
``--calibration FILE.npz`` (refused when it is the inputs file or shares a sample with them), or
inputs synthesized with the next seed (inputs.CALIBRATION_SEED_OFFSET).
Checked when it is made: the file parses, every symbolic dimension has a value, the inputs match,
and onnxruntime runs the fp32 file on the CPU provider (the reference) with float outputs to judge.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...architectures.base import LinearLayer
from ...models.rules import PrecisionRule, assign, parse_rules, summary
from ...vocabulary import PER_CHANNEL_BLOCK
from . import graph, inputs, reference, variants
from .graph import OnnxFileError, TensorSig
from .variants import BITS_VARIANTS, HELD, NBITS_VARIANTS, Q4F16, QDQ, WIDTHS, Variant

HELD_BITS = (8, 4, 2)
"""The bits the held variant (the harness's quantizers as MatMulNBits) is made at."""

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
    """The variants named by --dtype (variants.WIDTHS, or HELD), each run at its own bits; () for
    the variants --bits picks."""
    held: bool = False
    """Also the held variant at 8/4/2 bits, once per --weight-quant quantizer (a quantizer other
    than the default was named, or --dtype held)."""
    calibration_file: str = ""
    """'' (calibration inputs synthesized with the next seed) or the --calibration .npz file."""
    rules: tuple[PrecisionRule, ...] = ()
    """Per-MatMul precisions (--precision-rules, a sensitivity probe or plan): the held variant holds
    each MatMul with a constant weight at its first matching rule's bits, the rest at the run's
    (float32 MatMuls at 32); () for every MatMul at the run's bits."""
    rules_name: str = ""
    kind: ClassVar[str] = "onnx"

    @classmethod
    def create(cls, model: str, *, dims: dict[str, int] | None = None, id_range: tuple[int, int] | None = None,
               inputs_file: str | Path | None = None, seed: int = 0, q4f16: bool = False,
               dtypes: tuple[str, ...] = (), held: bool = False, calibration: str | Path | None = None,
               rules: tuple[PrecisionRule, ...] = (), rules_name: str = "") -> OnnxFileWorkload:
        unknown = [d for d in dtypes if d not in WIDTHS and d != HELD]
        if unknown:
            raise OnnxFileError(f"--dtype {' '.join(unknown)}: an ONNX file's variants are "
                                f"{', '.join((*WIDTHS, HELD))}")
        path = graph.locate(model)
        if dims and inputs_file is not None:
            raise OnnxFileError("give --dims or --inputs, not both: an --inputs file's arrays fix every dimension")
        workload = cls(name=path.stem, model=model, path=str(path), sha256=graph.sha256(path),
                       dims=tuple(sorted((dims or {}).items())), id_range=id_range or inputs.DEFAULT_ID_RANGE,
                       inputs_file=str(inputs_file) if inputs_file is not None else "", seed=seed, q4f16=q4f16,
                       dtypes=tuple(dict.fromkeys(dtypes)), held=held or HELD in dtypes,
                       calibration_file=str(calibration) if calibration is not None else "",
                       rules=tuple(rules), rules_name=rules_name)
        if rules:
            try:
                workload.layer_bits(32, 32)  # a rule matching no MatMul, or a width held has not, fails here
            except ValueError as exc:
                raise OnnxFileError(str(exc)) from None
        feeds = workload.feeds()  # a missing dimension or a bad inputs file fails here, in one line
        if calibration is not None:
            if inputs_file is not None and Path(calibration).resolve() == Path(inputs_file).resolve():
                raise OnnxFileError(f"--calibration {calibration} is the --inputs file: what the precision is fit "
                                    "to must be apart from what its accuracy is judged on")
            shared = inputs.shared_sample(workload.calibration_feeds(), feeds)
            if shared is not None:
                raise OnnxFileError(f"--calibration {calibration}: sample {shared} is also an evaluated input "
                                    "(every array equal): what the precision is fit to must be apart from what "
                                    "its accuracy is judged on")
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

    def calibration_feeds(self) -> inputs.Feeds:
        """What int8-qdq and calibrated quantizers fit to (module doc); OnnxFileError when the
        evaluated inputs' shapes cannot be synthesized again (an --inputs file with unnamed dimensions)."""
        return _calibration_feeds(self)

    @property
    def matmul_layers(self) -> tuple[LinearLayer, ...]:
        """The MatMuls with a constant [K, N] weight: what the held variant and rules hold."""
        return tuple(layer for layer in self.weight_layers if layer.kind == "MatMul")

    def layer_bits(self, bits: int, block_size: int) -> dict[str, int]:
        """Each MatMul's bits in the held variant at ``bits``: its first matching rule's, else
        ``bits``; only those held at 8, 4 or 2 bits (the others stay float32 MatMuls). ValueError
        for a rule matching no MatMul, or a 16-bit layer (the held variant has no float16 MatMul)."""
        plan = assign(self.matmul_layers, self.rules, bits, block_size)
        half = next((p.layer.name for p in plan if p.bits == 16), None)
        if half is not None:
            raise ValueError(f"MatMul {half}: the held variant holds MatMuls at 8, 4 or 2 bits or float32, not 16")
        return {p.layer.name: p.bits for p in plan if p.bits <= 8}

    def variant(self, name: str, bits: int, block_size: int, observer: str = "", quantizer: str = "minmax",
                tables: bool = False) -> Variant:
        """The precision variant ``name`` of the file (variants.make, cached by content): int8-qdq and
        the held variant fit to the calibration inputs, never the evaluated ones; ``tables``: the held
        variant's embedding tables as GatherBlockQuantized (for a provider that runs it).
        VariantRefused and OnnxFileError say why it cannot be made."""
        feeds = self.feeds()
        fp32 = reference.cached_run(self.file, self.sha256, feeds.arrays, feeds.digest)
        fit = self.calibration_feeds() if name in (QDQ, HELD) else None
        return variants.make(self.file, self.sha256, name, block_size,
                             computed={n: tuple(v.shape) for n, v in fp32.items()},
                             calibration=fit.arrays if fit else None, calibration_digest=fit.digest if fit else "",
                             observer=observer or "minmax", bits=bits, quantizer=quantizer,
                             layer_bits=self.layer_bits(bits, block_size) if name == HELD and self.rules else None,
                             tables=tables)

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
        """The row's ``calibration``: what int8-qdq and calibrated quantizers were fit to."""
        return self.calibration_file or (f"synthesized seed {self.seed + inputs.CALIBRATION_SEED_OFFSET} "
                                         f"(the evaluated inputs: {self.inputs_file or f'seed {self.seed}'})")

    def variants(self, bits: int, act_bits: int = 32) -> tuple[str, ...]:
        """The variants a run at ``bits`` makes: those --dtype names at these bits, or one per --bits
        value (q4f16 beside q4 with --q4f16); int8-qdq with --act-bits 8."""
        if act_bits == 8:
            return (QDQ,) if not self.dtypes or (QDQ in self.dtypes and bits == WIDTHS[QDQ]) else ()
        if self.rules:  # per-MatMul precisions are the held variant's, whatever the run's bits
            return (HELD,) if act_bits == 32 else ()
        held = (HELD,) if self.held and bits in HELD_BITS else ()
        if self.dtypes:
            return tuple(d for d in self.dtypes if d != HELD and WIDTHS[d] == bits and d != QDQ) + held
        name = BITS_VARIANTS[bits]
        return ((name, Q4F16) if name == "q4" and self.q4f16 else (name,)) + held

    def validate(self, bits: int, block_size: int) -> None:
        if bits not in BITS_VARIANTS:
            raise ValueError(f"bits {bits}: an ONNX file's variants are at {', '.join(map(str, BITS_VARIANTS))}")
        if bits in NBITS_VARIANTS.values() and block_size != PER_CHANNEL_BLOCK and \
                (block_size < MIN_BLOCK or block_size & (block_size - 1)):
            raise ValueError(f"--block-size {block_size}: MatMulNBits blocks are a power of two, at least {MIN_BLOCK}")

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        plan = summary(assign(self.matmul_layers, self.rules, bits, block_size)) if self.rules else ""
        return {"model": self.name, "weights": "file", "inputs": self.feeds().description,
                "precision_plan": plan, "precision_rules": self.rules_name, "onnx_sha256": self.sha256[:16],
                "input_shapes": self.input_shapes}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "model": self.model, "path": self.path,
                "sha256": self.sha256, "dims": [list(d) for d in self.dims], "id_range": list(self.id_range),
                "inputs_file": self.inputs_file, "seed": self.seed, "q4f16": self.q4f16, "dtypes": list(self.dtypes),
                "held": self.held, "calibration_file": self.calibration_file,
                "rules": [r.to_json() for r in self.rules], "rules_name": self.rules_name}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> OnnxFileWorkload:
        return cls(name=str(doc["name"]), model=str(doc["model"]), path=str(doc["path"]), sha256=str(doc["sha256"]),
                   dims=tuple((str(n), int(v)) for n, v in doc.get("dims", ())),
                   id_range=tuple(int(v) for v in doc.get("id_range", inputs.DEFAULT_ID_RANGE)),  # type: ignore[arg-type]
                   inputs_file=str(doc.get("inputs_file", "")), seed=int(doc.get("seed", 0)),
                   q4f16=bool(doc.get("q4f16", False)), dtypes=tuple(str(d) for d in doc.get("dtypes", ())),
                   held=bool(doc.get("held", False)), calibration_file=str(doc.get("calibration_file", "")),
                   rules=parse_rules(doc["rules"], "plan.json") if doc.get("rules") else (),
                   rules_name=str(doc.get("rules_name", "")))


@functools.lru_cache(maxsize=8)
def _feeds(workload: OnnxFileWorkload) -> inputs.Feeds:
    sigs = workload.signature
    if workload.inputs_file:
        return inputs.load_npz(Path(workload.inputs_file), sigs)
    return inputs.synthesize(sigs, dict(workload.dims), workload.id_range, workload.seed)


@functools.lru_cache(maxsize=8)
def _calibration_feeds(workload: OnnxFileWorkload) -> inputs.Feeds:
    sigs = workload.signature
    if workload.calibration_file:
        return inputs.load_npz(Path(workload.calibration_file), sigs, "--calibration")
    return inputs.synthesize(sigs, dict(workload.feeds().dims), workload.id_range,
                             workload.seed + inputs.CALIBRATION_SEED_OFFSET)

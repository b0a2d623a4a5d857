"""The precision variants of a user's ONNX file, made with onnxruntime's and onnx's own tools, and
named as transformers.js names its dtypes (and made the way its conversion script,
scripts/quantize.py, made them) where they match:

| variant    | bits | how it is made                                                           |
|------------|------|--------------------------------------------------------------------------|
| fp32       | 32   | the file as given                                                        |
| fp16       | 16   | onnxruntime.transformers.float16 (float16 weights and arithmetic;        |
|            |      | inputs and outputs kept float32, ops on its block list kept float32)     |
| q8-nbits, q4, q2 | 8/4/2 | onnxruntime.quantization's MatMulNBitsQuantizer: every MatMul with |
|            |      | a constant weight as MatMulNBits, symmetric, blocks of --block-size (32) |
| q4f16      | 4    | fp16, then q4 (``--q4f16``)                                              |
| q8, int8, uint8 | 8 | dynamic int8, transformers.js's q8 (``model_quantized.onnx``), int8 and |
|            |      | uint8: onnxruntime's IntegerOps quantizer (MatMulInteger, ConvInteger,   |
|            |      | a quantized Gather; DynamicQuantizeLinear makes uint8 activations at     |
|            |      | run time); weights int8, uint8, or for q8 uint8 where the graph has Conv |
|            |      | (ORT Web has no int8-weight ConvInteger) and int8 otherwise              |
| bnb4       | 4    | MatMulBnb4Quantizer: NF4 codes, blocks of 64 (``MatMulBnb4``)            |
| int8-qdq   | 8    | quantize_static in QDQ form: int8 per-channel weights, uint8 activations |
|            | (--act-bits 8) | calibrated on the inputs fed (--observer minmax or percentile), |
|            |      | after quant_pre_process and an opset update to 13 or more                |

``--bits`` picks fp32, fp16, q8-nbits, q4 (and q4f16 with ``--q4f16``) and q2; ``--dtype`` names
any of them (each runs at its own width). Before schema 13 the 8-bit MatMulNBits variant was
called ``q8``, the name transformers.js gives dynamic int8: result folders are read with the new
name (results/reader.py).

A variant the tools cannot make for this graph (no MatMul to quantize, a tool's error) raises
``VariantRefused`` with the tool's reason: the run's row is ``unsupported`` and says it.
Variants are cached by content (the file's hash, the variant, the block, the tools' versions and,
for int8-qdq, the calibration inputs) in the git-ignored ``.cache/onnx/variants/``.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import logging
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...files import prune, replacing, used
from ...paths import ONNX_CACHE_DIR
from . import graph

CACHE_DIR = ONNX_CACHE_DIR / "variants"
CACHE_FORMAT = 3
"""Bumped when how a variant is made or described (``_describe``) changes, so old cache files
are not reused (3: 'q8' became dynamic int8, the MatMulNBits variant 'q8-nbits')."""

Q8_NBITS = "q8-nbits"
BITS_VARIANTS = {32: "fp32", 16: "fp16", 8: Q8_NBITS, 4: "q4", 2: "q2"}
Q4F16 = "q4f16"
QDQ = "int8-qdq"
NBITS_VARIANTS = {Q8_NBITS: 8, "q4": 4, "q2": 2, Q4F16: 4}
DYNAMIC_VARIANTS = {"q8": "", "int8": "QInt8", "uint8": "QUInt8"}
"""Dynamic int8 (transformers.js's names) -> onnxruntime's weight QuantType ('': by the graph, as
transformers.js's q8: QUInt8 where the graph has one of ``QUINT8_OPS``, QInt8 otherwise)."""
QUINT8_OPS = ("Conv", "GroupQueryAttention", "MultiHeadAttention")
BNB4 = "bnb4"
BNB4_BLOCK = 64
"""bnb4's block (transformers.js's conversion and bitsandbytes' Linear4bit use 64)."""
WIDTHS = {"fp32": 32, "fp16": 16, **NBITS_VARIANTS, **{name: 8 for name in DYNAMIC_VARIANTS}, BNB4: 4, QDQ: 8}
"""Every variant by the bits its weights are held at."""
RENAMED = {"q8": Q8_NBITS}
RENAMED_SCHEMA = 13
"""Variant names of result folders before schema ``RENAMED_SCHEMA`` -> today's."""
QDQ_OPSET = 13
"""Per-channel DequantizeLinear (its ``axis``) needs opset 13."""
QDQ_OBSERVERS = {"minmax": "MinMax", "percentile": "Percentile"}
"""--observer names -> onnxruntime's CalibrationMethod."""


class VariantRefused(Exception):
    """The tools cannot make this variant of this graph; the message is the reason for the row."""


@dataclass(frozen=True)
class Variant:
    name: str
    path: Path
    """The variant's file (the user's own file for fp32)."""
    weight_bytes: int
    nodes: int
    nodes_quantized: int
    """Weight nodes (graph.WEIGHT_OPS) whose weight the variant holds at fewer bits than float32."""
    node_dtypes: dict[str, str]
    """Original weight node name -> what the variant holds for it ('MatMulNBits4', 'Conv:float16',
    'Conv:QDQ8', 'Conv:float32'), with the variant's node name after '=' where it differs."""
    tool: str
    repairs: str = ""
    """What the harness changed in the file's metadata before anything else (graph.repaired), ''
    for none: said in every row of the file."""

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "weight_bytes": self.weight_bytes, "nodes": self.nodes,
                "nodes_quantized": self.nodes_quantized, "node_dtypes": self.node_dtypes, "tool": self.tool,
                "repairs": self.repairs}


def variant_for(bits: int, act_bits: int, weight_format: str) -> str:
    """The variant a run asks for: its weight format if it names one, else by bits (int8 QDQ at
    --act-bits 8)."""
    if weight_format:
        return weight_format
    if act_bits == 8:
        return QDQ
    return BITS_VARIANTS[bits]


def _versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The quantizers log every node they skip (INFO) and print advice: not the run's output."""
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", "onnxruntime")}
    root.setLevel(logging.ERROR)
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _weight_inputs(model: Any) -> dict[str, tuple[str, Any]]:
    """Each weight node's name -> (its op, its node) in ``model``."""
    return {graph.node_name(n, i): (n.op_type, n) for i, n in enumerate(model.graph.node)}


def _describe(original: Any, made: Any, name: str) -> tuple[int, dict[str, str]]:
    """How many of the original's weight nodes ``made`` holds at fewer bits, and what each holds."""
    from onnx import helper

    layers = graph.weight_layers(original)
    nodes = _weight_inputs(made)
    init_types = {i.name: i.data_type for i in made.graph.initializer}
    producers = {o: n for n in made.graph.node for o in n.output}
    by_prefix = {}
    for node_name, (op, _) in nodes.items():
        if op == "MatMulNBits":
            by_prefix[node_name.rsplit("_Q", 1)[0]] = node_name
        elif op in ("MatMulInteger", "ConvInteger"):
            by_prefix[node_name.removesuffix("_quant")] = node_name
        elif op == "MatMulBnb4":
            by_prefix[node_name.removesuffix("_Bnb4")] = node_name
    described: dict[str, str] = {}
    quantized = 0
    for layer in layers:
        if layer.name in by_prefix:
            node = nodes[by_prefix[layer.name]][1]
            if node.op_type == "MatMulNBits":
                held = f"MatMulNBits{next((a.i for a in node.attribute if a.name == 'bits'), 4)}"
            elif node.op_type == "MatMulBnb4":
                held = "MatMulBnb4"
            else:  # MatMulInteger, ConvInteger: the weight's integer type
                code = init_types.get(node.input[1])
                held = f"{node.op_type}:{np.dtype(helper.tensor_dtype_to_np_dtype(code)).name if code else '?'}"
            described[layer.name] = f"{held}={by_prefix[layer.name]}"
            quantized += 1
            continue
        found = nodes.get(layer.name)
        fused = next((n for n in nodes if n.startswith(f"{layer.name}/")), "")  # an ORT fusion of it
        if found is None and fused:
            found = nodes[fused]
        op = layer.kind
        if found is None:
            described[layer.name] = f"{op}:folded"
            continue
        node = found[1]
        op = node.op_type
        w = node.input[1] if len(node.input) > 1 else ""
        source = producers.get(w)
        suffix = f"={fused}" if fused and layer.name not in nodes else ""
        if source is not None and source.op_type == "DequantizeLinear":
            described[layer.name] = f"{op}:QDQ8{suffix}"
            quantized += 1
        elif source is not None and source.op_type == "Cast":
            described[layer.name] = f"{op}:float32"  # a float16 weight cast back for a blocked op
        elif w in init_types:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(init_types[w])).name
            described[layer.name] = f"{op}:{dtype}"
            quantized += dtype != "float32"
        else:
            described[layer.name] = f"{op}:float32"
    return quantized, described


def _cache_file(sha: str, name: str, block_size: int, extra: Mapping[str, Any]) -> Path:
    doc = {"sha256": sha, "variant": name, "block": block_size, "format": CACHE_FORMAT, **_versions(), **extra}
    key = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]
    return CACHE_DIR / f"{sha[:16]}-{name}-{key}.onnx"


def _save(model: Any, path: Path) -> None:
    import onnx

    with replacing(path) as partial:
        onnx.save(model, str(partial))


def _float16(model: Any) -> Any:
    from onnxruntime.transformers import float16

    return float16.convert_float_to_float16(copy.deepcopy(model), keep_io_types=True)


def _nbits(model: Any, bits: int, block_size: int) -> Any:
    from onnxruntime.quantization import matmul_nbits_quantizer as mnq

    config = mnq.DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=True, bits=bits)
    quantizer = mnq.MatMulNBitsQuantizer(copy.deepcopy(model), algo_config=config)
    quantizer.process()
    return quantizer.model.model


def _dynamic(model: Any, name: str) -> tuple[Any, str]:
    """Dynamic int8 as transformers.js's conversion makes it (per tensor, full range)."""
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
    from onnxruntime.quantization.quant_utils import QuantizationMode
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    weight = DYNAMIC_VARIANTS[name] or (
        "QUInt8" if any(n.op_type in QUINT8_OPS for n in model.graph.node) else "QInt8")
    quantizer = ONNXQuantizer(copy.deepcopy(model), False, False, mode=QuantizationMode.IntegerOps, static=False,
                              weight_qType=getattr(QuantType, weight), activation_qType=QuantType.QUInt8,
                              tensors_range=None, nodes_to_quantize=[], nodes_to_exclude=[],
                              op_types_to_quantize=set(IntegerOpsRegistry.keys()),
                              extra_options={"EnableSubgraph": True, "MatMulConstBOnly": True})
    quantizer.quantize_model()
    return quantizer.model.model, f"dynamic int8 (IntegerOps quantizer), {weight} weights, uint8 activations"


def _bnb4(model: Any) -> Any:
    from onnxruntime.quantization.matmul_bnb4_quantizer import MatMulBnb4Quantizer

    quantizer = MatMulBnb4Quantizer(copy.deepcopy(model), MatMulBnb4Quantizer.NF4, BNB4_BLOCK)
    quantizer.process()
    return quantizer.model.model


def _qdq(model: Any, calibration: Mapping[str, np.ndarray], observer: str) -> Any:
    import onnx
    from onnx import version_converter
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if observer not in QDQ_OBSERVERS:
        raise VariantRefused(f"int8 QDQ calibrates with onnxruntime's {', '.join(QDQ_OBSERVERS)} methods, "
                             f"not --observer {observer}")

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = iter([dict(calibration)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.left, None)

    with tempfile.TemporaryDirectory() as tmp:
        upgraded = Path(tmp) / "upgraded.onnx"
        prepared = Path(tmp) / "prepared.onnx"
        out = Path(tmp) / "qdq.onnx"
        onnx.save(version_converter.convert_version(model, QDQ_OPSET) if graph.opset(model) < QDQ_OPSET
                  else model, upgraded)
        quant_pre_process(str(upgraded), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, QDQ_OBSERVERS[observer]))
        return onnx.load(str(out))


def make(path: Path, sha: str, name: str, block_size: int, *, computed: Mapping[str, tuple[int, ...]],
         calibration: Mapping[str, np.ndarray] | None = None, calibration_digest: str = "",
         observer: str = "minmax") -> Variant:
    """The variant ``name`` of the file at ``path`` (cached); VariantRefused says why it cannot be.
    ``computed``: every output's shape as onnxruntime computes it on the inputs (graph.repaired)."""
    original, repairs = graph.repaired(graph.load(path, sha), dict(computed))
    if name == "fp32":
        layers = graph.weight_layers(original)
        fp32 = path
        if repairs:
            fp32 = _cache_file(sha, "fp32-repaired", 0, {"repairs": repairs})
            if not fp32.is_file():
                _save(original, fp32)
        return Variant(name, fp32, graph.initializer_bytes(original), len(original.graph.node), 0,
                       {layer.name: f"{layer.kind}:float32" for layer in layers},
                       "the file as given" + (" (metadata repaired)" if repairs else ""), repairs)
    if name not in WIDTHS:
        raise VariantRefused(f"no variant named {name!r}")
    extra: dict[str, Any] = {"repairs": repairs}
    if name == QDQ:
        extra |= {"calibration": calibration_digest, "observer": observer}
    target = _cache_file(sha, name, block_size if name in NBITS_VARIANTS else 0, extra)
    meta = target.with_suffix(".json")
    if target.is_file() and meta.is_file():
        try:
            doc = json.loads(meta.read_text())
            used(target)
            return Variant(name, target, int(doc["weight_bytes"]), int(doc["nodes"]), int(doc["nodes_quantized"]),
                           dict(doc["node_dtypes"]), str(doc["tool"]), str(doc.get("repairs", "")))
        except (ValueError, KeyError, TypeError):
            pass  # a torn cache entry: make it anew
    with _quiet():
        try:
            if name == "fp16":
                made, tool = _float16(original), "onnxruntime.transformers.float16 (keep_io_types)"
            elif name == Q4F16:
                made = _nbits(_float16(original), 4, block_size)
                tool = f"float16, then MatMulNBitsQuantizer bits 4 block {block_size} symmetric"
            elif name in NBITS_VARIANTS:
                made = _nbits(original, NBITS_VARIANTS[name], block_size)
                tool = f"MatMulNBitsQuantizer bits {NBITS_VARIANTS[name]} block {block_size} symmetric"
            elif name in DYNAMIC_VARIANTS:
                made, tool = _dynamic(original, name)
            elif name == BNB4:
                made, tool = _bnb4(original), f"MatMulBnb4Quantizer NF4 block {BNB4_BLOCK}"
            else:
                if calibration is None:
                    raise VariantRefused("int8 QDQ needs calibration inputs")
                made = _qdq(original, calibration, observer)
                tool = (f"quantize_static QDQ, per-channel int8 weights, uint8 activations, "
                        f"{QDQ_OBSERVERS.get(observer, observer)} calibration on the inputs fed")
        except VariantRefused:
            raise
        except Exception as exc:  # noqa: BLE001 - the tool's own error is the row's reason
            text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            raise VariantRefused(f"{name}: the tool failed: {type(exc).__name__}: {text}") from None
    quantized, described = _describe(original, made, name)
    if name in NBITS_VARIANTS and not any(d.startswith("MatMulNBits") for d in described.values()):
        ops = sorted({layer.kind for layer in graph.weight_layers(original)})
        raise VariantRefused(f"{name}: onnxruntime's MatMulNBitsQuantizer found no MatMul with a constant "
                             f"weight to quantize in this graph (its weights are in {', '.join(ops) or 'no'} "
                             "nodes); --act-bits 8 --bits 8 makes the int8 QDQ variant, which quantizes Conv too")
    if name == QDQ and not quantized:
        raise VariantRefused("int8-qdq: quantize_static quantized none of this graph's weight nodes")
    if (name in DYNAMIC_VARIANTS or name == BNB4) and not quantized:
        raise VariantRefused(f"{name}: onnxruntime's quantizer quantized none of this graph's weight nodes")
    _save(made, target)
    variant = Variant(name, target, graph.initializer_bytes(made), len(made.graph.node), quantized, described, tool,
                      repairs)
    meta.write_text(json.dumps(variant.to_json()))
    prune(CACHE_DIR.parent, keep=target)  # the exports beside the variants count too
    return variant

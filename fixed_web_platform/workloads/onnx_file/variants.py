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
|            | (--act-bits 8) | calibrated on the calibration inputs (--observer minmax or      |
|            |      | percentile), after quant_pre_process and an opset update to 13 or more   |
| held       | 8/4/2 | the harness's own quantizers (--weight-quant: precision/quantizers.py, |
|            |      | gptq calibrated on the calibration inputs): every MatMul with a constant |
|            |      | [K, N] weight as MatMulNBits holding the quantizer's codes, scales and   |
|            |      | zero points (uint8, or float32 where the quantizer keeps a float zero:   |
|            |      | ORT's CPU kernel alone takes those); K not a multiple of the block is    |
|            |      | padded with zeros to one, as onnxruntime's quantizer pads it. Every      |
|            |      | embedding table (a Gather's own 2-D constant, rows a whole number of     |
|            |      | blocks) as GatherBlockQuantized with uint8 zero points (GATHER_GRID);    |
|            |      | with per-MatMul rules the tables stay float32                            |

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
CACHE_FORMAT = 4
"""Bumped when how a variant is made or described (``_describe``) changes, so old cache files
are not reused (3: 'q8' became dynamic int8, the MatMulNBits variant 'q8-nbits'; 4: the held
variant's embedding tables as GatherBlockQuantized)."""
GATHER_GRID = {"gptq": "minmax", "gptq-offset": "offset"}
"""The grid a calibrated quantizer's embedding table is rounded on: a lookup table has no input
statistics to spread errors by, so GPTQ's codes there are its grid's own rounding."""

Q8_NBITS = "q8-nbits"
BITS_VARIANTS = {32: "fp32", 16: "fp16", 8: Q8_NBITS, 4: "q4", 2: "q2"}
Q4F16 = "q4f16"
QDQ = "int8-qdq"
NBITS_VARIANTS = {Q8_NBITS: 8, "q4": 4, "q2": 2, Q4F16: 4}
DYNAMIC_VARIANTS = {"q8": "", "int8": "QInt8", "uint8": "QUInt8"}
"""Dynamic int8 (transformers.js's names) -> onnxruntime's weight QuantType ('': by the graph, as
transformers.js's q8: QUInt8 where the graph has one of ``QUINT8_OPS``, QInt8 otherwise)."""
QUINT8_OPS = ("Conv", "GroupQueryAttention", "MultiHeadAttention")
HELD = "held"
"""The harness's quantizers' MatMulNBits variant, at the run's bits (vocabulary.HELD_FORMAT)."""
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
    external: tuple[str, ...] = ()
    """The files beside ``path`` holding its external data, as the file names them (graph.external_data)."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "weight_bytes": self.weight_bytes, "nodes": self.nodes,
                "nodes_quantized": self.nodes_quantized, "node_dtypes": self.node_dtypes, "tool": self.tool,
                "repairs": self.repairs, "external": list(self.external)}


def _held(model: Any, layer_bits: Mapping[str, int], block_size: int, quantizer: str,
          calibration: Mapping[str, np.ndarray] | None, gather_bits: int | None = None) -> tuple[Any, str]:
    """Each MatMul of ``layer_bits`` (node name -> 8, 4 or 2; its weight a constant [K, N]) as
    MatMulNBits at its bits holding ``quantizer``'s codes (node '<name>_Q<bits>', as onnxruntime's
    quantizer names them; K padded with zero weights to whole blocks, which MatMulNBits' last block
    of a row holds and its K attribute leaves out); a calibrated quantizer's E[x x^T] from
    onnxruntime's fp32 run on ``calibration`` (zero where padded). ``gather_bits``: the embedding
    tables too (``_gathers``)."""
    from onnx import helper, numpy_helper

    from ...formats.matmul_nbits import MS_DOMAIN, nbits_initializers
    from ...precision.held import hold_weights
    from ...precision.quantizers import QUANTIZERS

    made = copy.deepcopy(model)
    inits = {t.name: t for t in made.graph.initializer}
    targets = {i: node for i, node in enumerate(made.graph.node)
               if node.op_type == "MatMul" and graph.node_name(node, i) in layer_bits and node.input[1] in inits
               and len(inits[node.input[1]].dims) == 2}
    calibrated = QUANTIZERS[quantizer].calibrated
    if calibrated and calibration is None:
        raise VariantRefused(f"the {quantizer} quantizer needs calibration inputs")
    moments = _input_moments(model, [n.input[0] for n in targets.values()], calibration) if calibrated else {}
    replaced, dropped = {}, set()
    for i, node in targets.items():
        w_t = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)  # [K, N]
        k, n = w_t.shape
        padded = -(-k // block_size) * block_size
        w = np.zeros((n, padded), np.float32)
        w[:, :k] = w_t.T
        hessian = moments.get(node.input[0])
        if hessian is not None and padded != k:
            hessian = np.pad(hessian, ((0, padded - k), (0, padded - k)))
        bits = layer_bits[graph.node_name(node, i)]
        held = hold_weights(w, bits, block_size, unsigned=True, quantizer=quantizer, hessian=hessian)
        name = f"{graph.node_name(node, i)}_Q{bits}"
        arrays = nbits_initializers(held, padded, n, bits, block_size)
        names = [f"{name}.weight", f"{name}.scales", f"{name}.zero_points"]
        made.graph.initializer.extend(numpy_helper.from_array(a, nm) for a, nm in zip(arrays, names))
        replaced[i] = helper.make_node("MatMulNBits", [node.input[0], *names], list(node.output), name=name,
                                       domain=MS_DOMAIN, K=k, N=n, bits=bits, block_size=block_size)
        dropped.add(node.input[1])
    tables = _gathers(made, inits, gather_bits, block_size, quantizer, replaced, dropped) if gather_bits else 0
    nodes = [replaced.get(i, node) for i, node in enumerate(made.graph.node)]
    del made.graph.node[:]
    made.graph.node.extend(nodes)
    used_inputs = {x for node in made.graph.node for x in node.input}
    kept = [t for t in made.graph.initializer if t.name not in dropped or t.name in used_inputs]
    del made.graph.initializer[:]
    made.graph.initializer.extend(kept)
    if replaced and not any(o.domain == MS_DOMAIN for o in made.opset_import):
        made.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    zero = "float32" if QUANTIZERS[quantizer].float_zero else "uint8"
    how = f"the harness's {quantizer} quantizer" + (" (calibrated on the calibration inputs)" if calibrated else "")
    widths = sorted(set(layer_bits.values()), reverse=True)
    grid = GATHER_GRID.get(quantizer, quantizer)
    return made, (f"{how}, MatMulNBits bits {'/'.join(map(str, widths))} block {block_size}, {zero} zero points"
                  + (f", {len(targets)} of {sum(n.op_type == 'MatMul' for n in model.graph.node)} MatMuls"
                     if len(widths) > 1 or len(targets) < len(layer_bits) else "")
                  + (f"; {tables} embedding table(s) as GatherBlockQuantized bits {gather_bits} ({grid})"
                     if tables else ""))


def _gathers(made: Any, inits: Mapping[str, Any], bits: int, block_size: int, quantizer: str,
             replaced: dict[int, Any], dropped: set[str]) -> int:
    """Each Gather of a 2-D constant table along axis 0 that nothing else reads, whose rows are
    whole blocks, as GatherBlockQuantized (uint8 codes packed as MatMulNBits packs them, a scale
    and a packed uint8 zero point per block of a row) on GATHER_GRID's rounding; added to
    ``replaced`` and ``dropped``. A quantizer whose zero points are floats leaves the tables
    float32 (the operator takes integer zero points only). How many were written."""
    from onnx import helper, numpy_helper

    from ...formats.matmul_nbits import MS_DOMAIN, nbits_initializers
    from ...precision.held import hold_weights
    from ...precision.quantizers import QUANTIZERS

    grid = GATHER_GRID.get(quantizer, quantizer)
    if QUANTIZERS[grid].float_zero:
        return 0
    readers: dict[str, int] = {}
    for node in made.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    count = 0
    for i, node in enumerate(made.graph.node):
        table = inits.get(node.input[0]) if node.op_type == "Gather" and node.input else None
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if table is None or len(table.dims) != 2 or axis != 0 or readers.get(node.input[0]) != 1 \
                or table.dims[1] % block_size or i in replaced:
            continue
        w = numpy_helper.to_array(table).astype(np.float32)  # [rows, K]: each row blockwise along K
        rows, k = w.shape
        held = hold_weights(w, bits, block_size, unsigned=True, quantizer=grid)
        data, scales, zero_points = nbits_initializers(held, k, rows, bits, block_size)
        name = f"{graph.node_name(node, i)}_Q{bits}"
        arrays = (data.reshape(rows, -1), scales.reshape(rows, -1), zero_points.reshape(rows, -1))
        names = [f"{name}.data", f"{name}.scales", f"{name}.zero_points"]
        made.graph.initializer.extend(numpy_helper.from_array(a, nm) for a, nm in zip(arrays, names))
        replaced[i] = helper.make_node("GatherBlockQuantized", [names[0], node.input[1], names[1], names[2]],
                                       list(node.output), name=name, domain=MS_DOMAIN, bits=bits,
                                       block_size=block_size, gather_axis=0, quantize_axis=1)
        dropped.add(node.input[0])
        count += 1
    return count


def _input_moments(model: Any, names: list[str], calibration: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """E[x x^T] (float64 [K, K]) of each named tensor over onnxruntime's CPU run of ``model`` on
    ``calibration`` (the tensors made graph outputs; rows: every leading position)."""
    import onnxruntime
    from onnx import helper

    from ...precision.quantizers import input_moment

    probe = copy.deepcopy(model)
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in dict.fromkeys(names) if n not in known)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    wanted = list(dict.fromkeys(names))
    values = session.run(wanted, dict(calibration))
    return {n: input_moment(v) for n, v in zip(wanted, values)}


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


PROTOBUF_LIMIT = 2**31 - 1
"""A protobuf message's largest size: a model over it keeps its weights in an external data file."""


def _save(model: Any, path: Path) -> tuple[str, ...]:
    """``model`` written to ``path``, its weights in ``<name>.data`` beside it when the whole would
    not fit one protobuf; the external data files, as ``Variant.external``."""
    import onnx

    external = model.ByteSize() > PROTOBUF_LIMIT
    location = f"{path.name}.data"
    with replacing(path) as partial:
        if external:
            (partial.parent / location).unlink(missing_ok=True)  # onnx appends to the data file
            onnx.save(model, str(partial), save_as_external_data=True, all_tensors_to_one_file=True,
                      location=location)
        else:
            onnx.save(model, str(partial))
    if external:  # onnx.save pointed the model's tensors at the file: read back, it stays whole in memory
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(model, str(path.parent))
    return (location,) if external else ()


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
         observer: str = "minmax", bits: int = 0, quantizer: str = "minmax",
         layer_bits: Mapping[str, int] | None = None, tables: bool = True) -> Variant:
    """The variant ``name`` of the file at ``path`` (cached); VariantRefused says why it cannot be.
    ``computed``: every output's shape as onnxruntime computes it on the inputs (graph.repaired);
    ``calibration``: the inputs int8-qdq and a calibrated quantizer fit to (never the evaluated
    ones); ``bits``, ``quantizer`` and ``layer_bits`` (each MatMul's bits, default every one at
    ``bits``): the held variant's, its embedding tables quantized too unless per-MatMul bits are
    given or ``tables`` is off (a runtime without GatherBlockQuantized)."""
    original, repairs = graph.repaired(graph.load(path, sha), dict(computed))
    if name == "fp32":
        layers = graph.weight_layers(original)
        fp32, external = path, graph.external_data(path)
        if repairs:
            fp32 = _cache_file(sha, "fp32-repaired", 0, {"repairs": repairs})
            external = _save(original, fp32) if not fp32.is_file() else graph.external_data(fp32)
        return Variant(name, fp32, graph.initializer_bytes(original), len(original.graph.node), 0,
                       {layer.name: f"{layer.kind}:float32" for layer in layers},
                       "the file as given" + (" (metadata repaired)" if repairs else ""), repairs, external)
    if name not in WIDTHS and name != HELD:
        raise VariantRefused(f"no variant named {name!r}")
    extra: dict[str, Any] = {"repairs": repairs}
    if name == QDQ:
        extra |= {"calibration": calibration_digest, "observer": observer}
    if name == HELD:
        from ...precision.quantizers import QUANTIZERS

        gather_bits = bits if layer_bits is None and tables else None  # per-MatMul rules leave the tables float
        if layer_bits is None:
            layer_bits = {layer.name: bits for layer in graph.weight_layers(original) if layer.kind == "MatMul"}
        extra |= {"bits": bits, "quantizer": quantizer, "layers": sorted(layer_bits.items()), "gather": gather_bits}
        if QUANTIZERS[quantizer].calibrated:
            extra |= {"calibration": calibration_digest}
    target = _cache_file(sha, name, block_size if name in NBITS_VARIANTS or name == HELD else 0, extra)
    meta = target.with_suffix(".json")
    if target.is_file() and meta.is_file():
        try:
            doc = json.loads(meta.read_text())
            used(target)
            return Variant(name, target, int(doc["weight_bytes"]), int(doc["nodes"]), int(doc["nodes_quantized"]),
                           dict(doc["node_dtypes"]), str(doc["tool"]), str(doc.get("repairs", "")),
                           tuple(str(e) for e in doc.get("external", ())))
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
            elif name == HELD:
                made, tool = _held(original, layer_bits or {}, block_size, quantizer, calibration, gather_bits)
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
    if (name in NBITS_VARIANTS or name == HELD) and not any(d.startswith("MatMulNBits") for d in described.values()):
        ops = sorted({layer.kind for layer in graph.weight_layers(original)})
        who = f"the {quantizer} quantizer" if name == HELD else "onnxruntime's MatMulNBitsQuantizer"
        raise VariantRefused(f"{name}: {who} found no MatMul with a constant weight to quantize in this "
                             f"graph (its weights are in {', '.join(ops) or 'no'} "
                             "nodes); --act-bits 8 --bits 8 makes the int8 QDQ variant, which quantizes Conv too")
    if name == QDQ and not quantized:
        raise VariantRefused("int8-qdq: quantize_static quantized none of this graph's weight nodes")
    if (name in DYNAMIC_VARIANTS or name == BNB4) and not quantized:
        raise VariantRefused(f"{name}: onnxruntime's quantizer quantized none of this graph's weight nodes")
    external = _save(made, target)
    variant = Variant(name, target, graph.initializer_bytes(made), len(made.graph.node), quantized, described, tool,
                      repairs, external)
    meta.write_text(json.dumps(variant.to_json()))
    prune(CACHE_DIR.parent, keep=target)  # the exports beside the variants count too
    return variant

"""The precision inventory (formats/onnx_inventory.py) on ONNX files built to hold known mixes:
what each node holds is read from the graph, never from the file's name, and a name whose
promise most weight matmuls break is flagged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from fixed_web_platform.formats import onnx_inventory as oi  # noqa: E402

K, N, BLOCK = 64, 32, 32


def _model(nodes: list, inits: list, opset_ms: bool = False) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
                              [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)], inits)
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid("com.microsoft", 1)] if opset_ms else [])
    return helper.make_model(graph, opset_imports=opsets)


def _nbits_chain(bits: list[int]) -> onnx.ModelProto:
    """Layers x -> y0 -> y1 ...: a K x K MatMulNBits at each of ``bits``."""
    nodes, inits, x = [], [], "x"
    for i, b in enumerate(bits):
        inits += [numpy_helper.from_array(np.zeros((K, K // BLOCK, BLOCK * b // 8), np.uint8), f"w{i}"),
                  numpy_helper.from_array(np.ones((K * K // BLOCK,), np.float32), f"s{i}")]
        nodes.append(helper.make_node("MatMulNBits", [x, f"w{i}", f"s{i}"], [f"y{i}"], domain="com.microsoft",
                                      K=K, N=K, bits=b, block_size=BLOCK))
        x = f"y{i}"
    return _model(nodes, inits, opset_ms=True)


def test_a_q4_file_holding_8_bit_layers_is_flagged_and_an_honest_one_is_not():
    mixed = oi.inventory(_nbits_chain([4, 8, 8, 8]))
    assert mixed.kinds() == {"MatMulNBits/int4": 1, "MatMulNBits/int8": 3}
    assert mixed.matmul_bits() == {4: 1, 8: 3}
    flag = oi.promise("model_q4.onnx", mixed)
    assert "'q4' (4-bit)" in flag and "1 of 4" in flag and "3 at 8 bits" in flag
    assert oi.promise("model_q8.onnx", mixed) == ""  # 3 of 4 at 8 bits: the promise holds
    honest = oi.inventory(_nbits_chain([4, 4, 4, 8]))  # a head at 8 bits, as builds often keep it
    assert oi.promise("model_q4.onnx", honest) == ""
    assert oi.promise("model.onnx", mixed) == ""  # no promise in the name
    # packed codes: N rows x K/32 blocks x 16 bytes (4-bit) + float32 scales
    assert mixed.nodes[0].weight_bytes == K * (K // BLOCK) * 16 + 4 * K * K // BLOCK


def test_weights_are_read_through_casts_and_qdq_and_counted_once():
    w16 = numpy_helper.from_array(np.ones((K, N), np.float16), "w16")
    q8 = numpy_helper.from_array(np.ones((K, N), np.int8), "q8")
    q4 = helper.make_tensor("q4", TensorProto.INT4, [K, N], np.ones(K * N, np.int8).tolist())
    scale = numpy_helper.from_array(np.float32(0.1), "scale")
    nodes = [
        helper.make_node("Cast", ["w16"], ["w16f"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["x", "w16f"], ["a"]),
        helper.make_node("DequantizeLinear", ["q8", "scale"], ["q8f"]),
        helper.make_node("MatMul", ["x", "q8f"], ["b"]),
        helper.make_node("DequantizeLinear", ["q4", "scale"], ["q4f"]),
        helper.make_node("Transpose", ["q4f"], ["q4t"], perm=[1, 0]),
        helper.make_node("Gemm", ["a", "q4t"], ["c"], transB=1),
    ]
    inv = oi.inventory(_model(nodes, [w16, q8, q4, scale]))
    assert inv.kinds() == {"MatMul/float16": 1, "DequantizeLinear/int8": 1, "DequantizeLinear/int4": 1}
    assert inv.matmul_bits() == {16: 1, 8: 1, 4: 1}
    sizes = inv.bytes_by_precision()
    assert sizes["float16"] == 2 * K * N and sizes["int4"] == K * N // 2 + 4 and sizes["int8"] == K * N + 4


def test_dynamic_int8_as_transformers_js_q8_makes_it(tmp_path: Path):
    """onnxruntime's quantize_dynamic (how transformers.js's q8/int8/uint8 files were made):
    MatMulInteger on 8-bit weights and DynamicQuantizeLinear on the activations."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "w")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [w])
    model.opset_import[0].version = 17
    tmp = tmp_path
    onnx.save(model, tmp / "model.onnx")
    quantize_dynamic(tmp / "model.onnx", tmp / "model_quantized.onnx", weight_type=QuantType.QUInt8)
    inv = oi.read(tmp / "model_quantized.onnx")
    assert inv.kinds() == {"MatMulInteger/uint8": 1}
    assert dict(inv.counted) == {"DynamicQuantizeLinear": 1}
    assert "MatMulInteger/uint8 x1" in inv.text() and "DynamicQuantizeLinear x1" in inv.text()
    assert oi.promise("model_quantized.onnx", inv) == ""
    assert oi.promise("model_fp16.onnx", inv).startswith("named 'fp16' (16-bit) but 0 of 1")


def test_bnb4_and_quantized_embeddings():
    codes = numpy_helper.from_array(np.zeros((K * N // 2,), np.uint8), "codes")
    absmax = numpy_helper.from_array(np.ones((K * N // BLOCK,), np.float32), "absmax")
    table = numpy_helper.from_array(np.zeros((100, K // 2), np.uint8), "table")
    tscale = numpy_helper.from_array(np.ones((100, K // BLOCK), np.float32), "tscale")
    ids = numpy_helper.from_array(np.zeros((1,), np.int64), "ids")
    nodes = [
        helper.make_node("GatherBlockQuantized", ["table", "ids", "tscale"], ["e"], domain="com.microsoft",
                         bits=4, block_size=BLOCK),
        helper.make_node("MatMulBnb4", ["x", "codes", "absmax"], ["y"], domain="com.microsoft", K=K, N=N,
                         block_size=BLOCK, quant_type=1),
    ]
    inv = oi.inventory(_model(nodes, [codes, absmax, table, tscale, ids], opset_ms=True))
    assert inv.kinds() == {"GatherBlockQuantized/int4": 1, "MatMulBnb4/nf4": 1}
    assert inv.matmul_bits() == {4: 1}  # the embedding is not a weight matmul
    assert oi.promise("model_bnb4.onnx", inv) == ""
    assert oi.promised_bits("decoder_model_merged_q4f16.onnx") == ("q4f16", 4)
    assert oi.promised_bits("model.onnx") is None


def test_the_report_flags_rows_whose_file_breaks_its_name_on_its_first_screen():
    import pandas as pd

    from fixed_web_platform.report.render import promise_caveat

    rows = pd.DataFrame({"model": ["a/model_q4.onnx", "a/model_q4.onnx", "b.onnx"],
                         "precision_promise": [oi.promise("model_q4.onnx", oi.inventory(_nbits_chain([4, 8, 8]))),
                                               "", ""]})
    caveat = promise_caveat(rows)
    assert caveat.startswith("Precision not as named: 1 row ran ONNX files")
    assert "a/model_q4.onnx: named 'q4' (4-bit) but 1 of 3 weight matmuls hold 4 bits" in caveat
    assert promise_caveat(rows.iloc[1:]) == "" and promise_caveat(rows.drop(columns="precision_promise")) == ""


def test_the_inventory_command_reads_a_folder_and_flags_the_broken_promise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from fixed_web_platform.cli import main as cli

    folder = tmp_path / "model" / "onnx"  # a transformers.js folder's layout
    folder.mkdir(parents=True)
    onnx.save(_nbits_chain([4, 8, 8, 8]), folder / "model_q4.onnx")
    onnx.save(_nbits_chain([4, 4, 4, 8]), folder / "model_q4f16.onnx")
    assert cli.main(["inventory", str(tmp_path / "model")]) == 0
    out = capsys.readouterr().out
    assert "| " + str(folder / "model_q4.onnx") + " | 3 at 8, 1 at 4 | MatMulNBits/int8 x3, MatMulNBits/int4 x1 |" in out
    assert "**named 'q4' (4-bit) but 1 of 4 weight matmuls hold 4 bits" in out
    assert out.rstrip().endswith("2 files; 1 whose name promises a precision most of its weight matmuls do not hold")
    assert cli.main(["inventory", "--json", str(folder / "model_q4f16.onnx")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["matmul_bits"] == {"4": 3, "8": 1} and doc["promise"] == ""
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf")
    (tmp_path / "empty").mkdir()
    for argv, message in (([str(tmp_path / "nowhere")], "no such file or folder"),
                          ([str(tmp_path / "empty")], "no .onnx file in this folder"),
                          ([str(tmp_path / "junk.onnx")], "not an ONNX model")):
        assert cli.main(["inventory", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err

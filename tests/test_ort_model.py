"""The ONNX models handed to ONNX Runtime Web compute exactly what the harness kernels compute:
run in onnxruntime (CPU) they match the float64 result with the dequantized weights."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from fixed_web_platform.engines.ort.onnx_matmul import IR_VERSION, matmul_model
from fixed_web_platform.workloads import MatmulWorkload
from fixed_web_platform.workloads.matmul import prepare


@pytest.mark.parametrize("bits", [32, 16, 8, 4, 2])
@pytest.mark.parametrize("shape", [(3, 64, 24), (2, 96, 40)])  # 40 rows x 3 blocks: odd zero-point rows
def test_model_matches_the_dequantized_reference(bits: int, shape: tuple[int, int, int]) -> None:
    w = MatmulWorkload("t", *shape)
    p = prepare(w, bits, 32, 0, unsigned=True)
    t = p.tensors
    model = matmul_model(k=w.k, n=w.n, bits=bits, block_size=32, w=t["w"], scales=t.get("scales"),
                         zero_points=t.get("zero_points"))
    parsed = onnx.load_from_string(model)
    assert parsed.ir_version == IR_VERSION
    onnx.checker.check_model(parsed)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = np.frombuffer(t["x"], dtype="<f4").reshape(w.m, w.k)
    if bits == 16:  # the model takes and gives float16; the page converts, as here
        x = x.astype(np.float16)
    (y,) = session.run(["y"], {"x": x})
    y = y.astype(np.float64)
    assert len(parsed.graph.node) == 1
    rel = np.linalg.norm(y - p.ref_dequantized) / np.linalg.norm(p.ref_dequantized)
    assert rel < (1e-2 if bits == 16 else 1e-5), rel


def test_unpackable_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no ONNX form"):
        matmul_model(k=32, n=1, bits=3, block_size=32, w=b"")
    with pytest.raises(ValueError, match="multiple of the block"):
        matmul_model(k=40, n=1, bits=4, block_size=32, w=b"\0" * 20, scales=b"", zero_points=b"")


def test_int8_qdq_model_is_the_fused_forms_numbers_with_its_own_scales_per_node() -> None:
    """The int8 QDQ model (ORT's int8 activations) holds the harness's per-channel int8 weights
    and calibrated input/output parameters: run in onnxruntime it gives the reference of the
    harness's fused WebNN form, and every Q/DQ node has a scale of its own (see QDQ_WEBNN_OPTIMIZATION)."""
    from fixed_web_platform.engines.ort.onnx_matmul import qdq_matmul_model
    from fixed_web_platform.vocabulary import PER_CHANNEL_BLOCK
    from fixed_web_platform.workloads.matmul import float_input

    w = MatmulWorkload("t", 16, 96, 40)
    p = prepare(w, 8, PER_CHANNEL_BLOCK, 0, unsigned=False, act_bits=8, observer="minmax", out_int8=True)
    t = p.tensors
    model = qdq_matmul_model(k=w.k, n=w.n, w=t["w"], scales=t["scales"], zero_points=t["zero_points"],
                             act=(p.act_scale, p.act_zero_point), out=(p.out_scale, p.out_zero_point))
    parsed = onnx.load_from_string(model)
    onnx.checker.check_model(parsed)
    ops = [n.op_type for n in parsed.graph.node]
    assert ops == ["QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm", "QuantizeLinear",
                   "DequantizeLinear"]
    gemm = parsed.graph.node[3]
    assert gemm.name == "matmul" and onnx.helper.get_attribute_value(gemm.attribute[0]) == 1  # transB
    activation_scales = [n.input[1] for n in parsed.graph.node if "Linear" in n.op_type and n.input[0] != "qdq/w_int8"]
    assert len(set(activation_scales)) == 4, activation_scales
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in parsed.graph.initializer}
    assert inits["qdq/w_int8"].dtype == np.int8 and inits["qdq/w_int8"].shape == (40, 96)
    assert not inits["qdq/w_zero_point"].any()
    # The model's numbers as written (Q/DQ pairs around a float Gemm): ORT's fused int8 GEMM is a
    # property of the CPU, not of the model; on an AVX2 CPU without VNNI (this AMD EPYC) its u8s8
    # kernel saturates 16-bit pair sums and lands up to 14 output steps off, on AVX-512 VNNI none.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    (y,) = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": float_input(w, 0)})
    # on the int8 output grid; ORT's CPU rounding may differ from numpy's by one step at a tie
    steps = np.abs(y.astype(np.float64) - p.ref_dequantized) / p.out_scale
    assert steps.max() <= 1.0 + 1e-6 and np.mean(steps > 0.5) < 0.01, steps.max()


def test_qdq_model_refuses_asymmetric_weights() -> None:
    from fixed_web_platform.engines.ort.onnx_matmul import qdq_matmul_model

    with pytest.raises(ValueError, match="zero point 0"):
        qdq_matmul_model(k=4, n=1, w=b"\1\2\3\4", scales=b"\0\0\x80\x3f", zero_points=b"\3",
                         act=(0.1, 0), out=None)

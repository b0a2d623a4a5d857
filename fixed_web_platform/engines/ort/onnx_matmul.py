"""One-node ONNX models for ONNX Runtime Web, built from the bytes the harness already prepared.

MatMulNBits (com.microsoft) for 8/4/2 bits: B is the harness's packed weights as they are
(row-major W[N, K], first element in the lowest bits, which is MatMulNBits' [N, blocks, blob]
layout), scales are the harness's, and zero points are repacked per row (MatMulNBits pads each
row's zero points to whole bytes), or float32 ones as they are (the quantizers that keep a float
zero per block; MatMulNBits computes (q - zero_point) * scale with either). MatMul on W^T for 32
bits, and a float16 MatMul with float16 input and output for 16 bits (the page converts x and y).
Every model is one node, so "where did ORT place it" has one answer. ir_version is set explicitly: onnx's default is newer than ORT Web reads.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...formats.matmul_nbits import MS_DOMAIN, nbits_zero_points

IR_VERSION = 10
OPSET = 21
NODE_NAME = "matmul"
"""The weight-bearing node's name: the page finds it in ORT's node-placement log."""


def matmul_model(*, k: int, n: int, bits: int, block_size: int, w: bytes,
                 scales: bytes | None = None, zero_points: bytes | None = None, float_zero: bool = False) -> bytes:
    """y[M, N] = x[M, K] @ W^T with a dynamic M; float32 x and y except at 16 bits (float16).
    ``float_zero``: ``zero_points`` are float32, one per block (else packed like the weights)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])
    opsets = [helper.make_opsetid("", OPSET)]
    if bits == 32:
        wt = np.frombuffer(w, dtype="<f4").reshape(n, k).T.copy()
        nodes = [helper.make_node("MatMul", ["x", "w_t"], ["y"], name=NODE_NAME)]
        inits = [numpy_helper.from_array(wt, "w_t")]
    elif bits == 16:
        # float16 in and out, so the model stays one node and a fallback probe names that node.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["M", k])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["M", n])
        wt = np.frombuffer(w, dtype="<f2").reshape(n, k).T.copy()
        nodes = [helper.make_node("MatMul", ["x", "w_t"], ["y"], name=NODE_NAME)]
        inits = [numpy_helper.from_array(wt, "w_t")]
    elif bits in (8, 4, 2):
        if k % block_size or scales is None or zero_points is None:
            raise ValueError("MatMulNBits needs K a multiple of the block, scales and zero points")
        blocks = k // block_size
        blob = block_size * bits // 8
        b = np.frombuffer(w, dtype=np.uint8)[: n * blocks * blob].reshape(n, blocks, blob)
        zp = nbits_zero_points(zero_points, bits, n, blocks, float_zero)
        sc = np.frombuffer(scales, dtype="<f4")[: n * blocks].copy()
        nodes = [helper.make_node("MatMulNBits", ["x", "b", "scales", "zero_points"], ["y"],
                                  domain=MS_DOMAIN, K=k, N=n, bits=bits, block_size=block_size,
                                  name=NODE_NAME)]
        inits = [numpy_helper.from_array(b.copy(), "b"), numpy_helper.from_array(sc, "scales"),
                 numpy_helper.from_array(zp, "zero_points")]
        opsets.append(helper.make_opsetid(MS_DOMAIN, 1))
    else:
        raise ValueError(f"bits {bits} has no ONNX form here")
    graph = helper.make_graph(nodes, f"matmul_{bits}bit", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="fixed_web_platform")
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def qdq_linear_nodes(prefix: str, x: str, y: str, name: str, *, k: int, n: int, w_int8: np.ndarray,
                     w_scales: np.ndarray, act: tuple[float, int], out: tuple[float, int] | None,
                     ) -> tuple[list, list]:
    """The int8 QDQ form of y = x[rows, K] @ W^T (ONNX's standard QuantizeLinear /
    DequantizeLinear, as onnxruntime.quantization writes QDQ models): x through int8 with the
    calibrated per-tensor ``act`` (scale, zero point), W int8 [N, K] per output channel (axis 0,
    zero point 0), ``Gemm(transB=1)`` named ``name``, and, with ``out``, the output through int8
    too: the pattern ORT's WebNN provider hands to WebNN as dequantizeLinear -> gemm ->
    quantizeLinear, which Chromium's TFLite backend fuses (engines/webnn/forms.py). Every Q and DQ
    node holds its own scale and zero point: the backend fuses only when each is a constant with
    a single user (engines/ort.QDQ_WEBNN_OPTIMIZATION). Returns (nodes, initializers)."""
    if w_int8.shape != (n, k) or w_int8.dtype != np.int8 or w_scales.shape != (n,):
        raise ValueError(f"QDQ {name}: int8 weights [{n}, {k}] with {n} per-channel scales expected")
    p = f"{prefix}/"
    inits: list = []

    def params(node: str, scale: float, zero_point: int) -> list[str]:
        names = [f"{p}{node}.scale", f"{p}{node}.zero_point"]
        inits.extend([numpy_helper.from_array(np.array(scale, dtype=np.float32), names[0]),
                      numpy_helper.from_array(np.array(zero_point, dtype=np.int8), names[1])])
        return names

    w_node, w_inits = dequantized_weight(p + "w", w_int8, w_scales)
    inits += w_inits
    gemm_out = y if out is None else p + "y_float"
    nodes = [
        helper.make_node("QuantizeLinear", [x, *params("x_q", *act)], [p + "x_q"], name=p + "x_q"),
        helper.make_node("DequantizeLinear", [p + "x_q", *params("x_dq", *act)], [p + "x_dq"], name=p + "x_dq"),
        w_node,
        helper.make_node("Gemm", [p + "x_dq", w_node.output[0]], [gemm_out], transB=1, name=name),
    ]
    if out is not None:
        nodes += [
            helper.make_node("QuantizeLinear", [gemm_out, *params("y_q", *out)], [p + "y_q"], name=p + "y_q"),
            helper.make_node("DequantizeLinear", [p + "y_q", *params("y_dq", *out)], [y], name=p + "y_dq"),
        ]
    return nodes, inits


def dequantized_weight(prefix: str, w_int8: np.ndarray, w_scales: np.ndarray) -> tuple[object, list]:
    """``DequantizeLinear`` of int8 W [N, K] per output channel (axis 0, zero point 0), its output
    ``<prefix>_dq``: (the node, its initializers ``<prefix>_int8``, ``_scale``, ``_zero_point``)."""
    names = [f"{prefix}_int8", f"{prefix}_scale", f"{prefix}_zero_point"]
    inits = [numpy_helper.from_array(w_int8, names[0]),
             numpy_helper.from_array(w_scales.astype(np.float32), names[1]),
             numpy_helper.from_array(np.zeros(len(w_scales), dtype=np.int8), names[2])]
    return helper.make_node("DequantizeLinear", names, [f"{prefix}_dq"], axis=0, name=f"{prefix}_dq"), inits


def per_channel_int8(w: bytes, scales: bytes, zero_points: bytes, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The harness's signed per-channel 8-bit bytes as (int8 W [N, K], float32 scales [N]); QDQ
    weights are symmetric (zero point 0), which per-channel weights always are here."""
    zp = np.frombuffer(zero_points, dtype=np.int8)[:n]
    if zp.any():
        raise ValueError("QDQ per-channel weights need zero point 0 (the symmetric per-channel form)")
    return (np.frombuffer(w, dtype=np.int8)[: n * k].reshape(n, k).copy(),
            np.frombuffer(scales, dtype="<f4")[:n].copy())


def qdq_matmul_model(*, k: int, n: int, w: bytes, scales: bytes, zero_points: bytes,
                     act: tuple[float, int], out: tuple[float, int] | None) -> bytes:
    """y[M, N] = x[M, K] @ W^T as an int8 QDQ model (``qdq_linear_nodes``), float32 x and y; the
    harness's signed per-channel 8-bit weights."""
    w8, sc = per_channel_int8(w, scales, zero_points, n, k)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])
    nodes, inits = qdq_linear_nodes("qdq", "x", "y", NODE_NAME, k=k, n=n, w_int8=w8, w_scales=sc, act=act, out=out)
    graph = helper.make_graph(nodes, "matmul_qdq_int8", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fixed_web_platform")
    model.ir_version = IR_VERSION
    return model.SerializeToString()

"""One-node ONNX models for ONNX Runtime Web, built from the bytes the harness already prepared.

MatMulNBits (com.microsoft) for 8/4/2 bits: B is the harness's packed weights as they are
(row-major W[N, K], first element in the lowest bits, which is MatMulNBits' [N, blocks, blob]
layout), scales are the harness's, and zero points are repacked per row (MatMulNBits pads each
row's zero points to whole bytes). MatMul on W^T for 32 bits, and a float16 MatMul with float16
input and output for 16 bits (the page converts x and y). Every model is one node, so "where did
ORT place it" has one answer. ir_version is set explicitly: onnx's default is newer than ORT Web reads.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10
OPSET = 21
MS_DOMAIN = "com.microsoft"
NODE_NAME = "matmul"
"""The weight-bearing node's name: the page finds it in ORT's node-placement log."""


def _unpack_rows(packed: bytes, bits: int, rows: int, per_row: int) -> np.ndarray:
    """Values packed contiguously (first element in the lowest bits), as a [rows, per_row] array."""
    flat = np.frombuffer(packed, dtype=np.uint8)
    per_byte = 8 // bits
    values = np.stack([(flat >> (bits * i)) & ((1 << bits) - 1) for i in range(per_byte)], axis=1)
    return values.reshape(-1)[: rows * per_row].reshape(rows, per_row)


def _pack_rows(values: np.ndarray, bits: int) -> np.ndarray:
    """Each row packed to whole bytes (first element in the lowest bits)."""
    per_byte = 8 // bits
    rows, count = values.shape
    padded = np.zeros((rows, -(-count // per_byte) * per_byte), dtype=np.uint8)
    padded[:, :count] = values
    grouped = padded.reshape(rows, -1, per_byte).astype(np.uint16)
    return sum(grouped[:, :, i] << (bits * i) for i in range(per_byte)).astype(np.uint8)


def matmul_model(*, k: int, n: int, bits: int, block_size: int, w: bytes,
                 scales: bytes | None = None, zero_points: bytes | None = None) -> bytes:
    """y[M, N] = x[M, K] @ W^T with a dynamic M; float32 x and y except at 16 bits (float16)."""
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
        zp = _pack_rows(_unpack_rows(zero_points, bits, n, blocks), bits).reshape(-1)
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

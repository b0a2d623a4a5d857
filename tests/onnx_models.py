"""Small ONNX graphs the onnx-kind tests feed the harness, built with onnx's helper (seeded):

``tiny_classifier``: pixels float32 [batch, 3, 8, 8] -> Conv 3->8 (3x3) -> Relu -> Flatten ->
MatMul [512, 64] + bias -> Relu (output ``features`` [batch, 64]); ids int64 [batch, seq] ->
Gather from an embedding [100, 64], masked by attention_mask int64 [batch, seq], mean over seq,
added to the features -> MatMul [64, 32] -> ``logits`` [batch, 32]. Two MatMuls with constant
weights, one Conv: every variant has something to do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OPSET = 17
IR_VERSION = 8


def tiny_classifier(path: Path, *, seed: int = 0, with_matmul: bool = True, external_data: bool = False) -> Path:
    """The graph above, at ``path``; with ``external_data`` its weights in ``<name>.data`` beside it, as
    ``onnx.save`` writes models over 2 GB (constants under 1 KiB stay in the graph, onnx's default)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def init(name: str, *shape: int, scale: float = 0.2) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [init("conv_w", 8, 3, 3, 3, scale=0.3), init("conv_b", 8), init("b1", 64), init("emb", 100, 64, scale=0.5)]
    if with_matmul:
        inits += [init("w1", 512, 64, scale=0.05), init("w2", 64, 32, scale=0.2)]
    nodes = [
        helper.make_node("Conv", ["pixels", "conv_w", "conv_b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["cr"], name="conv_relu"),
        helper.make_node("Flatten", ["cr"], ["flat"], name="flatten", axis=1),
    ]
    if with_matmul:
        nodes += [helper.make_node("MatMul", ["flat", "w1"], ["h0"], name="fc1"),
                  helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
                  helper.make_node("Relu", ["h1"], ["features"], name="fc1_relu")]
    else:  # a Conv-only graph: weight-only MatMulNBits variants have nothing to quantize
        inits += [init("w1c", 64, 512, 1, 1, scale=0.05)]
        nodes += [helper.make_node("Unsqueeze", ["flat", "axes23"], ["flat4"], name="to4d"),
                  helper.make_node("Conv", ["flat4", "w1c", "b1"], ["h4"], name="fc1"),
                  helper.make_node("Relu", ["h4"], ["h4r"], name="fc1_relu"),
                  helper.make_node("Flatten", ["h4r"], ["features"], name="fc1_flat", axis=1)]
        inits.append(numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes23"))
    nodes += [
        helper.make_node("Gather", ["emb", "ids"], ["e"], name="embed"),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], name="mask_float", to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "minus1"], ["mask3"], name="mask_3d"),
        helper.make_node("Mul", ["e", "mask3"], ["em"], name="masked"),
        helper.make_node("ReduceMean", ["em"], ["pooled"], name="pool", axes=[1], keepdims=0),
        helper.make_node("Add", ["features", "pooled"], ["joined"], name="join"),
    ]
    inits.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1"))
    if with_matmul:
        nodes.append(helper.make_node("MatMul", ["joined", "w2"], ["logits"], name="head"))
    else:
        inits.append(init("w2c", 32, 64, 1, 1, scale=0.2))
        nodes += [helper.make_node("Unsqueeze", ["joined", "axes23"], ["j4"], name="head_4d"),
                  helper.make_node("Conv", ["j4", "w2c"], ["l4"], name="head"),
                  helper.make_node("Flatten", ["l4"], ["logits"], name="head_flat", axis=1)]
    graph = helper.make_graph(
        nodes, "tiny_classifier",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 3, 8, 8]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 32]),
         helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 64])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    onnx.save(model, str(path), save_as_external_data=external_data, location=f"{path.name}.data")
    return path

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

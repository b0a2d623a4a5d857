"""Unit tests for fixed_web_platform.page_result: what the page posts is checked, not trusted."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from fixed_web_platform.page_protocol import (
    MAX_REASON_CHARS,
    PageDataError,
    parse_outputs,
    parse_page_reply,
)
from fixed_web_platform.vocabulary import PROTOCOL_VERSION
from fixed_web_platform.workloads import TensorSpec

ITERATIONS = 3
V = {"protocol_version": PROTOCOL_VERSION}


METER = {"gpu": {"devices": 1, "live_bytes": 0, "peak_bytes": 4096, "peak_buffers": 3, "largest_bytes": 2048,
                 "buffers_created": 3, "collected_bytes": 0,
                 "phase_peak_bytes": {"load": 4096, "warmup": 2048, "measured": 2048}},
         "wasm": {"memories": 1, "peak_bytes": 65536}, "webnn": {"constant_bytes": 0, "tensor_peak_bytes": 0},
         "workers": 0}


def _ok(**overrides: object) -> dict:
    payload = {
        "protocol_version": PROTOCOL_VERSION,
        "status": "ok",
        "shader": "matmul_quant.wgsl",
        "compute_dtype": "f32",
        "weight_buffer_bytes": 2048,
        "timestamp_query": True,
        "compile_ms": 12.5,
        "cold_ms": 3,
        "wall_ms": [1.0, 1.5, 2],
        "start_ms": [0.0, 1.0, 2.5],
        "floor_iterations": 1,
        "stop_reason": "steady",
        "iterations_per_sample": 1,
        "gpu_ms": [0.5, 0.25, 0.75],
        "meter": METER,
        "probe": {"webgpu": {"available": True}},
    }
    payload.update(overrides)
    return payload


def test_well_formed_ok_payload() -> None:
    page = parse_page_reply(_ok(), ITERATIONS)
    assert page.status == "ok"
    assert page.shader == "matmul_quant.wgsl"
    assert page.compute_dtype == "f32"
    assert page.weight_buffer_bytes == 2048 and page.weight_operand_dtype == ""
    assert page.timestamp_query is True
    assert page.compile_ms == 12.5
    assert page.cold_ms == 3.0 and isinstance(page.cold_ms, float)
    assert page.wall_ms == (1.0, 1.5, 2.0)
    assert page.gpu_ms == (0.5, 0.25, 0.75)
    assert page.meter is not None and page.meter.gpu_peak_bytes == 4096
    assert page.meter.gpu_phase_peak_bytes == (4096, 2048, 2048) and page.meter.wasm_peak_bytes == 65536
    assert page.probe == {"webgpu": {"available": True}}


def test_ok_payload_without_gpu_timestamps() -> None:
    page = parse_page_reply(_ok(gpu_ms=None, timestamp_query="yes", probe="not a dict"), ITERATIONS)
    assert page.gpu_ms is None
    assert page.timestamp_query is False  # only a real JSON true counts
    assert page.probe == {}


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"wall_ms": []}, "wall_ms has 0 samples"),
        ({"wall_ms": [1.0, 2.0], "start_ms": [0, 1]}, "gpu_ms has 3 samples; between 1 and 2"),
        ({"wall_ms": [1.0, 2.0]}, "start_ms has 3 samples, expected 2"),
        ({"start_ms": None}, "start_ms is not a list"),
        ({"start_ms": [0.0, 2.0, 1.0]}, "start_ms goes backwards"),
        ({"floor_iterations": 4}, "floor_iterations"),
        ({"floor_iterations": True}, "floor_iterations"),
        ({"floor_iterations": None}, "floor_iterations"),
        ({"iterations_per_sample": 0}, "iterations_per_sample"),
        ({"iterations_per_sample": 2.5}, "iterations_per_sample"),
        ({"iterations_per_sample": None}, "iterations_per_sample"),
        ({"stop_reason": "tired"}, "stop_reason"),
        ({"wall_ms": [1.0, 2.0, 3.0, 4.0]}, "wall_ms has 4 samples"),
        ({"gpu_ms": [1.0, 1.0, 1.0, 1.0]}, "gpu_ms has 4 samples"),
        ({"wall_ms": "1,2,3"}, "wall_ms is not a list"),
        ({"wall_ms": [1.0, math.nan, 2.0]}, r"wall_ms\[1\]"),
        ({"gpu_ms": [1.0, 2.0, math.inf]}, r"gpu_ms\[2\]"),
        ({"wall_ms": [1.0, -0.5, 2.0]}, "negative"),
        ({"wall_ms": [1.0, "2", 3.0]}, r"wall_ms\[1\]"),
        ({"wall_ms": [True, 1.0, 2.0]}, r"wall_ms\[0\]"),
        ({"compile_ms": math.nan}, "compile_ms"),
        ({"compile_ms": None}, "compile_ms"),
        ({"cold_ms": -1}, "cold_ms is negative"),
        ({"cold_ms": "3"}, "cold_ms"),
        ({"meter": {**METER, "gpu": {**METER["gpu"], "peak_bytes": False}}}, "meter.gpu.peak_bytes"),
        ({"meter": {**METER, "gpu": {**METER["gpu"], "peak_bytes": 2 ** 60}}}, "meter.gpu.peak_bytes"),
        ({"meter": {**METER, "wasm": None}}, "meter.wasm is not an object"),
        ({"meter": {**METER, "gpu": {**METER["gpu"], "phase_peak_bytes": {"load": 1}}}}, "phase_peak_bytes.warmup"),
        ({"meter": [1]}, "meter is not an object"),
        ({"compute_dtype": "f64"}, "compute_dtype"),
        ({"compute_dtype": None}, "compute_dtype"),
        ({"weight_operand_dtype": 4}, "weight_operand_dtype"),
        ({"weight_buffer_bytes": "4"}, "weight_buffer_bytes"),
        ({"weight_buffer_bytes": -4}, "negative"),
        ({"status": "done"}, "status"),
        ({"status": None}, "status"),
    ],
)
def test_malformed_ok_payload_rejected(overrides: dict, match: str) -> None:
    with pytest.raises(PageDataError, match=match):
        parse_page_reply(_ok(**overrides), ITERATIONS)


def test_webnn_payload_reports_the_weight_operand_type() -> None:
    page = parse_page_reply(_ok(weight_buffer_bytes=None, weight_operand_dtype="int4", gpu_ms=None, meter=None),
                            ITERATIONS)
    assert page.weight_operand_dtype == "int4" and page.meter is None


def test_failed_payload_keeps_its_stage() -> None:
    page = parse_page_reply({**V, "status": "failed", "stage": "graph building", "reason": "TypeError"}, ITERATIONS)
    assert (page.status, page.stage, page.reason) == ("failed", "graph building", "TypeError")


def test_fewer_samples_than_the_cap_are_accepted_and_left_to_the_runner_to_mark() -> None:
    page = parse_page_reply(_ok(wall_ms=[1.0, 2.0], start_ms=[0.0, 1.0], gpu_ms=[0.5]), ITERATIONS)
    assert page.wall_ms == (1.0, 2.0) and page.start_ms == (0.0, 1.0)
    assert page.gpu_ms == (0.5,)  # GPU timestamps of the last iterations (the ring)
    assert (page.floor_iterations, page.stop_reason) == (1, "steady")


def test_js_heap_is_parsed_or_explained() -> None:
    page = parse_page_reply(_ok(js_heap={"bytes": 1234, "source": "performance.memory"}), ITERATIONS)
    assert (page.js_heap_bytes, page.js_heap_source) == (1234, "performance.memory")
    page = parse_page_reply(_ok(js_heap={"bytes": None, "note": "no API"}), ITERATIONS)
    assert page.js_heap_bytes is None and page.js_heap_source == "unavailable: no API"
    with pytest.raises(PageDataError, match="js_heap"):
        parse_page_reply(_ok(js_heap={"bytes": -5}), ITERATIONS)


@pytest.mark.parametrize("payload", [None, [], "ok", 3, ["status", "ok"]])
def test_non_object_rejected(payload: object) -> None:
    with pytest.raises(PageDataError, match="not a JSON object"):
        parse_page_reply(payload, ITERATIONS)


@pytest.mark.parametrize("status", ["failed", "unsupported"])
def test_failed_and_unsupported_keep_reason(status: str) -> None:
    # No figures are required for these, so missing samples are not an error.
    page = parse_page_reply({**V, "status": status, "reason": "shader-f16 missing", "probe": {"a": 1}},
                             ITERATIONS)
    assert page.status == status
    assert page.reason == "shader-f16 missing"
    assert page.probe == {"a": 1}
    assert page.wall_ms == () and page.gpu_ms is None


def test_missing_reason_gets_placeholder() -> None:
    assert parse_page_reply({**V, "status": "failed"}, ITERATIONS).reason == "(no message)"
    assert parse_page_reply({**V, "status": "failed", "reason": ""}, ITERATIONS).reason == "(no message)"


def test_long_reason_is_truncated() -> None:
    reason = "x" * (MAX_REASON_CHARS * 3) + "END"
    page = parse_page_reply({**V, "status": "failed", "reason": reason}, ITERATIONS)
    assert len(page.reason) == MAX_REASON_CHARS
    assert reason.startswith(page.reason)


def parse_output(data: bytes | None, m: int, n: int) -> np.ndarray:
    return parse_outputs(data, (TensorSpec("out", "float32", (m, n)),))["out"]


def test_parse_output_returns_float32_m_by_n() -> None:
    values = [float(i) / 4 for i in range(6)]
    data = struct.pack("<6f", *values)
    out = parse_output(data, 2, 3)
    assert out.shape == (2, 3)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array(values, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("size", [0, 23, 25, 48])
def test_parse_output_checks_byte_length(size: int) -> None:
    with pytest.raises(PageDataError, match=f"{size} bytes, expected 24"):
        parse_output(b"\0" * size, 2, 3)


def test_parse_output_missing_tensor() -> None:
    with pytest.raises(PageDataError, match="no output"):
        parse_output(None, 2, 3)


def test_named_outputs_are_split_in_order_with_their_dtypes() -> None:
    ids = np.array([[7, -1, 3]], dtype="<i4")
    logits = np.arange(4, dtype="<f4").reshape(2, 2)
    specs = (TensorSpec("ids", "int32", (1, 3)), TensorSpec("logits", "float32", (2, 2)))
    out = parse_outputs(ids.tobytes() + logits.tobytes(), specs)
    assert list(out) == ["ids", "logits"]
    np.testing.assert_array_equal(out["ids"], ids)
    np.testing.assert_array_equal(out["logits"], logits)
    with pytest.raises(PageDataError, match="expected 28"):
        parse_outputs(ids.tobytes(), specs)


@pytest.mark.parametrize("field, value", [("wall_ms", [1.0, 1e308, 2.0]), ("cold_ms", 1e12),
                                          ("gpu_ms", [0.5, 4e6, 0.5])])
def test_absurd_samples_are_malformed_not_measured(field: str, value: object) -> None:
    with pytest.raises(PageDataError, match="beyond an hour"):
        parse_page_reply(_ok(**{field: value}), ITERATIONS)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_non_finite_outputs_are_malformed(bad: float) -> None:
    data = np.ones((2, 3), dtype="<f4")
    data[1, 2] = bad
    with pytest.raises(PageDataError, match="non-finite"):
        parse_output(data.tobytes(), 2, 3)
    assert parse_output(np.ones((2, 3), dtype="<f4").tobytes(), 2, 3).shape == (2, 3)

"""Unit tests for fixed_web_platform.quant (numpy quantization reference)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.precision import quant as Q

FIXTURE = Path(__file__).parent / "fixtures" / "webnn_wpt_quant_cases.json"
CASES: list[dict] = json.loads(FIXTURE.read_text())
CASES_BY_NAME = {c["name"]: c for c in CASES}

_FLOAT_TYPES = {"float32": np.float32, "float16": np.float16}


def _tensor(desc: dict) -> np.ndarray:
    """Fixture tensor -> numpy; floats rounded to their declared type as WPT typed arrays do."""
    dt = _FLOAT_TYPES.get(desc["dataType"], np.int64)
    return np.array(desc["data"], dtype=dt).reshape(desc["shape"])


def _ordered(a: np.ndarray) -> np.ndarray:
    """Float bit patterns -> integers whose difference counts ULPs (-0.0 and +0.0 both -> 0)."""
    if a.dtype == np.float16:
        i = a.view(np.int16).astype(np.int64)
        sign_mask = 0x7FFF
    else:
        i = a.astype(np.float32).view(np.int32).astype(np.int64)
        sign_mask = 0x7FFFFFFF
    return np.where(i < 0, -(i & sign_mask), i)


def _ulp_diff(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    assert got.dtype == expected.dtype
    return np.abs(_ordered(got) - _ordered(expected))


def _apply_operators(x: np.ndarray, operators: list[dict]) -> np.ndarray:
    """Apply the pre-ops a case lists before its final dequantizeLinear."""
    assert operators[-1]["name"] == "dequantizeLinear"
    for op in operators[:-1]:
        if op["name"] == "transpose":
            x = np.transpose(x, op["permutation"])
        elif op["name"] == "reshape":
            x = x.reshape(op["newShape"])
        else:
            raise AssertionError(f"unsupported operator {op['name']}")
    return x


def _run_case(case: dict, **quant_kw) -> np.ndarray:
    x = _tensor(case["input"])
    if case["op"] == "dequantizeLinear":
        if "operators" in case:
            x = _apply_operators(x, case["operators"])
        return Q.dequantize_linear(x, _tensor(case["scale"]), _tensor(case["zeroPoint"]))
    if case["op"] == "quantizeLinear":
        return Q.quantize_linear(
            x,
            _tensor(case["scale"]),
            _tensor(case["zeroPoint"]),
            case["zeroPoint"]["dataType"],
            **quant_kw,
        )
    assert case["op"] == "quantizeLinear+dequantizeLinear"
    qp, dp = case["quantize"], case["dequantize"]
    q = Q.quantize_linear(
        x, _tensor(qp["scale"]), _tensor(qp["zeroPoint"]), qp["zeroPoint"]["dataType"], **quant_kw
    )
    return Q.dequantize_linear(q, _tensor(dp["scale"]), _tensor(dp["zeroPoint"]))


# ---------------------------------------------------------------------------
# WPT conformance vectors
# ---------------------------------------------------------------------------


def test_fixture_has_all_cases() -> None:
    assert len(CASES) == 64
    assert len(CASES_BY_NAME) == 64  # names are unique, so parametrize ids are too
    ops = {c["op"] for c in CASES}
    assert ops == {"dequantizeLinear", "quantizeLinear", "quantizeLinear+dequantizeLinear"}


@pytest.mark.parametrize("name", list(CASES_BY_NAME))
def test_conformance_case(name: str) -> None:
    case = CASES_BY_NAME[name]
    expected = _tensor(case["expected"])
    got = _run_case(case)
    assert got.shape == expected.shape
    if case["expected"]["dataType"] in _FLOAT_TYPES:
        # WPT tolerance for float outputs: 1 ULP of the output type.
        assert got.dtype == expected.dtype
        diff = _ulp_diff(got, expected)
        assert diff.max(initial=0) <= 1, (got, expected)
    else:
        # WPT allows +-1 on integer outputs; the reference is exact on every vector.
        lo, hi = Q.DTYPE_RANGES[case["expected"]["dataType"]]
        assert got.dtype == np.int64
        assert got.min() >= lo and got.max() <= hi
        np.testing.assert_array_equal(got, expected)


def test_float32_division_is_within_wpt_tolerance() -> None:
    """A float32 kernel differs by 1 on the int32 vector (24-bit mantissa), which WPT tolerates."""
    off = 0
    for case in CASES:
        if case["op"] != "quantizeLinear":
            continue
        got = _run_case(case, compute_dtype="float32")
        d = np.abs(got - _tensor(case["expected"]))
        assert d.max(initial=0) <= 1, case["name"]
        off += int(d.sum())
    assert off == 1


def test_float16_division_breaks_a_case() -> None:
    """Why the reference quantizes in float32: dividing in float16 moves a float16 vector by 2."""
    case = CASES_BY_NAME["quantizeLinear float16 tensor with int32 zeroPoint"]
    bad = _run_case(case, compute_dtype="float16")
    assert np.abs(bad - _tensor(case["expected"])).max() == 2


@pytest.mark.parametrize(
    "name", [c["name"] for c in CASES if c["input"]["dataType"] in ("int4", "uint4")]
)
def test_conformance_sub_byte_inputs_pack_like_wpt(name: str) -> None:
    """WPT packs int4/uint4 inputs two per byte, low nibble first; our packer round-trips them."""
    case = CASES_BY_NAME[name]
    vals = _tensor(case["input"]).ravel()
    signed = Q.dtype_signed(case["input"]["dataType"])
    packed = Q.pack_bits(vals, 4)
    assert packed.size == (vals.size + 1) // 2
    assert packed[0] & 0x0F == vals[0] & 0x0F
    np.testing.assert_array_equal(Q.unpack_bits(packed, 4, vals.size, signed), vals)


# ---------------------------------------------------------------------------
# dtype helpers
# ---------------------------------------------------------------------------


def test_dtype_tables() -> None:
    assert Q.DTYPE_RANGES["int8"] == (-128, 127)
    assert Q.DTYPE_RANGES["uint4"] == (0, 15)
    assert Q.DTYPE_RANGES["int2"] == (-2, 1)
    assert Q.DTYPE_RANGES["int32"] == (-(2**31), 2**31 - 1)
    assert [Q.dtype_bits(d) for d in ("int8", "uint4", "int2", "int32")] == [8, 4, 2, 32]
    assert Q.dtype_signed("int4") and not Q.dtype_signed("uint2")
    with pytest.raises(ValueError, match="int3"):
        Q.dtype_bits("int3")


def test_unknown_dtype_raises() -> None:
    with pytest.raises(ValueError, match="float8"):
        Q.quantize_linear(np.ones(2, np.float32), np.float32(1), 0, "float8")


# ---------------------------------------------------------------------------
# quantize / dequantize semantics and blockwise broadcast
# ---------------------------------------------------------------------------


def _loop_expand(param: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=param.dtype)
    for idx in np.ndindex(*shape):
        pidx = tuple(i // (d // p) for i, d, p in zip(idx, shape, param.shape))
        out[idx] = param[pidx]
    return out


@pytest.mark.parametrize(
    "pshape",
    [(1, 1, 1), (4, 1, 1), (1, 6, 1), (4, 3, 1), (2, 2, 8), (4, 6, 8), (1, 1, 2)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_expand_blockwise_matches_loop(pshape: tuple[int, ...]) -> None:
    shape = (4, 6, 8)
    rng = np.random.default_rng(1)
    param = rng.standard_normal(pshape).astype(np.float32)
    np.testing.assert_array_equal(Q.expand_blockwise(param, shape), _loop_expand(param, shape))


def test_expand_blockwise_scalar_is_per_tensor() -> None:
    out = Q.expand_blockwise(np.float32(2.5), (2, 3))
    assert out.shape == (2, 3) and np.all(out == 2.5)
    assert Q.expand_blockwise(np.array(7), ()).shape == ()


@pytest.mark.parametrize("pshape", [(3, 1), (1, 5), (4,), (1, 1, 1), (0, 1)])
def test_blockwise_mismatch_raises_naming_shapes(pshape: tuple[int, ...]) -> None:
    shape = (4, 6)
    param = np.ones(pshape, np.float32)
    with pytest.raises(ValueError) as ei:
        Q.expand_blockwise(param, shape)
    msg = str(ei.value)
    assert str(tuple(pshape)) in msg and str(shape) in msg
    with pytest.raises(ValueError, match=r"\(4, 6\)"):
        Q.quantize_linear(np.zeros(shape, np.float32), param, np.zeros(pshape, np.int64), "int8")
    with pytest.raises(ValueError, match=r"\(4, 6\)"):
        Q.dequantize_linear(np.zeros(shape, np.int64), param, np.zeros(pshape, np.int64))


def test_quantize_blockwise_matches_loop() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8)).astype(np.float32) * 3
    scale = rng.uniform(0.05, 0.5, (2, 4)).astype(np.float32)
    zp = rng.integers(-3, 4, (2, 4))
    q = Q.quantize_linear(x, scale, zp, "int4")
    for i in range(4):
        for j in range(8):
            s, z = scale[i // 2, j // 2], zp[i // 2, j // 2]
            ref = min(7, max(-8, round(float(x[i, j]) / float(s)) + z))  # round() is half-even
            assert q[i, j] == ref
    dq = Q.dequantize_linear(q, scale, zp)
    assert dq.dtype == np.float32
    diff = (q - _loop_expand(zp, x.shape)).astype(np.float32)
    np.testing.assert_array_equal(dq, diff * _loop_expand(scale, x.shape))


def test_quantize_rounds_half_to_even_and_clamps() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0, np.inf, -np.inf, np.nan], np.float32)
    q = Q.quantize_linear(x, np.float32(1.0), np.int64(0), "int8")
    np.testing.assert_array_equal(q, [0, 2, 2, 0, -2, 127, -128, 127, -128, 0])
    qu = Q.quantize_linear(x, np.float32(1.0), np.int64(3), "uint2")
    np.testing.assert_array_equal(qu, [3, 3, 3, 3, 1, 3, 0, 3, 0, 3])


def test_quantize_rejects_out_of_range_zero_point() -> None:
    with pytest.raises(ValueError, match="zero_point"):
        Q.quantize_linear(np.zeros(2, np.float32), np.float32(1), np.array([0, 8]), "int4")


def test_dequantize_output_dtype_follows_scale() -> None:
    q = np.array([-8, 0, 7])
    out16 = Q.dequantize_linear(q, np.float16(0.1), np.int64(1))
    out32 = Q.dequantize_linear(q, np.float32(0.1), np.int64(1))
    assert out16.dtype == np.float16 and out32.dtype == np.float32
    np.testing.assert_array_equal(out16, (np.array([-9, -1, 6], np.float16) * np.float16(0.1)))
    np.testing.assert_array_equal(out32, (np.array([-9, -1, 6], np.float32) * np.float32(0.1)))


# ---------------------------------------------------------------------------
# bit packing
# ---------------------------------------------------------------------------


def test_pack_bits_layout() -> None:
    np.testing.assert_array_equal(Q.pack_bits([1, 2, 3, 0], 2), [0b00111001])
    np.testing.assert_array_equal(Q.pack_bits([-1, 2], 4), [0x2F])
    np.testing.assert_array_equal(Q.pack_bits([0x3, 0xA, 0x5], 4), [0xA3, 0x05])
    np.testing.assert_array_equal(Q.pack_bits([-2, 1, 3], 2), [0b00110110])
    np.testing.assert_array_equal(Q.pack_bits([-128, 255, 7], 8), [0x80, 0xFF, 0x07])
    assert Q.pack_bits([1, 2, 3], 4).dtype == np.uint8


def test_pack_bits_flattens_rows_without_padding() -> None:
    rows = np.array([[1, 2, 3], [4, 5, 6]])  # 3 nibbles per row: rows share a byte
    np.testing.assert_array_equal(Q.pack_bits(rows, 4), [0x21, 0x43, 0x65])


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("count", [1, 7, 33])
def test_pack_unpack_round_trip(bits: int, signed: bool, count: int) -> None:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    rng = np.random.default_rng(bits * 100 + count)
    vals = rng.integers(lo, hi + 1, count)
    vals[0], vals[-1] = lo, hi
    packed = Q.pack_bits(vals, bits)
    assert packed.size == math.ceil(count * bits / 8)
    np.testing.assert_array_equal(Q.unpack_bits(packed, bits, count, signed), vals)


def test_unpack_sign_extension() -> None:
    np.testing.assert_array_equal(Q.unpack_bits(np.array([0x2F], np.uint8), 4, 2, True), [-1, 2])
    np.testing.assert_array_equal(Q.unpack_bits(np.array([0x2F], np.uint8), 4, 2, False), [15, 2])
    np.testing.assert_array_equal(
        Q.unpack_bits(np.array([0b11100100], np.uint8), 2, 4, True), [0, 1, -2, -1]
    )
    with pytest.raises(ValueError):
        Q.unpack_bits(np.array([0], np.uint8), 4, 3, True)


@pytest.mark.parametrize("bits,bad", [(2, 4), (2, -3), (4, 16), (4, -9), (8, 256), (8, -129)])
def test_pack_out_of_range_raises(bits: int, bad: int) -> None:
    with pytest.raises(ValueError, match=str(bad)):
        Q.pack_bits([0, bad], bits)


def test_pack_invalid_bits_raises() -> None:
    with pytest.raises(ValueError):
        Q.pack_bits([1], 3)


def test_pack_u32_words() -> None:
    words = Q.pack_u32_words(list(range(9)), 4)  # 5 bytes -> padded to 8 -> 2 words
    assert words.dtype == np.uint32
    np.testing.assert_array_equal(words, [0x76543210, 0x00000008])
    w2 = Q.pack_u32_words([1, 2, 3, 0, -1], 2)
    np.testing.assert_array_equal(w2, [0b00111001 | (0b11 << 8)])
    # Field i of word i // 8 at bit 4 * (i % 8): how a WGSL kernel reads it.
    vals = np.random.default_rng(3).integers(-8, 8, 21)
    words = Q.pack_u32_words(vals, 4)
    for i, v in enumerate(vals):
        field = (int(words[i // 8]) >> (4 * (i % 8))) & 0xF
        assert field - 16 * (field >= 8) == v


# ---------------------------------------------------------------------------
# parameter choice
# ---------------------------------------------------------------------------


def _weights(n: int = 16, k: int = 128, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel", "blockwise"])
def test_error_decreases_with_bits(symmetric: bool, granularity: str) -> None:
    w = _weights()
    errs = {}
    for bits in (2, 4, 8):
        q, p = Q.quantize_weights(w, bits, symmetric=symmetric, granularity=granularity)
        lo, hi = Q.DTYPE_RANGES[p.dtype]
        assert q.min() >= lo and q.max() <= hi
        errs[bits] = Q.rel_rms_error(Q.dequantize_weights(q, p), w)
    assert errs[2] > errs[4] > errs[8]
    assert errs[8] < 0.02


def test_qparams_shapes_and_dtypes() -> None:
    w = _weights(6, 64)
    expect = {"per_tensor": (1, 1), "per_channel": (6, 1), "blockwise": (6, 4)}
    for gran, shape in expect.items():
        p = Q.choose_qparams(w, 4, granularity=gran, block_size=16)
        assert p.scale.shape == shape and p.zero_point.shape == shape
        assert p.scale.dtype == np.float32 and p.zero_point.dtype == np.int64
        assert p.dtype == "int4" and p.scheme == "asymmetric"
        assert p.block_size == (16 if gran == "blockwise" else None)
    assert [Q.choose_qparams(w, b).dtype for b in (8, 4, 2)] == ["int8", "int4", "int2"]


def test_symmetric_has_zero_zero_point() -> None:
    w = _weights()
    p = Q.choose_qparams(w, 4, symmetric=True, block_size=32)
    assert p.scheme == "symmetric"
    assert np.all(p.zero_point == 0)
    blocks = np.abs(w.reshape(16, 4, 32)).max(axis=2)
    np.testing.assert_allclose(p.scale, blocks / 7, rtol=1e-6)


def test_asymmetric_params_values_and_exact_zero() -> None:
    w = np.array([[0.5, 1.0, 2.0, 3.0], [-4.0, -1.0, 1.0, 11.0]], np.float32)
    p = Q.choose_qparams(w, 4, granularity="per_channel")
    # row 0: range widened to [0, 3] -> scale 3/15, zp = -8; row 1: [-4, 11] -> scale 1, zp -4.
    np.testing.assert_allclose(p.scale[:, 0], [0.2, 1.0], rtol=1e-7)
    np.testing.assert_array_equal(p.zero_point[:, 0], [-8, -4])
    q, p2 = Q.quantize_weights(w, 4, granularity="per_channel")
    assert q.min() >= -8 and q.max() <= 7
    # 0.0 quantizes to the zero point and dequantizes back to exactly 0.
    z = Q.quantize_linear(np.zeros((2, 4), np.float32), p2.scale, p2.zero_point, p2.dtype)
    assert np.all(Q.dequantize_weights(z, p2) == 0.0)


def test_block_size_must_divide_k() -> None:
    with pytest.raises(ValueError, match=r"K=100.*block_size=32"):
        Q.choose_qparams(_weights(4, 100), 4, granularity="blockwise", block_size=32)
    with pytest.raises(ValueError):
        Q.choose_qparams(_weights(4, 64), 4, granularity="per_row")


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel", "blockwise"])
def test_zero_rows_do_not_produce_nan(symmetric: bool, granularity: str) -> None:
    w = _weights(4, 64)
    w[1] = 0.0
    if granularity == "per_tensor":
        w[:] = 0.0
    q, p = Q.quantize_weights(w, 4, symmetric=symmetric, granularity=granularity)
    assert np.all(np.isfinite(p.scale)) and np.all(p.scale > 0)
    dq = Q.dequantize_weights(q, p)
    assert np.all(np.isfinite(dq))
    np.testing.assert_array_equal(dq[1], 0.0)


def test_dequantize_weights_is_float32() -> None:
    q, p = Q.quantize_weights(_weights(2, 32).astype(np.float64), 8)
    assert Q.dequantize_weights(q, p).dtype == np.float32


# ---------------------------------------------------------------------------
# float16 helpers
# ---------------------------------------------------------------------------


def test_to_float16_rounds_to_nearest_even() -> None:
    # 2049 is halfway between float16 neighbours 2048 and 2050 -> even mantissa (2048);
    # 2051 is halfway between 2050 and 2052 -> 2052.
    out = Q.to_float16(np.array([2049.0, 2051.0, 1e6, 1.0 / 3.0]))
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out[:3].astype(np.float64), [2048.0, 2052.0, np.inf])
    assert out[3] == np.float16(0.333251953125)


def test_float16_bits_u32() -> None:
    w = Q.float16_bits_u32([1.0, -2.0, 0.5])
    assert w.dtype == np.uint32
    # 1.0 = 0x3C00 (low half), -2.0 = 0xC000 (high half); 0.5 = 0x3800 padded with +0.0.
    np.testing.assert_array_equal(w, [0xC0003C00, 0x00003800])
    assert Q.float16_bits_u32([]).size == 0


# ---------------------------------------------------------------------------
# error metrics
# ---------------------------------------------------------------------------


def test_metrics_identical() -> None:
    ref = np.array([1.0, -2.0, 3.0])
    m = Q.error_metrics(ref.copy(), ref)
    assert set(m) == {"rel_error", "max_abs_error", "snr_db", "cosine"}
    assert m["rel_error"] == 0.0 and m["max_abs_error"] == 0.0
    assert m["snr_db"] == math.inf
    assert m["cosine"] == pytest.approx(1.0, abs=1e-15)


def test_metrics_known_values() -> None:
    ref = np.array([3.0, 4.0], np.float32)  # ||ref|| = 5
    out = ref * np.float32(1.1)  # error = 0.1 * ref
    assert Q.rel_rms_error(out, ref) == pytest.approx(0.1, rel=1e-6)
    assert Q.max_abs_error(out, ref) == pytest.approx(0.4, rel=1e-6)
    assert Q.snr_db(out, ref) == pytest.approx(20.0, rel=1e-5)
    assert Q.cosine_similarity(out, ref) == pytest.approx(1.0, abs=1e-7)
    assert Q.cosine_similarity(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(0.0)
    assert Q.cosine_similarity(-ref, ref) == pytest.approx(-1.0)
    out2 = np.array([3.0, 5.0])  # error vector [0, 1]
    assert Q.rel_rms_error(out2, ref) == pytest.approx(0.2)
    assert Q.snr_db(out2, ref) == pytest.approx(20 * math.log10(5.0))


def test_metrics_float16_computed_in_float64() -> None:
    ref = np.full(4096, 1.0, np.float16)
    out = np.full(4096, 1.0009765625, np.float16)  # 1 + 2**-10, one float16 ULP
    assert Q.rel_rms_error(out, ref) == pytest.approx(2**-10)  # float16 sums would overflow


def test_metrics_shape_mismatch_raises() -> None:
    with pytest.raises(ValueError, match="shape"):
        Q.error_metrics(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError):
        Q.rel_rms_error(np.zeros((2, 2)), np.zeros(4))


def test_metrics_nan_output_gives_nan() -> None:
    ref = np.array([1.0, 2.0, 3.0])
    out = np.array([1.0, np.nan, 3.0])
    m = Q.error_metrics(out, ref)
    assert all(math.isnan(v) for v in m.values()), m


def test_metrics_zero_reference() -> None:
    z = np.zeros(3)
    assert Q.rel_rms_error(z, z) == 0.0 and Q.snr_db(z, z) == math.inf
    assert Q.rel_rms_error(np.ones(3), z) == math.inf

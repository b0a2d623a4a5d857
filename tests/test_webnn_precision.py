"""choose_weight_plan: which WebNN data types a run uses for a requested bit width, per precision
mode, given what MLContext.opSupportLimits() lists. Pure Python; no browser."""

from __future__ import annotations

import copy

import pytest

from fixed_web_platform.precision.webnn_precision import (
    SPEC_GUARANTEED_TYPES,
    WeightPlan,
    choose_weight_plan,
    listed,
)
from fixed_web_platform.vocabulary import SUPPORTED_BITS, PrecisionMode

STANDARD = PrecisionMode.STANDARD
EXPERIMENTAL = PrecisionMode.EXPERIMENTAL
BOTH_MODES = pytest.mark.parametrize("mode", [STANDARD, EXPERIMENTAL], ids=["standard", "experimental"])

# Shaped like Chromium's opSupportLimits() on a CPU (TFLite/XNNPACK) context: dequantizeLinear
# takes int4 as well as the spec-guaranteed 8-bit types; matmul takes float32 and float16.
CHROMIUM_LIMITS = {
    "preferredInputLayout": "nhwc",
    "maxTensorByteLength": 2147483647,
    "input": {"dataTypes": ["float32", "float16", "int32", "uint32", "int64", "int8", "uint8", "int4", "uint4"],
              "rankRange": {"min": 0, "max": 8}},
    "constant": {"dataTypes": ["float32", "float16", "int32", "uint32", "int64", "int8", "uint8", "int4", "uint4"],
                 "rankRange": {"min": 0, "max": 8}},
    "output": {"dataTypes": ["float32", "float16", "int32", "int64", "int8", "uint8"]},
    "matmul": {
        "a": {"dataTypes": ["float32", "float16"], "rankRange": {"min": 2, "max": 8}},
        "b": {"dataTypes": ["float32", "float16"], "rankRange": {"min": 2, "max": 8}},
        "output": {"dataTypes": ["float32", "float16"]},
    },
    "dequantizeLinear": {
        "input": {"dataTypes": ["int32", "int8", "uint8", "int4"]},
        "scale": {"dataTypes": ["float32", "float16"]},
        "zeroPoint": {"dataTypes": ["int32", "int8", "uint8", "int4"]},
        "output": {"dataTypes": ["float32", "float16"]},
    },
    "quantizeLinear": {
        "input": {"dataTypes": ["float32", "float16"]},
        "scale": {"dataTypes": ["float32", "float16"]},
        "zeroPoint": {"dataTypes": ["int32", "int8", "uint8", "int4"]},
        "output": {"dataTypes": ["int32", "int8", "uint8", "int4"]},
    },
}


def limits_with(**changes: list[str]) -> dict:
    """A copy of the Chromium fixture with some data type lists replaced. Keys are
    'op' or 'op__operand', e.g. matmul__a=["float32"], constant=["float32"]."""
    limits = copy.deepcopy(CHROMIUM_LIMITS)
    for key, types in changes.items():
        op, _, operand = key.partition("__")
        entry = limits.setdefault(op, {})
        if operand:
            entry = entry.setdefault(operand, {})
        entry["dataTypes"] = list(types)
    return limits


def deq(*types: str) -> dict:
    """Chromium limits whose dequantizeLinear input and zeroPoint list exactly `types`."""
    return limits_with(dequantizeLinear__input=list(types), dequantizeLinear__zeroPoint=list(types))


NO_INT8_NO_UINT8 = deq("int32", "int4")
ONLY_UINT8 = deq("int32", "uint8")
ONLY_UINT4 = deq("int32", "int8", "uint8", "uint4")
NO_4BIT = deq("int32", "int8", "uint8")
NO_FLOAT16 = limits_with(input=["float32", "int32", "int8", "uint8"], constant=["float32", "int32", "int8", "uint8"],
                         matmul__a=["float32"], matmul__b=["float32"])

LIMIT_VARIANTS = {
    "chromium": CHROMIUM_LIMITS,
    "no-int8-uint8": NO_INT8_NO_UINT8,
    "only-uint8": ONLY_UINT8,
    "only-uint4": ONLY_UINT4,
    "no-4bit": NO_4BIT,
    "no-float16": NO_FLOAT16,
    "empty": {},
}


def test_fixture_helpers_do_not_mutate_the_chromium_fixture() -> None:
    deq("uint8")
    limits_with(matmul__a=["float32"])
    assert CHROMIUM_LIMITS["dequantizeLinear"]["input"]["dataTypes"] == ["int32", "int8", "uint8", "int4"]
    assert CHROMIUM_LIMITS["matmul"]["a"]["dataTypes"] == ["float32", "float16"]


# ---------------------------------------------------------------------------
# listed()
# ---------------------------------------------------------------------------


def test_listed_reads_op_level_and_operand_level_types() -> None:
    assert listed(CHROMIUM_LIMITS, "dequantizeLinear", "input") == {"int32", "int8", "uint8", "int4"}
    assert listed(CHROMIUM_LIMITS, "matmul", "b") == {"float32", "float16"}
    assert "float16" in listed(CHROMIUM_LIMITS, "constant", "")
    assert listed(CHROMIUM_LIMITS, "conv2d", "input") == set()
    assert listed(CHROMIUM_LIMITS, "matmul", "c") == set()


def test_listed_ignores_non_string_entries() -> None:
    limits = {"matmul": {"a": {"dataTypes": ["float16", 16, None, {"x": 1}]}}}
    assert listed(limits, "matmul", "a") == {"float16"}


# ---------------------------------------------------------------------------
# 32 and 16 bits
# ---------------------------------------------------------------------------


@BOTH_MODES
@pytest.mark.parametrize("limits", list(LIMIT_VARIANTS.values()), ids=list(LIMIT_VARIANTS))
def test_32_bit_is_float32(mode: PrecisionMode, limits: dict) -> None:
    plan = choose_weight_plan(32, mode, limits)
    assert (plan.bits_requested, plan.bits_executed, plan.weight_dtype, plan.matmul_dtype) == (32, 32, "float32",
                                                                                              "float32")
    assert not (plan.unsupported or plan.asks_unlisted or plan.unsigned)


@BOTH_MODES
def test_16_bit_uses_float16_matmul_when_listed_for_both_operands(mode: PrecisionMode) -> None:
    plan = choose_weight_plan(16, mode, CHROMIUM_LIMITS)
    assert (plan.bits_requested, plan.bits_executed) == (16, 16)
    assert plan.weight_dtype == "float16"
    assert plan.matmul_dtype == "float16"
    assert not plan.unsupported
    assert plan.note == ""


@BOTH_MODES
@pytest.mark.parametrize(
    "limits",
    [limits_with(matmul__a=["float32"]), limits_with(matmul__b=["float32"]),
     limits_with(matmul__a=["float32"], matmul__b=["float32"])],
    ids=["a-lacks-f16", "b-lacks-f16", "both-lack-f16"],
)
def test_16_bit_casts_to_float32_matmul_when_matmul_lacks_float16(mode: PrecisionMode, limits: dict) -> None:
    plan = choose_weight_plan(16, mode, limits)
    assert plan.weight_dtype == "float16"
    assert plan.matmul_dtype == "float32"
    assert plan.bits_executed == 16
    assert not plan.unsupported
    assert "cast" in plan.note
    assert "float32" in plan.note


def test_16_bit_standard_without_float16_constants_is_unsupported() -> None:
    plan = choose_weight_plan(16, STANDARD, NO_FLOAT16)
    assert plan.unsupported
    assert "float16" in plan.unsupported


def test_16_bit_standard_needs_float16_constants_not_just_inputs() -> None:
    """The weights are constants: float16 listed only for graph inputs does not make them legal."""
    limits = limits_with(constant=["float32"])
    plan = choose_weight_plan(16, STANDARD, limits)
    assert "float16 constants" in plan.unsupported


def test_16_bit_experimental_without_float16_constants_still_asks_for_float16() -> None:
    plan = choose_weight_plan(16, EXPERIMENTAL, NO_FLOAT16)
    assert not plan.unsupported
    assert plan.weight_dtype == "float16"
    assert plan.bits_executed == 16
    assert plan.matmul_dtype == "float32"


def test_16_bit_experimental_without_float16_marks_asks_unlisted() -> None:
    plan = choose_weight_plan(16, EXPERIMENTAL, NO_FLOAT16)
    assert plan.asks_unlisted


# ---------------------------------------------------------------------------
# 8 bits
# ---------------------------------------------------------------------------


@BOTH_MODES
def test_8_bit_prefers_int8(mode: PrecisionMode) -> None:
    plan = choose_weight_plan(8, mode, CHROMIUM_LIMITS)
    assert (plan.bits_requested, plan.bits_executed) == (8, 8)
    held = (plan.weight_dtype, plan.zero_point_dtype, plan.scale_dtype, plan.matmul_dtype)
    assert held == ("int8", "int8", "float32", "float32")
    assert not (plan.unsigned or plan.asks_unlisted or plan.unsupported)


@BOTH_MODES
def test_8_bit_uses_uint8_when_only_uint8_listed(mode: PrecisionMode) -> None:
    plan = choose_weight_plan(8, mode, ONLY_UINT8)
    assert plan.weight_dtype == "uint8"
    assert plan.zero_point_dtype == "uint8"
    assert plan.unsigned is True
    assert plan.bits_executed == 8
    assert not plan.asks_unlisted
    assert not plan.unsupported


@BOTH_MODES
def test_8_bit_needs_the_type_for_both_input_and_zero_point(mode: PrecisionMode) -> None:
    # int8 only for the input, uint8 only for the zero point: neither type works for both.
    limits = limits_with(dequantizeLinear__input=["int8"], dequantizeLinear__zeroPoint=["uint8"])
    plan = choose_weight_plan(8, mode, limits)
    if mode is STANDARD:
        assert plan.unsupported
    else:
        assert plan.asks_unlisted and plan.weight_dtype == "int8"


def test_8_bit_standard_without_int8_or_uint8_is_unsupported_and_names_them() -> None:
    plan = choose_weight_plan(8, STANDARD, NO_INT8_NO_UINT8)
    assert plan.unsupported
    assert "int8" in plan.unsupported
    assert "uint8" in plan.unsupported
    assert not plan.asks_unlisted


def test_8_bit_experimental_without_int8_or_uint8_asks_for_int8() -> None:
    plan = choose_weight_plan(8, EXPERIMENTAL, NO_INT8_NO_UINT8)
    assert plan.asks_unlisted is True
    assert plan.weight_dtype == "int8"
    assert plan.bits_executed == 8
    assert not plan.unsupported
    assert "int8" in plan.note


# ---------------------------------------------------------------------------
# 4 and 2 bits, standard mode: run as 8-bit and say so
# ---------------------------------------------------------------------------


FOUR_BIT_NOTE = ("int4", "spec-guaranteed")


@pytest.mark.parametrize(("bits", "limits", "words"), [
    (4, CHROMIUM_LIMITS, FOUR_BIT_NOTE), (4, NO_4BIT, FOUR_BIT_NOTE), (4, ONLY_UINT4, FOUR_BIT_NOTE),
    (2, CHROMIUM_LIMITS, ("2-bit",))], ids=["4-chromium", "4-no-4bit", "4-only-uint4", "2-chromium"])
def test_standard_low_bits_run_as_int8_with_note(bits: int, limits: dict, words: tuple[str, ...]) -> None:
    plan = choose_weight_plan(bits, STANDARD, limits)
    assert (plan.bits_requested, plan.bits_executed, plan.weight_dtype) == (bits, 8, "int8")
    assert plan.asks_unlisted is False
    assert not plan.unsupported
    assert all(word in plan.note for word in words), plan.note


@pytest.mark.parametrize("bits", [4, 2])
def test_standard_low_bits_use_uint8_when_only_uint8_listed(bits: int) -> None:
    plan = choose_weight_plan(bits, STANDARD, ONLY_UINT8)
    assert plan.weight_dtype == "uint8"
    assert plan.unsigned
    assert plan.bits_executed == 8
    assert plan.note


@pytest.mark.parametrize("bits", [4, 2])
def test_standard_low_bits_without_8_bit_types_are_unsupported(bits: int) -> None:
    plan = choose_weight_plan(bits, STANDARD, NO_INT8_NO_UINT8)
    assert plan.unsupported
    assert not plan.asks_unlisted


@pytest.mark.parametrize("bits", SUPPORTED_BITS)
@pytest.mark.parametrize("limits", list(LIMIT_VARIANTS.values()), ids=list(LIMIT_VARIANTS))
def test_standard_mode_only_uses_spec_guaranteed_types(bits: int, limits: dict) -> None:
    plan = choose_weight_plan(bits, STANDARD, limits)
    assert plan.weight_dtype in SPEC_GUARANTEED_TYPES
    assert plan.matmul_dtype in SPEC_GUARANTEED_TYPES
    assert not plan.asks_unlisted


# ---------------------------------------------------------------------------
# 4 and 2 bits, experimental mode: never upgraded
# ---------------------------------------------------------------------------


def test_experimental_4_bit_uses_int4_when_listed() -> None:
    plan = choose_weight_plan(4, EXPERIMENTAL, CHROMIUM_LIMITS)
    assert plan.weight_dtype == "int4"
    assert plan.zero_point_dtype == "int4"
    assert (plan.bits_requested, plan.bits_executed) == (4, 4)
    assert plan.asks_unlisted is False
    assert not plan.unsupported
    assert not plan.unsigned


def test_experimental_4_bit_uses_uint4_when_only_uint4_listed() -> None:
    plan = choose_weight_plan(4, EXPERIMENTAL, ONLY_UINT4)
    assert plan.weight_dtype == "uint4"
    assert plan.zero_point_dtype == "uint4"
    assert plan.unsigned is True
    assert plan.bits_executed == 4
    assert plan.asks_unlisted is False


def test_experimental_4_bit_neither_listed_asks_for_int4_anyway() -> None:
    plan = choose_weight_plan(4, EXPERIMENTAL, NO_4BIT)
    assert plan.weight_dtype == "int4"
    assert plan.bits_executed == 4
    assert plan.asks_unlisted is True
    assert not plan.unsupported
    assert "anyway" in plan.note
    assert "int4" in plan.note


@pytest.mark.parametrize("limits", list(LIMIT_VARIANTS.values()), ids=list(LIMIT_VARIANTS))
def test_experimental_2_bit_asks_for_int2(limits: dict) -> None:
    plan = choose_weight_plan(2, EXPERIMENTAL, limits)
    assert plan.weight_dtype == "int2"
    assert plan.zero_point_dtype == "int2"
    assert plan.bits_requested == 2
    assert plan.bits_executed == 2
    assert plan.asks_unlisted is True
    assert not plan.unsupported
    assert plan.note


@pytest.mark.parametrize("bits", SUPPORTED_BITS)
@pytest.mark.parametrize("limits", list(LIMIT_VARIANTS.values()), ids=list(LIMIT_VARIANTS))
def test_experimental_never_falls_back_silently(bits: int, limits: dict) -> None:
    plan = choose_weight_plan(bits, EXPERIMENTAL, limits)
    assert plan.bits_requested == bits
    assert plan.bits_executed == bits
    assert not plan.unsupported
    if bits in (8, 4, 2):
        # the weight type is exactly the requested width
        assert plan.weight_dtype.endswith(f"int{bits}")


# ---------------------------------------------------------------------------
# Malformed limits
# ---------------------------------------------------------------------------

MALFORMED = {
    "empty-dict": {},
    "none": None,
    "not-a-dict": ["int8", "int4"],
    "op-none": {"dequantizeLinear": None, "matmul": None, "constant": None, "input": None},
    "operand-none": {"dequantizeLinear": {"input": None, "zeroPoint": None},
                     "matmul": {"a": None, "b": None}},
    "op-is-list": {"dequantizeLinear": ["int8", "int4"], "matmul": ["float16"]},
    "operand-is-list": {"dequantizeLinear": {"input": ["int8"], "zeroPoint": ["int8"]}},
    "datatypes-is-string": {"dequantizeLinear": {"input": {"dataTypes": "int8"},
                                                 "zeroPoint": {"dataTypes": "int8"}}},
    "datatypes-missing": {"dequantizeLinear": {"input": {}, "zeroPoint": {"rankRange": {}}}},
    "datatypes-of-non-strings": {"dequantizeLinear": {"input": {"dataTypes": [8, 4, None]},
                                                      "zeroPoint": {"dataTypes": [8, 4, None]}}},
}

# Present but null/non-list dataTypes: must count as "nothing listed", not raise.
CRASHING = {
    "datatypes-none": {"dequantizeLinear": {"input": {"dataTypes": None}, "zeroPoint": {"dataTypes": None}}},
    "datatypes-is-int": {"dequantizeLinear": {"input": {"dataTypes": 8}, "zeroPoint": {"dataTypes": 4}}},
}


def _check_integer_plans_on_malformed(limits: object) -> None:
    for bits in (8, 4, 2):
        standard = choose_weight_plan(bits, STANDARD, limits)  # type: ignore[arg-type]
        assert standard.unsupported, (bits, standard)
        assert not standard.asks_unlisted
        experimental = choose_weight_plan(bits, EXPERIMENTAL, limits)  # type: ignore[arg-type]
        assert experimental.asks_unlisted, (bits, experimental)
        assert not experimental.unsupported
        assert experimental.bits_executed == bits
    assert choose_weight_plan(32, STANDARD, limits).weight_dtype == "float32"  # type: ignore[arg-type]
    assert choose_weight_plan(16, STANDARD, limits).unsupported  # type: ignore[arg-type]
    assert not choose_weight_plan(16, EXPERIMENTAL, limits).unsupported  # type: ignore[arg-type]


LISTS_NOTHING = {k: v for k, v in MALFORMED.items() if k != "datatypes-is-string"}


@pytest.mark.parametrize("limits", list(LISTS_NOTHING.values()), ids=list(LISTS_NOTHING))
def test_malformed_limits_list_nothing(limits: object) -> None:
    for op, operand in (("dequantizeLinear", "input"), ("dequantizeLinear", "zeroPoint"),
                        ("matmul", "a"), ("constant", "")):
        assert listed(limits, op, operand) == set()  # type: ignore[arg-type]


@pytest.mark.parametrize("limits", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_limits_make_integer_plans_unsupported_or_asked_anyway(limits: object) -> None:
    _check_integer_plans_on_malformed(limits)


def test_listed_treats_string_data_types_as_nothing_listed() -> None:
    assert listed(MALFORMED["datatypes-is-string"], "dequantizeLinear", "input") == set()


@pytest.mark.parametrize("limits", list(CRASHING.values()), ids=list(CRASHING))
def test_listed_tolerates_null_or_scalar_data_types(limits: object) -> None:
    assert listed(limits, "dequantizeLinear", "input") == set()  # type: ignore[arg-type]


@pytest.mark.parametrize("limits", list(CRASHING.values()), ids=list(CRASHING))
def test_choose_weight_plan_tolerates_null_or_scalar_data_types(limits: object) -> None:
    _check_integer_plans_on_malformed(limits)


def test_dict_shaped_data_types_are_not_treated_as_a_list() -> None:
    limits = {"dequantizeLinear": {"input": {"dataTypes": {"int8": True}}, "zeroPoint": {"dataTypes": {"int8": True}}}}
    _check_integer_plans_on_malformed(limits)


# ---------------------------------------------------------------------------
# Bad bits and plan shape
# ---------------------------------------------------------------------------


@BOTH_MODES
@pytest.mark.parametrize("bits", [3, 0, 1, 64, -8])
def test_unsupported_bits_raise_value_error(mode: PrecisionMode, bits: int) -> None:
    with pytest.raises(ValueError, match=str(bits)):
        choose_weight_plan(bits, mode, CHROMIUM_LIMITS)


def test_plan_is_frozen() -> None:
    plan = choose_weight_plan(8, STANDARD, CHROMIUM_LIMITS)
    assert isinstance(plan, WeightPlan)
    with pytest.raises(AttributeError):
        plan.weight_dtype = "int4"  # type: ignore[misc]

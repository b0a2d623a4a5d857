"""Which WebNN data types a run uses, given the requested bits, the precision mode and what the
context's opSupportLimits() lists. Decided in Python so the rule is testable and the page obeys.

Standard mode is production-safe: only types the WebNN spec guarantees (int8, uint8, float16,
float32) are used, so a 4- or 2-bit request runs as 8-bit and the row says so. Experimental mode
never upgrades: it asks for the requested type even when the context does not list it, so the
browser answers for itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..vocabulary import PrecisionMode
from .held import FLOAT_ZERO
from .quant import dtype_bits

SPEC_GUARANTEED_TYPES = ("int8", "uint8", "float16", "float32")
OPERAND_BITS = {"float32": 32, "float16": 16, "int8": 8, "uint8": 8, "int4": 4, "uint4": 4,
                "int2": 2, "uint2": 2}
"""Bits per element of a WebNN operand data type: how a graph's weight operand says what ran."""


@dataclass(frozen=True)
class WeightPlan:
    bits_requested: int
    bits_executed: int
    weight_dtype: str
    scale_dtype: str
    zero_point_dtype: str
    matmul_dtype: str
    note: str = ""
    """Why the plan differs from the literal request (an upgrade, a cast); goes to the row's reason."""
    asks_unlisted: bool = False
    """True when the plan asks for a type the context does not list: a browser error is then an
    'unsupported' outcome (the browser's answer), not a 'failed' one."""
    unsupported: str = ""
    """Non-empty when the run cannot be attempted at all in this mode; the reason."""

    @property
    def unsigned(self) -> bool:
        return self.weight_dtype.startswith("uint")


def data_types(limits: dict[str, Any], op: str, operand: str) -> list[str]:
    """Data types opSupportLimits() lists for one operand of one op, in the browser's order
    (empty when absent or malformed: the limits come from the page and are not trusted)."""
    entry = limits.get(op, {}) if isinstance(limits, dict) else {}
    if operand:
        entry = entry.get(operand, {}) if isinstance(entry, dict) else {}
    types = entry.get("dataTypes") if isinstance(entry, dict) else None
    return [t for t in types if isinstance(t, str)] if isinstance(types, list) else []


def listed(limits: dict[str, Any], op: str, operand: str) -> set[str]:
    return set(data_types(limits, op, operand))


def _integer_plan(bits_requested: int, dtype_choices: tuple[str, ...], limits: dict[str, Any],
                  note: str, asks_unlisted_ok: bool) -> WeightPlan:
    deq_input = listed(limits, "dequantizeLinear", "input")
    deq_zp = listed(limits, "dequantizeLinear", "zeroPoint")
    bits = dtype_bits(dtype_choices[0])
    for dtype in dtype_choices:
        if dtype in deq_input and dtype in deq_zp:
            return WeightPlan(bits_requested, bits, dtype, "float32", dtype, "float32", note)
    if asks_unlisted_ok:
        dtype = dtype_choices[0]
        unlisted = f"this context's dequantizeLinear does not list {' or '.join(dtype_choices)}; asked for {dtype} anyway"
        return WeightPlan(bits_requested, bits, dtype, "float32", dtype, "float32",
                          f"{note}; {unlisted}" if note else unlisted, asks_unlisted=True)
    return WeightPlan(bits_requested, bits, dtype_choices[0], "float32", dtype_choices[0], "float32", note,
                      unsupported=f"this context's dequantizeLinear lists neither {' nor '.join(dtype_choices)} "
                                  f"(input: {sorted(deq_input)})")


def choose_weight_plan(bits: int, mode: PrecisionMode, limits: dict[str, Any]) -> WeightPlan:
    if bits == 32:
        return WeightPlan(32, 32, "float32", "", "", "float32")
    if bits == 16:
        f16_matmul = "float16" in listed(limits, "matmul", "a") and "float16" in listed(limits, "matmul", "b")
        matmul_dtype = "float16" if f16_matmul else "float32"
        note = "" if f16_matmul else "matmul does not list float16; float16 weights cast to float32"
        if "float16" not in listed(limits, "constant", ""):
            if mode is PrecisionMode.STANDARD:
                return WeightPlan(16, 16, "float16", "", "", matmul_dtype,
                                  unsupported="this context lists no float16 constants")
            unlisted = "this context lists no float16 constants; asked for float16 anyway"
            return WeightPlan(16, 16, "float16", "", "", matmul_dtype,
                              f"{note}; {unlisted}" if note else unlisted, asks_unlisted=True)
        return WeightPlan(16, 16, "float16", "", "", matmul_dtype, note)
    if bits == 8:
        return _integer_plan(8, ("int8", "uint8"), limits, "", mode is PrecisionMode.EXPERIMENTAL)
    if bits in (4, 2):
        requested = f"int{bits}"
        if mode is PrecisionMode.STANDARD:
            why = ("int4 is not a spec-guaranteed WebNN type" if bits == 4
                   else "WebNN has no 2-bit type")
            plan = _integer_plan(bits, ("int8", "uint8"), limits,
                                 f"{why}; standard precision mode ran it as 8-bit", False)
            return plan
        if bits == 4:
            return _integer_plan(4, ("int4", "uint4"), limits, "", True)
        return WeightPlan(2, 2, requested, "float32", requested, "float32",
                          "WebNN defines no 2-bit type; asked for int2, the closest form",
                          asks_unlisted=True)
    raise ValueError(f"bits {bits} is not supported")


def holding_zeros(plan: WeightPlan, held_zero_dtype: str) -> WeightPlan:
    """``plan`` for a layer whose bytes hold zero points of ``held_zero_dtype`` (precision/held.py):
    the plan's integer type, or FLOAT_ZERO where the layer's quantizer keeps a float offset per
    block (dequantizeLinear's zero point has the codes' integer type: the graph dequantizes with a
    zero of 0 and subtracts zero x scale per block)."""
    return dataclasses.replace(plan, zero_point_dtype=FLOAT_ZERO) if held_zero_dtype == FLOAT_ZERO else plan


@dataclass(frozen=True)
class ActivationPlan:
    """How int8 activations are written in a WebNN graph: quantizeLinear -> dequantizeLinear
    around a layer's input (the form WebNN backends fuse into integer kernels), in ``dtype``."""

    dtype: str
    zero_point_offset: int
    """Added to the signed zero point: 128 for uint8 (q + 128, the same values), 0 for int8."""
    note: str = ""
    asks_unlisted: bool = False
    unsupported: str = ""


ACTIVATION_OPERANDS = (("quantizeLinear", "output"), ("quantizeLinear", "zeroPoint"),
                       ("dequantizeLinear", "input"), ("dequantizeLinear", "zeroPoint"))


def choose_activation_plan(mode: PrecisionMode, limits: dict[str, Any]) -> ActivationPlan:
    """int8 if the context lists it for every operand of the pair, else uint8; neither: standard
    mode refuses, experimental mode asks for int8 and the browser answers."""
    for dtype, offset in (("int8", 0), ("uint8", 128)):
        if all(dtype in listed(limits, op, operand) for op, operand in ACTIVATION_OPERANDS):
            return ActivationPlan(dtype, offset)
    lists = sorted(listed(limits, "quantizeLinear", "output"))
    if mode is PrecisionMode.EXPERIMENTAL:
        return ActivationPlan("int8", 0, f"this context's quantizeLinear/dequantizeLinear do not list int8 "
                                         f"or uint8 for every operand (quantizeLinear output: {lists}); asked "
                                         "for int8 anyway", asks_unlisted=True)
    return ActivationPlan("int8", 0, unsupported="this context's quantizeLinear/dequantizeLinear list neither "
                                                 f"int8 nor uint8 for every operand (quantizeLinear output: {lists})")

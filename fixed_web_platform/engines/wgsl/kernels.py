"""The harness's own WGSL matmul kernels: packed 2/4/8-bit, float16 and float32; what the
matmul kind (matmul.py) and every model kind's linear layers (encoder.py) run.

Python composes each kernel from shaders/prelude.wgsl and the kernel's own file, fills in the
tile sizes it chose from the shape (``tiling_for``: rows and columns per invocation; the same for
every precision, so rows compare precisions on one algorithm), unrolls the tile, and tells the
page the dispatch size; the page picks the first variant whose features its adapter has. The row
records the kernel and its tile (``kernel_variant``). Three paths for packed weights, chosen
from the tile and M (``variants_for``): GEMV tiles mask fields in place
(matmul_quant_gemv.wgsl); a single row tile decodes words in the kernel (matmul_quant.wgsl);
M spanning several row tiles dequantizes once into a float32 scratch buffer (dequantize.wgsl,
dispatched first in the same pass) and runs the float32 kernel on it. What ran is read from the shader the page
used and the size of the weight buffer it bound, never from the page's word about its arithmetic.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...paths import SHADERS_DIR
from ...precision.held import FLOAT_ZERO

PRELUDE = "prelude.wgsl"
WORKGROUP_X = 64
MAX_TILE_M = 16
"""Most rows one invocation computes (GEMM): each decoded weight vec4 meets that many rows."""
TILE_N = 4
"""Columns one invocation computes: each activation vec4 meets that many columns."""
MIN_WORKGROUPS = 8
"""Fewer workgroups than this leave a CPU adapter's threads idle: the workgroup shrinks first."""
OUTPUT_BINDING = "out"
DEQUANTIZE = "dequantize.wgsl"
"""The GEMM path's first step: packed weights to float32, once per matmul (one invocation per block)."""
DEQUANTIZED = "wf"
"""The scratch buffer DEQUANTIZE writes W[N, K] into as float32, and the float32 kernel reads."""
DEQUANTIZE_WORKGROUP = 64
MAX_GROUPS_X = 65535
"""WebGPU's default maxComputeWorkgroupsPerDimension: wider dispatches fold into a second dimension."""
ZERO_FORMS = ("packed", "float")
"""How a packed-weight kernel reads block zero points (``zero_point(p)``, in the file
shaders/zero_point_<form>.wgsl appended to it): packed integers like the weights (the minmax
quantizer), or a float32 per block (the quantizers that keep a float offset: offset, hqq)."""
def zero_form(zero_point_dtypes: Iterable[str]) -> str | None:
    """How the kernels read the zero points of weights held with these zero-point dtypes (one per
    layer; '' for float layers): 'float' when the quantized ones are float32, 'packed' when they are
    integers, None for a mix (a model's kernels of one bits read one form)."""
    forms = {"float" if d == FLOAT_ZERO else "packed" for d in zero_point_dtypes if d}
    return None if len(forms) > 1 else next(iter(forms), "packed")


ZERO_BINDING = {"matmul_quant.wgsl": 4, "matmul_quant_gemv.wgsl": 4, DEQUANTIZE: 2}
"""Where each packed-weight kernel binds its zero points (after the weights and scales)."""
ACT_QUANT_BINDING = 6
"""Where the DP4A kernel (matmul_dp4a.wgsl) binds its input's int8 scale and zero point
(``act_quant_bytes``): a buffer, not override constants, so layers of one shape share one
pipeline whatever their calibration. After the weights (2-4) and the model prelude's bias (5)."""


@dataclass(frozen=True)
class Tiling:
    """What one invocation computes: TILE_M rows x TILE_N columns; WORKGROUP_X invocations along N.
    Written into the kernel source (``const``s, and the kernel's row/column lines unrolled by
    Python), not pipeline-overridable: WGSL sizes function-scope arrays only with const-expressions,
    and on software adapters (SwiftShader) loops over the tile and arrays indexed in them cost
    more than the arithmetic, so the tile is unrolled into scalars."""

    tile_m: int
    tile_n: int = 1
    workgroup_x: int = WORKGROUP_X

    def workgroups(self, m: int, n: int) -> list[int]:
        return [-(-n // (self.tile_n * self.workgroup_x)), -(-m // self.tile_m)]

    @property
    def label(self) -> str:
        return f"tile {self.tile_m}x{self.tile_n}"

    def to_json(self) -> dict[str, int]:
        return {"tile_m": self.tile_m, "tile_n": self.tile_n, "workgroup_x": self.workgroup_x}


def tiling_for(m: int, n: int) -> Tiling:
    """The tile for an M x N output, whatever the precision. Rows: GEMV (M up to MAX_TILE_M) has
    one invocation hold every row, so each weight is read and decoded once; GEMM splits M into
    equal tiles of at most MAX_TILE_M rows (128 -> 16, 17 -> 9), so no tile is mostly padding.
    Columns: TILE_N (fewer when N is smaller). The workgroup halves (down to 16) while the
    dispatch has fewer than MIN_WORKGROUPS workgroups."""
    tiles = -(-m // MAX_TILE_M)
    tiling = Tiling(-(-m // tiles), min(TILE_N, n))
    while tiling.workgroup_x > 16 and math.prod(tiling.workgroups(m, n)) < MIN_WORKGROUPS:
        tiling = Tiling(tiling.tile_m, tiling.tile_n, tiling.workgroup_x // 2)
    return tiling


@dataclass(frozen=True)
class KernelVariant:
    """A shader the page may use; the first whose required features the adapter has wins."""

    shader: str
    compute_dtype: str
    requires: tuple[str, ...] = ()
    family: str = ""
    """The kernel's name in ``kernel_variant`` (with the tile): f32, f16, f16-unpack, quant-w4,
    dp4a-w8a8."""
    x_element: str = "vec4<f32>"
    """How the kernel reads x: float32 vec4s, or u32 words of four int8 (int8 activations)."""
    prologue: str = ""
    """A step the page dispatches first, in the same compute pass (DEQUANTIZE: the packed weights
    decoded into the DEQUANTIZED buffer, which the kernel then reads in their place)."""
    zero: str = ""
    """How the packed-weight kernel (or its prologue) reads zero points (ZERO_FORMS); '' for the
    kernels of float weights and the DP4A kernel (integer zero points of its own)."""

    @property
    def body_zero(self) -> str:
        """The zero points' form the kernel's own body reads: '' when its prologue reads them."""
        return "" if self.prologue else self.zero

    @property
    def id(self) -> str:
        """How the job and the page's reply name the variant: its prologue and its kernel."""
        return f"{self.prologue}>{self.shader}" if self.prologue else self.shader

    def kernel_variant(self, tiling: Tiling) -> str:
        return f"{self.family} {tiling.label}"


WGSL_FEATURE = "wgsl:"
"""A ``requires`` entry with this prefix is a WGSL language feature (navigator.gpu.
wgslLanguageFeatures), not an adapter feature."""
DP4A = WGSL_FEATURE + "packed_4x8_integer_dot_product"


def gemv_tile(tiling: Tiling | None) -> bool:
    """Fewer rows than columns per invocation: the packed kernels mask fields in place and scale
    the activations (shaders/matmul_quant_gemv.wgsl) instead of shifting every weight field
    (matmul_quant.wgsl), which pays off once each decoded weight meets more rows than columns."""
    return tiling is not None and tiling.tile_m < tiling.tile_n


def dequantize_once(tiling: Tiling | None, m: int) -> bool:
    """M spans more than one row tile: a kernel that decodes the packed weights itself would decode
    each of them once per row tile (8 times at M = 128). Decoding them once into float32 and
    running the float32 kernel costs one pass over the weights instead (measured in
    benchmarks/kernels.py on Chrome at M = 128: 1.15-1.59x of float32 fused, 1.00-1.06x this way)."""
    return tiling is not None and m > tiling.tile_m


def variants_for(bits: int, act_bits: int = 32, tiling: Tiling | None = None,
                 m: int = 0, zero: str = "packed") -> tuple[KernelVariant, ...]:
    """The kernels that may run ``bits`` weights with ``act_bits`` activations on ``tiling`` for
    ``m`` rows, best first (the page runs the first whose features the adapter has); ``zero``:
    how packed weights' zero points are held (ZERO_FORMS)."""
    if act_bits == 8:  # the special path: int8 x int8 dot products (W8A8, W4A8 unpacked to int8)
        return (KernelVariant("matmul_dp4a.wgsl", "i8dot", (DP4A,), family=f"dp4a-w{bits}a8",
                              x_element="u32"),)
    if bits == 32:
        return (KernelVariant("matmul_f32.wgsl", "f32", family="f32"),)
    if bits == 16:
        return (KernelVariant("matmul_f16.wgsl", "f16", ("shader-f16",), family="f16"),
                KernelVariant("matmul_f16_unpack.wgsl", "f32", family="f16-unpack"))
    if zero not in ZERO_FORMS:
        raise ValueError(f"zero points are held {' or '.join(ZERO_FORMS)}, not {zero!r}")
    fz = "-zf32" if zero == "float" else ""  # the kernel_variant names float zero points
    if gemv_tile(tiling):
        return (KernelVariant("matmul_quant_gemv.wgsl", "f32", family=f"quant-w{bits}{fz}-gemv", zero=zero),)
    if dequantize_once(tiling, m):
        return (KernelVariant("matmul_f32.wgsl", "f32", family=f"dequant-w{bits}{fz}-f32", prologue=DEQUANTIZE,
                              zero=zero),)
    return (KernelVariant("matmul_quant.wgsl", "f32", family=f"quant-w{bits}{fz}", zero=zero),)


def act_quant_bytes(scale: float, zero_point: int) -> bytes:
    """The 8-byte buffer the int8-activation kernels (matmul_dp4a.wgsl at ACT_QUANT_BINDING,
    model/quantize_act.wgsl) read x's quantization from: the scale as a float32, then the zero
    point as an int32, little-endian. The scale is float32-representable (calibration rounds it
    once), so the kernels use the very value the float64 references quantize with."""
    return struct.pack("<fi", scale, zero_point)


def _unroll(text: str, marker: str, count: int, key: str) -> str:
    """Each line starting with ``marker`` (after its indentation) repeated ``count`` times without
    the marker, ``key`` replaced by 0 .. count-1."""
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(marker + " "):
            indent, body = line[: len(line) - len(stripped)], stripped[len(marker) + 1:]
            out += [indent + body.replace(key, str(i)) for i in range(count)]
        else:
            out.append(line)
    return "".join(out)


def zero_point_source(shader: str, zero: str) -> str:
    """The zero points' binding and ``zero_point(p)`` for a packed-weight kernel, in ``zero``'s
    form (ZERO_FORMS); '' when ``zero`` is ''."""
    if not zero:
        return ""
    text = (SHADERS_DIR / f"zero_point_{zero}.wgsl").read_text()
    return "\n" + text.replace("{ZERO_BINDING}", str(ZERO_BINDING[shader]))


def read_shader(path: Path) -> str:
    """A shader file's text with each ``//@include <file>`` line replaced by that file's text
    (a file beside it: functions several kernels share, such as gelu.wgsl)."""
    return "".join((path.parent / line.split()[1]).read_text() if line.startswith("//@include ") else line
                   for line in path.read_text().splitlines(keepends=True))


def compose(prelude_path: Path, shader: str, tiling: Tiling, bits: int,
            x_element: str = "vec4<f32>", zero: str = "") -> str:
    """A kernel body behind a prelude: the body's ``enable`` / ``requires`` directives first, then
    the prelude with the tile sizes and x's element type filled in, then the body (its
    accumulate(n0, m0)) with its ``//@groups`` lines repeated per vec4 of a packed word, its
    ``//@rows`` lines per row and its ``//@cols`` lines per column of the tile (in that order,
    so markers nest in that order), then its zero points' form (``zero_point_source``)."""
    body = (SHADERS_DIR / shader).read_text()
    lines = body.splitlines(keepends=True)
    directive = ("enable ", "requires ")
    enables = [line for line in lines if line.startswith(directive)]
    rest = "".join(line for line in lines if not line.startswith(directive))
    rest = _unroll(rest, "//@groups", 32 // bits // 4 if bits <= 8 else 0, "{g}")
    rest = _unroll(rest, "//@rows", tiling.tile_m, "{t}")
    rest = _unroll(rest, "//@cols", tiling.tile_n, "{j}")
    prelude = read_shader(prelude_path)
    for key, value in (("{TILE_M}", tiling.tile_m), ("{TILE_N}", tiling.tile_n),
                       ("{WORKGROUP_X}", tiling.workgroup_x), ("{X_ELEMENT}", x_element)):
        prelude = prelude.replace(key, str(value))
    return "".join(enables) + prelude + rest + zero_point_source(shader, zero)


@functools.cache
def shader_source(shader: str, tiling: Tiling, bits: int, x_element: str = "vec4<f32>", zero: str = "") -> str:
    """The kernel as the page compiles it: its directives, the prelude, its body, its zero points."""
    return compose(SHADERS_DIR / PRELUDE, shader, tiling, bits, x_element, zero)


@functools.cache
def dequantize_source(bits: int, zero: str = "packed") -> str:
    """The dequantize step for ``bits`` weights with ``zero``'s zero points, its per-word lines unrolled."""
    text = (SHADERS_DIR / DEQUANTIZE).read_text().replace("{WORKGROUP}", str(DEQUANTIZE_WORKGROUP))
    return _unroll(text, "//@groups", 32 // bits // 4, "{g}") + zero_point_source(DEQUANTIZE, zero)


def dequantize_dispatch(k: int, n: int, bits: int, block_size: int) -> dict[str, Any]:
    """Override constants and dispatch size of the dequantize step for a packed W[N, K]: one
    invocation per block, folded into two dimensions when one would exceed MAX_GROUPS_X."""
    groups = -(-(n * k // block_size) // DEQUANTIZE_WORKGROUP)
    wide = min(groups, MAX_GROUPS_X)
    return {"constants": {"K": k, "N": n, "BITS": bits, "BLOCK_SIZE": block_size},
            "workgroups": [wide, -(-groups // wide)]}

"""A whole model's linear layers on the harness's WGSL kernels, shared by every model kind's
runner here (encoder.py, decoder.py, speech.py): the matmul kernels' own bodies (shaders/matmul_*.wgsl, the
one place for each packed weight format) behind the model's linear prelude
(shaders/ops/linear_prelude.wgsl: bias and GELU epilogue, the bias at ``BIAS_BINDING``), the
variants the page picks from, the dequantize step the GEMM path runs first, and what the step-list
pages (decoder, speech) ran, read from their replies."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ...models.quantized import HeldModel
from ...models.rules import LayerPrecision
from ...page_protocol import LayerReply, PageDataError, PageReply
from ...paths import SHADERS_DIR
from ..base import Engine, EngineJob, Executed, LayerExecuted
from . import kernels as wgsl

OPS_SHADERS = SHADERS_DIR / "ops"
"""The kernels of the ops an architecture's graph is written in (architectures/ops.py), one per op
(lower.py's KERNELS), and the linear layers' prelude."""
LINEAR_PRELUDE = "linear_prelude.wgsl"
BIAS_BINDING = 5


def weight_dtype_for(bits: int) -> str:
    """The stored format the linear-layer variants of ``bits`` read (the page reports it per layer)."""
    return {32: "float32", 16: "float16"}.get(bits, f"int{bits}")


@functools.cache
def linear_source(shader: str, tiling: wgsl.Tiling, bits: int, x_element: str = "vec4<f32>", zero: str = "") -> str:
    """A matmul kernel's body behind the model's linear prelude: enables first, then the
    prelude with the tile sizes filled in, then the kernel's accumulate(n0, m0), then its zero points."""
    return wgsl.compose(OPS_SHADERS / LINEAR_PRELUDE, shader, tiling, bits, x_element, zero)


def variants(bits: int, act_bits: int, tiling: wgsl.Tiling, rows: int, zero: str = "packed") -> list[dict[str, Any]]:
    """The job's variants of one linear kernel, best first (the page runs the first its adapter
    can), with their sources and the family + tile a row's ``kernel_variant`` names; ``zero``: how
    the layers' zero points are held (``model_zero``)."""
    return [{"shader": v.id, "compute_dtype": v.compute_dtype, "requires": list(v.requires),
             "family": v.kernel_variant(tiling), "weight_dtype": weight_dtype_for(bits),
             "source": linear_source(v.shader, tiling, bits, v.x_element, v.body_zero)}
            for v in wgsl.variants_for(bits, act_bits, tiling, rows, zero)]


MIXED_ZERO = ("its layers hold both integer and float zero points (per-channel layers are minmax's; the "
              "quantizers with a float zero per block hold blockwise layers)")
"""Why a model's kernels cannot run: the kernels of one bits read one zero-point form."""


def model_zero(held: HeldModel) -> str:
    """How a model's packed-weight kernels read its layers' zero points (kernels.ZERO_FORMS);
    '' for a mix (MIXED_ZERO)."""
    return wgsl.zero_form(layer.held.zero_point_dtype for layer in held.layers) or ""


def unsupported(plan: Sequence[LayerPrecision], head_dim: int, held: HeldModel) -> str:
    """Why the WGSL kernels cannot run a model ('' when they can): the attention and linear kernels
    read vec4s, a packed layer's blocks are whole 32-bit words, one zero-point form per model."""
    if head_dim % 4:
        return f"head size {head_dim} is not a multiple of 4 (the attention kernels read vec4s)"
    for p in plan:
        layer = p.layer
        if layer.k % 4:
            return f"{layer.name}: K = {layer.k} is not a multiple of 4 (the linear kernels read vec4s)"
        per_word = 32 // p.bits
        if p.bits <= 8 and (p.block <= 0 or layer.k % p.block or p.block % per_word):
            return (f"{layer.name}: block size {p.block} does not divide K = {layer.k} into whole "
                    f"{per_word}-value words (the packed kernel's layout)")
    return "" if model_zero(held) else MIXED_ZERO


def prologue(bits: int, act_bits: int, tiling: wgsl.Tiling, rows: int) -> str:
    """The step a layer's kernel needs first (the dequantize step on the GEMM path), or ''. Every
    variant of a kernel has the same one, so the steps can say it before the page picks."""
    (first,) = {v.prologue for v in wgsl.variants_for(bits, act_bits, tiling, rows)}
    return first


def dequantize_program(bits: int) -> str:
    return f"dequantize_w{bits}"


def bound_layers(plan: Sequence[LayerPrecision], replies: Sequence[LayerReply],
                 act_dtypes: Sequence[str] | None = None) -> tuple[list[LayerExecuted], list[str]]:
    """What each linear layer ran, read from the size of the weight buffer the page bound for it
    (never from the page's word), and the layers whose bytes are not their planned bits'.
    PageDataError when the reply does not describe the plan's layers in order."""
    if len(replies) != len(plan):
        raise PageDataError(f"the reply describes {len(replies)} linear layers, the model has {len(plan)}")
    layers, problems = [], []
    for i, (p, reply) in enumerate(zip(plan, replies)):
        if reply.name != p.layer.name:
            raise PageDataError(f"layer {reply.name!r} in the reply where {p.layer.name!r} was expected")
        if reply.weight_bytes is None:
            raise PageDataError(f"layer {p.layer.name} has no weight_bytes (its bound weight buffer)")
        elements = p.layer.n * p.layer.k
        bits = reply.weight_bytes * 8 // elements if reply.weight_bytes * 8 % elements == 0 else None
        if bits != p.bits:
            problems.append(f"{p.layer.name} bound {reply.weight_bytes} weight bytes, not {p.bits}-bit weights")
        layers.append(LayerExecuted(p.layer.name, bits, reply.weight_dtype, reply.weight_bytes, reply.gpu_ms,
                                    act_dtypes[i] if act_dtypes else ""))
    return layers, problems


def summary_of(values: list[str]) -> str:
    """One value when every layer has it, else 'mixed:<value>x<count>,...' (most common first): a
    model's weight formats and dtypes in one row cell."""
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return "mixed:" + ",".join(f"{v}x{c}" for v, c in counts.most_common())


def held_fields(held: Sequence[Any]) -> dict[str, str]:
    """The EngineJob's weight format and dtypes from the layers a model holds (``held``:
    models.quantized.HeldWeight per layer), one value or a 'mixed:' summary each."""
    quantized = [h for h in held if h.block_size]
    return {"weight_format": summary_of([h.weight_format for h in held]),
            "weight_dtype": summary_of([h.weight_dtype for h in held]),
            "scale_dtype": "float32" if quantized else "",
            "zero_point_dtype": summary_of([h.zero_point_dtype for h in quantized]) if quantized else ""}


def executed_steps(engine: Engine, job: EngineJob, page: PageReply, plan: Sequence[LayerPrecision]) -> Executed:
    """What a step-list page ran: the shaders it names must be variants the job offered (else the
    row says so); each layer's bits from the weight buffer it bound; the bits most layers set by
    --bits ran at; f16 when any chosen variant computes in f16."""
    offered = {(key, v["shader"]): v for key, family in job.spec.options["linear_variants"].items() for v in family}
    used = [(key, shader) for key, _, shader in (s.partition("=") for s in page.shader.split("+")) if shader]
    unknown = [s for s in used if s not in offered]
    if not used or unknown or len(used) != len(page.shader.split("+")):
        return Executed(None, "", engine.platform.value, f"the page used shader(s) {page.shader!r}, "
                        "which the job did not offer")
    if page.weight_buffer_bytes is None:
        raise PageDataError("the reply has no weight_buffer_bytes (the bound weight buffers)")
    dtypes = {offered[s]["compute_dtype"] for s in used}
    layers, problems = bound_layers(plan, page.layers)
    total = sum(layer.weight_bytes or 0 for layer in layers)
    if total != page.weight_buffer_bytes:
        problems.append(f"weight_buffer_bytes {page.weight_buffer_bytes} is not the layers' sum {total}")
    at_run_bits = [le.bits_executed for p, le in zip(plan, layers) if p.rule == "--bits"]
    bits = Counter(at_run_bits or [le.bits_executed for le in layers]).most_common(1)[0][0]
    note = ("16-bit layers computed in f32 (the adapter has no shader-f16)"
            if "f16" not in dtypes and any(p.bits == 16 for p in plan) else "")
    problem = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    variant = "+".join(sorted({offered[s]["family"] for s in used}))
    return Executed(bits, "f16" if "f16" in dtypes else "f32", engine.platform.value, problem, note, tuple(layers),
                    variant)


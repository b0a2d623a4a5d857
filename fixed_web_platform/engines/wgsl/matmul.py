"""The matmul kind on the harness's WGSL kernels (page: web/engines/wgsl.js).

Python composes each kernel (kernels.py), fills in the tile it chose from the shape, and tells the
page the dispatch size; the page picks the first variant whose features its adapter has. What
ran is read from the shader the page used and the size of the weight buffer it bound, never from
the page's word about its arithmetic. With int8 activations the DP4A kernel reads x's scale and
zero point from one more tensor (ACT_QUANT: ``act_quant_bytes``), bound at ACT_QUANT_BINDING.
Every weight quantizer's bytes run (``--weight-quant``): a float zero point per block is read
from a float32 buffer (shaders/zero_point_float.wgsl) where minmax's packed integers are.
"""

from __future__ import annotations

from typing import Any

from ...page_protocol import PageDataError, PageReply
from ...run_spec import RunSpec, TimingConfig
from ...workloads.matmul import MatmulWorkload, PreparedWorkload, prepare
from ..base import BrowserFacts, Engine, EngineJob, Executed
from . import WgslRunner
from .kernels import (
    ACT_QUANT_BINDING,
    DEQUANTIZED,
    OUTPUT_BINDING,
    KernelVariant,
    Tiling,
    act_quant_bytes,
    dequantize_dispatch,
    dequantize_source,
    shader_source,
    tiling_for,
    variants_for,
    zero_form,
)

ACT_QUANT = "x_quant"
"""The job's tensor of x's int8 scale and zero point (int8 activations only)."""


def variant_options(v: KernelVariant, tiling: Tiling, prepared: PreparedWorkload,
                    layout: list[str | None]) -> dict[str, Any]:
    """A variant as the matmul page gets it. With a prologue: the dequantize step (its source,
    constants, dispatch and bindings: the weight tensors, then the scratch buffer), the scratch
    buffer's size, and the float32 kernel's own constants and bindings (x, out, the scratch)."""
    options: dict[str, Any] = {"shader": v.id, "compute_dtype": v.compute_dtype, "requires": list(v.requires),
                               "source": shader_source(v.shader, tiling, prepared.bits, v.x_element, v.body_zero)}
    if v.prologue:
        w = prepared.workload
        x, out, *weights = layout
        options |= {
            "prologue": {"shader": v.prologue, "source": dequantize_source(prepared.bits, v.zero),
                         "layout": [*weights, DEQUANTIZED],
                         **dequantize_dispatch(w.k, w.n, prepared.bits, prepared.block_size)},
            "scratch": {DEQUANTIZED: w.n * w.k * 4},
            "layout": [x, out, DEQUANTIZED],
            "constants": {"M": w.m, "K": w.k, "N": w.n},
        }
    return options


def constants_for(prepared: PreparedWorkload) -> dict[str, float]:
    w = prepared.workload
    constants: dict[str, float] = {"M": w.m, "K": w.k, "N": w.n}
    if prepared.block_size:
        constants |= {"BITS": prepared.bits, "BLOCK_SIZE": prepared.block_size}
    return constants


def tensors_and_layout(prepared: PreparedWorkload) -> tuple[dict[str, bytes], list[str | None]]:
    """The job's tensors (the prepared ones, plus ACT_QUANT with int8 activations) and the
    kernel's bindings in order: x, out, the weight tensors (from 2 on), and with int8
    activations ACT_QUANT at ACT_QUANT_BINDING (None: a binding the kernel does not have)."""
    tensors = dict(prepared.tensors)
    names = list(tensors)  # x first, then the weight tensors
    layout: list[str | None] = [names[0], OUTPUT_BINDING, *names[1:]]
    if prepared.act_bits == 8:
        tensors[ACT_QUANT] = act_quant_bytes(prepared.act_scale, prepared.act_zero_point)
        layout += [None] * (ACT_QUANT_BINDING - len(layout)) + [ACT_QUANT]
    return tensors, layout


def _zero(prepared: PreparedWorkload) -> str:
    return zero_form([prepared.zero_point_dtype]) or "packed"


class WgslMatmul(WgslRunner):
    runner = "wgsl"
    act_bits = (32, 8)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob:
        w = run.workload
        assert isinstance(w, MatmulWorkload)
        prepared = prepare(w, run.bits, run.weight_block, run.seed, act_bits=run.act_bits, observer=run.observer,
                           weight_quant=run.weight_quant)
        tensors, layout = tensors_and_layout(prepared)
        tiling = tiling_for(w.m, w.n)
        options = {
            "variants": [variant_options(v, tiling, prepared, layout)
                         for v in variants_for(prepared.bits, prepared.act_bits, tiling, w.m, _zero(prepared))],
            "constants": constants_for(prepared),
            "layout": layout,
            "tiling": tiling.to_json(),
            "workgroups": tiling.workgroups(w.m, w.n),
        }
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options, prepared.bits),
            tensors=tensors, prepared=prepared,
            **prepared.held_fields(),
            details={"tiling": tiling.to_json()},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        w, prepared = run.workload, job.prepared
        assert isinstance(w, MatmulWorkload) and isinstance(prepared, PreparedWorkload)
        tiling = Tiling(**job.spec.options["tiling"])
        variant = next((v for v in variants_for(prepared.bits, prepared.act_bits, tiling, w.m, _zero(prepared))
                        if v.id == page.shader), None)
        if variant is None:
            return Executed(None, "", engine.platform.value,
                            f"the page used shader {page.shader!r}, which the job did not offer")
        if page.weight_buffer_bytes is None:
            raise PageDataError("the reply has no weight_buffer_bytes (the bound weight buffer)")
        elements = w.n * w.k
        bound = page.weight_buffer_bytes
        bits = bound * 8 // elements if bound * 8 % elements == 0 else None
        problem = "" if bits == prepared.bits else (
            f"the bound weight buffer holds {bound} bytes, not {prepared.bits}-bit weights")
        return Executed(bits, variant.compute_dtype, engine.platform.value, problem,
                        kernel_variant=variant.kernel_variant(tiling))

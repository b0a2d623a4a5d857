"""The matmul kind on the harness's WGSL kernels (page: web/engines/wgsl.js).

Python composes each kernel (kernels.py), fills in the tile it chose from the shape, and tells the
page the dispatch size; the page picks the first variant whose features its adapter has. What
ran is read from the shader the page used and the size of the weight buffer it bound, never from
the page's word about its arithmetic.
"""

from __future__ import annotations

from typing import Any

from ...harness.protocol import PageDataError, PageReply
from ...run_spec import RunSpec, TimingConfig
from ...workloads.matmul import MatmulWorkload, PreparedWorkload, prepare
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner
from .kernels import (
    DEQUANTIZED,
    OUTPUT_BINDING,
    KernelVariant,
    Tiling,
    dequantize_dispatch,
    dequantize_source,
    shader_source,
    tiling_for,
    variants_for,
)


def variant_options(v: KernelVariant, tiling: Tiling, prepared: PreparedWorkload,
                    layout: list[str]) -> dict[str, Any]:
    """A variant as the matmul page gets it. With a prologue: the dequantize step (its source,
    constants, dispatch and bindings: the weight tensors, then the scratch buffer), the scratch
    buffer's size, and the float32 kernel's own constants and bindings (x, out, the scratch)."""
    options: dict[str, Any] = {"shader": v.id, "compute_dtype": v.compute_dtype, "requires": list(v.requires),
                               "source": shader_source(v.shader, tiling, prepared.bits, v.x_element)}
    if v.prologue:
        w = prepared.workload
        x, out, *weights = layout
        options |= {
            "prologue": {"shader": v.prologue, "source": dequantize_source(prepared.bits),
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
    if prepared.act_bits == 8:
        constants |= {"X_SCALE": prepared.act_scale, "X_ZERO": prepared.act_zero_point}
    return constants


class WgslMatmul(KindRunner):
    runner = "wgsl"
    act_bits = (32, 8)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob:
        w = run.workload
        assert isinstance(w, MatmulWorkload)
        prepared = prepare(w, run.bits, run.weight_block, run.seed, act_bits=run.act_bits, observer=run.observer)
        names = list(prepared.tensors)  # x first, then the weight tensors
        tiling = tiling_for(w.m, w.n)
        layout = [names[0], OUTPUT_BINDING, *names[1:]]
        options = {
            "variants": [variant_options(v, tiling, prepared, layout)
                         for v in variants_for(prepared.bits, prepared.act_bits, tiling, w.m)],
            "constants": constants_for(prepared),
            "layout": layout,
            "tiling": tiling.to_json(),
            "workgroups": tiling.workgroups(w.m, w.n),
        }
        return EngineJob(
            spec=self.spec(engine, run, timing, prepared.tensors, prepared.outputs, options, prepared.bits),
            tensors=prepared.tensors, prepared=prepared,
            weight_format=prepared.weight_format, weight_dtype=prepared.weight_dtype,
            scale_dtype="float32" if prepared.block_size else "",
            zero_point_dtype=prepared.weight_dtype if prepared.block_size else "",
            details={"tiling": tiling.to_json()},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        w, prepared = run.workload, job.prepared
        assert isinstance(w, MatmulWorkload) and isinstance(prepared, PreparedWorkload)
        tiling = Tiling(**job.spec.options["tiling"])
        variant = next((v for v in variants_for(prepared.bits, prepared.act_bits, tiling, w.m)
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

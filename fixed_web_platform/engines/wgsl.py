"""The harness's own WGSL kernels on WebGPU: packed 2/4/8-bit, float16 and float32 matmuls.

Python composes each kernel from shaders/prelude.wgsl and the kernel's own file, fills in the
tile sizes, and tells the page the dispatch size; the page picks the first variant whose
features its adapter has. What ran is read from the shader the page used and the size of the
weight buffer it bound, never from the page's word about its arithmetic.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..harness.protocol import PageDataError, PageReply
from ..paths import SHADERS_DIR
from ..plan import RunSpec, TimingConfig
from ..vocabulary import EngineName, Platform
from ..workloads.matmul import PreparedWorkload, prepare
from .base import BrowserFacts, Engine, EngineJob, Executed, Refusal

PRELUDE = "prelude.wgsl"
WORKGROUP_X = 64
TILE_M = 4
OUTPUT_BINDING = "out"


@dataclass(frozen=True)
class KernelVariant:
    """A shader the page may use; the first whose required features the adapter has wins."""

    shader: str
    compute_dtype: str
    requires: tuple[str, ...] = ()


def variants_for(bits: int) -> tuple[KernelVariant, ...]:
    if bits == 32:
        return (KernelVariant("matmul_f32.wgsl", "f32"),)
    if bits == 16:
        return (KernelVariant("matmul_f16.wgsl", "f16", ("shader-f16",)),
                KernelVariant("matmul_f16_unpack.wgsl", "f32"))
    return (KernelVariant("matmul_quant.wgsl", "f32"),)


@functools.cache
def shader_source(shader: str) -> str:
    """The kernel as the page compiles it: its ``enable`` directives, the prelude, its body."""
    body = (SHADERS_DIR / shader).read_text()
    lines = body.splitlines(keepends=True)
    enables = [line for line in lines if line.startswith("enable ")]
    rest = [line for line in lines if not line.startswith("enable ")]
    prelude = (SHADERS_DIR / PRELUDE).read_text()
    prelude = prelude.replace("{TILE_M}", str(TILE_M)).replace("{WORKGROUP_X}", str(WORKGROUP_X))
    return "".join(enables) + prelude + "".join(rest)


def constants_for(prepared: PreparedWorkload) -> dict[str, int]:
    w = prepared.workload
    constants = {"M": w.m, "K": w.k, "N": w.n}
    if prepared.block_size:
        constants |= {"BITS": prepared.bits, "BLOCK_SIZE": prepared.block_size}
    return constants


class WgslEngine(Engine):
    name = EngineName.HARNESS
    platform = Platform.WEBGPU
    runner = "wgsl"

    async def job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob:
        prepared = prepare(run.workload, run.bits, run.block_size, run.seed)
        w = run.workload
        names = list(prepared.tensors)  # x first, then the weight tensors
        options = {
            "variants": [{"shader": v.shader, "compute_dtype": v.compute_dtype,
                          "requires": list(v.requires), "source": shader_source(v.shader)}
                         for v in variants_for(prepared.bits)],
            "constants": constants_for(prepared),
            "layout": [names[0], OUTPUT_BINDING, *names[1:]],
            "workgroups": [-(-w.n // WORKGROUP_X), -(-w.m // TILE_M)],
        }
        return EngineJob(
            spec=self.spec(run, prepared, timing, prepared.tensors, options),
            tensors=prepared.tensors, prepared=prepared,
            weight_format=prepared.weight_format, weight_dtype=prepared.weight_dtype,
            scale_dtype="float32" if prepared.block_size else "",
            zero_point_dtype=prepared.weight_dtype if prepared.block_size else "",
        )

    def interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        variant = next((v for v in variants_for(job.prepared.bits) if v.shader == page.shader), None)
        if variant is None:
            return Executed(None, "", self.platform.value,
                            f"the page used shader {page.shader!r}, which the job did not offer")
        if page.weight_buffer_bytes is None:
            raise PageDataError("the reply has no weight_buffer_bytes (the bound weight buffer)")
        elements = run.workload.n * run.workload.k
        bound = page.weight_buffer_bytes
        bits = bound * 8 // elements if bound * 8 % elements == 0 else None
        problem = "" if bits == job.prepared.bits else (
            f"the bound weight buffer holds {bound} bytes, not {job.prepared.bits}-bit weights")
        return Executed(bits, variant.compute_dtype, self.platform.value, problem)

    async def model_job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
        """Whole models: the encoder from the harness's own kernels (engines/wgsl_model.py)."""
        from . import wgsl_model

        return await wgsl_model.model_job(self, run, timing)

    def model_interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        from . import wgsl_model

        return wgsl_model.model_interpret(self, run, job, page)

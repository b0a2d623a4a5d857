"""ONNX Runtime Web (onnxruntime-web, from npm) as a peer engine, one per execution provider.

Python builds a one-node ONNX model from THE SAME quantized values the harness kernels get
(MatMulNBits for 8/4/2 bits with the harness's blocks and zero points, MatMul for 32, a float16
MatMul for 16), and the page runs it with ORT on the provider the run names. ORT silently moves
nodes a provider cannot take to its CPU (wasm) provider; the page first asks for a session with
that fallback disabled, so a fallback is seen, and the row says where the node ran and why.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..harness.protocol import PageDataError, PageReply
from ..paths import ENGINES_DIR
from ..plan import RunSpec, TimingConfig
from ..vocabulary import EngineName, Platform
from ..workloads.matmul import prepare
from .base import BrowserFacts, Engine, EngineJob, Executed

ORT_WEB_VERSION = "1.30.0"
ORT_WEB_DIR = ENGINES_DIR / f"onnxruntime-web-{ORT_WEB_VERSION}"
"""Installed by scripts/setup.sh from the npm registry; served at ``ORT_ASSETS_URL``."""
ORT_ASSETS_URL = "/engines/ort/"
ORT_BUNDLE = "ort.webgpu.min.mjs"
"""The bundle with the webgpu, webnn and wasm providers."""
ORT_THREADS = max(1, min(4, os.cpu_count() or 1))
"""wasm threads asked for (pages are cross-origin isolated, so threads are possible); the
number in effect is what the page reports."""


class OrtWebEngine(Engine):
    """ONNX Runtime Web on one execution provider (the subclasses below fix which)."""

    name = EngineName.ORT
    runner = "ort"
    refusal_stages = ("session",)

    def assets(self) -> dict[str, Path]:
        return {ORT_ASSETS_URL: ORT_WEB_DIR}

    async def job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob:
        # MatMulNBits stores unsigned values with zero points: the harness's signed values
        # shifted by 2^(bits-1), zero points too, so the dequantized weights are identical.
        from .ort_model import matmul_model  # onnx is loaded only when an ORT job is built

        prepared = prepare(run.workload, run.bits, run.block_size, run.seed, unsigned=True)
        t = prepared.tensors
        model = matmul_model(k=run.workload.k, n=run.workload.n, bits=prepared.bits,
                             block_size=prepared.block_size, w=t["w"], scales=t.get("scales"),
                             zero_points=t.get("zero_points"))
        tensors = {"x": t["x"], "model": model}
        options = {
            "provider": self.platform.value,
            "device_type": run.webnn_device,
            "threads": ORT_THREADS,
            "assets": ORT_ASSETS_URL,
            "bundle": ORT_BUNDLE,
            "model": "model",
            "input": "x",
        }
        node = "MatMul" if prepared.bits >= 16 else f"MatMulNBits(bits={prepared.bits}, block_size={prepared.block_size})"
        return EngineJob(
            spec=self.spec(run, prepared, timing, tensors, options),
            tensors=tensors, prepared=prepared,
            weight_format=prepared.weight_format, weight_dtype=prepared.weight_dtype,
            scale_dtype="float32" if prepared.block_size else "",
            zero_point_dtype=prepared.weight_dtype if prepared.block_size else "",
            details={"onnx_node": node, "model_bytes": len(model)},
        )

    def interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        compute = "f16" if job.prepared.bits == 16 else "f32"
        ran_on = page.executed_on
        if ran_on not in {p.value for p in Platform}:
            raise PageDataError(f"executed_on {ran_on!r:.40} is not a provider this engine uses")
        note = ""
        if ran_on != self.platform.value:
            note = f"ORT placed the weight-bearing node on {ran_on}, not {self.platform}"
            if page.placement:
                note += f" (ORT's placement: {page.placement})"
            if page.fallback:
                note += f"; with CPU fallback disabled {self.platform} refused it: {page.fallback}"
        # The model's weights are the bits asked for; ORT has no other form to run them in.
        return Executed(job.prepared.bits, compute, ran_on, note=note)


class OrtWebGpu(OrtWebEngine):
    platform = Platform.WEBGPU


class OrtWebNN(OrtWebEngine):
    platform = Platform.WEBNN


class OrtWasm(OrtWebEngine):
    platform = Platform.WASM

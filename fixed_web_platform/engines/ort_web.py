"""ONNX Runtime Web (onnxruntime-web, from npm) as a peer engine, one per execution provider.

Python builds a one-node ONNX model from THE SAME quantized values the harness kernels get
(MatMulNBits for 8/4/2 bits with the harness's blocks and zero points, MatMul for 32, a float16
MatMul for 16), and the page runs it with ORT on the provider the run names. ORT silently moves
nodes a provider cannot take to its CPU (wasm) provider; the page first asks for a session with
that fallback disabled, so a fallback is seen, and the row says where the node ran and why.

Whole models (``model_job``/``model_interpret``, page web/engines/ort_model.js): the encoder
exported to ONNX with every linear layer rewritten to the harness's bytes for it
(engines/ort_encoder.py); ORT's placement log says where each layer's node ran, reported per layer
as ``layers[i].weight_dtype = '<node weights>@<provider>'`` (e.g. 'MatMulNBits4@wasm').
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections import Counter
from pathlib import Path


from ..harness.protocol import PageDataError, PageReply
from ..paths import ENGINES_DIR
from ..plan import RunSpec, TimingConfig
from ..vocabulary import EngineName, Platform
from ..workloads.matmul import prepare
from .base import BrowserFacts, Engine, EngineJob, Executed, LayerExecuted, Refusal

ORT_WEB_VERSION = "1.30.0"
ORT_WEB_DIR = ENGINES_DIR / f"onnxruntime-web-{ORT_WEB_VERSION}"
"""Installed by scripts/setup.sh from the npm registry; served at ``ORT_ASSETS_URL``."""
ORT_ASSETS_URL = "/engines/ort/"
ORT_BUNDLE = "ort.webgpu.min.mjs"
"""The bundle with the webgpu, webnn and wasm providers."""
MODEL_RUNNER = "ort_model"
"""The page module for whole models (web/engines/ort_model.js); matmuls use ``runner``."""
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

    def session_options(self, run: RunSpec) -> dict[str, object]:
        """What every ORT page needs to load the bundle and open a session on this provider."""
        return {"provider": self.platform.value, "device_type": run.webnn_device, "threads": ORT_THREADS,
                "assets": ORT_ASSETS_URL, "bundle": ORT_BUNDLE}

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
            **self.session_options(run),
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

    async def model_job(self, run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
        """The encoder exported to ONNX (cached), every linear layer rewritten to the harness's
        bytes for it (engines/ort_encoder.py); the page runs the whole graph with ORT."""
        from ..models.prepared import prepare_model
        from . import ort_encoder  # torch and onnx load only when an ORT model job is built

        def build() -> tuple[object, object]:
            # unsigned: MatMulNBits stores values and zero points shifted by 2^(bits-1)
            prepared = prepare_model(run.workload, run.bits, run.block_size, run.seed, unsigned=True)
            return prepared, ort_encoder.encoder_model(prepared)

        prepared, encoder = await asyncio.to_thread(build)  # an export takes seconds
        b = prepared.batches
        tensors = prepared.input_tensors() | {"onnx_model": encoder.data}
        options = {
            **self.session_options(run),
            "onnx_model": "onnx_model",
            "input_dtype": "int64",
            "output": ort_encoder.OUTPUT_NAME,
            "dims": {ort_encoder.BATCH_DIM: int(b.input_ids.shape[1]),
                     ort_encoder.SEQUENCE_DIM: int(b.input_ids.shape[2])},
            "ort_layers": [layer.to_json() for layer in encoder.layers],
        }
        spec = dataclasses.replace(self.model_spec(run, prepared, timing, tensors, options), runner=MODEL_RUNNER)
        first = encoder.layers[0]
        nbits = first.op == "MatMulNBits"
        kinds = sorted({layer.weight_dtype for layer in encoder.layers})
        return EngineJob(
            spec=spec, tensors=tensors, prepared=prepared,
            weight_format=kinds[0] if len(kinds) == 1 else "mixed:" + "+".join(kinds),
            weight_dtype=prepared.held.layers[0].held.weight_dtype,
            scale_dtype="float32" if nbits else "",
            zero_point_dtype=prepared.held.layers[0].held.weight_dtype if nbits else "",
            details={"onnx_layers": ort_encoder.summary(encoder.layers), "model_bytes": len(encoder.data),
                     "onnx_opset": ort_encoder.OPSET},
        )

    def model_interpret(self, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        """Where each layer's node ran, from ORT's placement log as the page parsed it
        (``layers[i].weight_dtype`` = '<node weights>@<provider>'); the bits are the job's."""
        providers = {p.value for p in Platform} | {"?"}
        wanted = job.spec.options.get("ort_layers") or []
        if len(page.layers) != len(wanted):
            raise PageDataError(f"the reply has {len(page.layers)} layers, the job has {len(wanted)}")
        layers: list[LayerExecuted] = []
        ran_on: list[str] = []
        for want, reply in zip(wanted, page.layers):
            if reply.name != want["name"]:
                raise PageDataError(f"layer {reply.name!r:.80} is where the job has {want['name']!r}")
            dtype, _, provider = reply.weight_dtype.partition("@")
            if dtype != want["weight_dtype"] or provider not in providers:
                raise PageDataError(f"layer {reply.name}: weight_dtype {reply.weight_dtype!r:.40} is not "
                                    f"'{want['weight_dtype']}@<provider>'")
            ran_on.append(provider)
            layers.append(LayerExecuted(reply.name, int(want["bits"]), reply.weight_dtype,
                                        int(want["weight_bytes"]), reply.gpu_ms))
        counts = Counter(ran_on)
        most = max(counts, key=lambda p: (counts[p], p == self.platform.value))
        if page.executed_on != most:
            raise PageDataError(f"executed_on {page.executed_on!r:.40} is not where most layers ran ({most})")
        elsewhere = len(ran_on) - counts[self.platform.value]
        notes = []
        if elsewhere:
            where = ", ".join(f"{c} on {p if p != '?' else 'an unknown provider'}"
                              for p, c in counts.items() if p != self.platform.value)
            notes.append(f"{elsewhere} of {len(ran_on)} linear layers did not run on {self.platform}: {where}")
        if page.fallback:
            notes.append(f"{self.platform} refused a session without CPU fallback: {page.fallback[:300]}")
        if page.placement and (elsewhere or page.fallback):
            notes.append(f"ORT's placement: {page.placement[:400]}")
        plan = job.prepared.plan
        by_flag = [layer.bits_executed for p, layer in zip(plan, layers) if p.rule == "--bits"]
        pool = by_flag or [layer.bits_executed for layer in layers]
        bits = Counter(pool).most_common(1)[0][0] if pool else None
        compute = "f16" if any(layer.bits_executed == 16 for layer in layers) else "f32"
        return Executed(bits, compute, most, note="; ".join(notes), layers=tuple(layers))


class OrtWebGpu(OrtWebEngine):
    platform = Platform.WEBGPU


class OrtWebNN(OrtWebEngine):
    platform = Platform.WEBNN


class OrtWasm(OrtWebEngine):
    platform = Platform.WASM

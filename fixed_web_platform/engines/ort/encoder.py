"""The encoder kind on ONNX Runtime Web (page: web/engines/ort_model.js): the encoder exported to
ONNX with every linear layer rewritten to the harness's bytes for it (onnx_encoder.py); ORT's
placement log says where each layer's node ran, reported per layer as
``layers[i].weight_dtype = '<node weights>@<provider>'`` (e.g. 'MatMulNBits4@wasm').
"""

from __future__ import annotations

import asyncio
from collections import Counter

from ...harness.protocol import PageDataError, PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Platform
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import PreparedModel, prepare_model
from ..base import (
    BrowserFacts,
    Engine,
    EngineJob,
    Executed,
    KindRunner,
    LayerExecuted,
    Refusal,
)
from . import OrtWebEngine, onnx_encoder


class OrtEncoder(KindRunner):
    runner = "ort_model"

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        """The encoder exported to ONNX (cached), every linear layer rewritten to the harness's
        bytes for it (onnx_encoder.py); the page runs the whole graph with ORT."""
        assert isinstance(engine, OrtWebEngine)
        workload = run.workload
        assert isinstance(workload, EncoderWorkload)

        def build() -> tuple[PreparedModel, onnx_encoder.EncoderModel]:
            # unsigned: MatMulNBits stores values and zero points shifted by 2^(bits-1)
            prepared = prepare_model(workload, run.bits, run.block_size, run.seed, unsigned=True)
            return prepared, onnx_encoder.encoder_model(prepared)

        prepared, encoder = await asyncio.to_thread(build)  # an export takes seconds
        b = prepared.batches
        tensors = prepared.input_tensors() | {"onnx_model": encoder.data}
        options = {
            **engine.session_options(run),
            "onnx_model": "onnx_model",
            "input_dtype": "int64",
            "output": onnx_encoder.OUTPUT_NAME,
            "dims": {onnx_encoder.BATCH_DIM: int(b.input_ids.shape[1]),
                     onnx_encoder.SEQUENCE_DIM: int(b.input_ids.shape[2])},
            "ort_layers": [layer.to_json() for layer in encoder.layers],
        }
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, prepared.options() | options)
        first = encoder.layers[0]
        nbits = first.op == "MatMulNBits"
        kinds = sorted({layer.weight_dtype for layer in encoder.layers})
        return EngineJob(
            spec=spec, tensors=tensors, prepared=prepared,
            weight_format=kinds[0] if len(kinds) == 1 else "mixed:" + "+".join(kinds),
            weight_dtype=prepared.held.layers[0].held.weight_dtype,
            scale_dtype="float32" if nbits else "",
            zero_point_dtype=prepared.held.layers[0].held.weight_dtype if nbits else "",
            details={"onnx_layers": onnx_encoder.summary(encoder.layers), "model_bytes": len(encoder.data),
                     "onnx_opset": onnx_encoder.OPSET},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
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
        most = max(counts, key=lambda p: (counts[p], p == engine.platform.value))
        if page.executed_on != most:
            raise PageDataError(f"executed_on {page.executed_on!r:.40} is not where most layers ran ({most})")
        elsewhere = len(ran_on) - counts[engine.platform.value]
        notes = []
        if elsewhere:
            where = ", ".join(f"{c} on {p if p != '?' else 'an unknown provider'}"
                              for p, c in counts.items() if p != engine.platform.value)
            notes.append(f"{elsewhere} of {len(ran_on)} linear layers did not run on {engine.platform}: {where}")
        if page.fallback:
            notes.append(f"{engine.platform} refused a session without CPU fallback: {page.fallback[:300]}")
        if page.placement and (elsewhere or page.fallback):
            notes.append(f"ORT's placement: {page.placement[:400]}")
        plan = job.prepared.layers
        by_flag = [layer.bits_executed for p, layer in zip(plan, layers) if p.rule == "--bits"]
        pool = by_flag or [layer.bits_executed for layer in layers]
        bits = Counter(pool).most_common(1)[0][0] if pool else None
        compute = "f16" if any(layer.bits_executed == 16 for layer in layers) else "f32"
        return Executed(bits, compute, most, note="; ".join(notes), layers=tuple(layers))



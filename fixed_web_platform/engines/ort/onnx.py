"""The onnx kind (a user's own ONNX file) on ONNX Runtime Web (page: web/engines/ort_file.js):
the run's precision variant (workloads/onnx_file/variants.py) fed the workload's inputs, every
graph output returned. Placement: the page first asks for a session without CPU fallback; if the
provider refuses, ORT's verbose log of the fallback session says where every node went, and the
reply counts them and lists the nodes off the asked provider.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from ...page_protocol import PageDataError, PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome, Platform
from ...workloads.onnx_file import OnnxFileError, OnnxFileWorkload
from ...workloads.onnx_file import variants as onnx_variants
from ...workloads.onnx_file.prepared import PreparedOnnx, prepare
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, LayerExecuted, Refusal
from ...precision.quantizers import INTEGER_ZERO
from . import OrtWebEngine, float_zero_refusal, set_accuracy_level

TABLE_PROVIDERS = (Platform.WEBGPU,)
"""Where the held variant's embedding tables are GatherBlockQuantized: ORT Web 1.30's WebGPU provider
runs it; its wasm build has no kernel ("Could not find an implementation for GatherBlockQuantized(1)",
measured on MiniLM) and its WebNN provider would hand it to that wasm build."""
HALF_VARIANTS = ("fp16", onnx_variants.Q4F16)
"""Variants whose arithmetic is float16 (the kernel tolerance is float16's)."""
WEIGHT_DTYPES = {"fp32": "float32", "fp16": "float16", onnx_variants.QDQ: "int8", onnx_variants.BNB4: "nf4"}


def weight_dtype(variant: onnx_variants.Variant, bits: int) -> str:
    """What the variant's quantized weights are held as (a dynamic int8 variant: its nodes' type;
    the held variant: the run's bits)."""
    if variant.name == onnx_variants.HELD:
        return f"uint{bits}"
    if variant.name in onnx_variants.DYNAMIC_VARIANTS:
        held = [d.partition("=")[0].partition(":")[2] for d in variant.node_dtypes.values() if "Integer:" in d]
        return held[0] if held else "int8"
    return WEIGHT_DTYPES.get(variant.name, f"uint{onnx_variants.NBITS_VARIANTS.get(variant.name, 8)}")


class OrtOnnxFile(KindRunner):
    """The held variant takes the quantizers whose zero points the provider's MatMulNBits holds
    (INTEGER_ZERO; the registry gives wasm's every quantizer, at the bits it computes float zeros)."""

    runner = "ort_file"
    act_bits = (32, 8)
    weight_quants = INTEGER_ZERO

    def refusal(self, engine: Engine, run: RunSpec) -> str:
        why = super().refusal(engine, run) or float_zero_refusal(run)
        if why:
            return why
        variant = onnx_variants.variant_for(run.bits, run.act_bits, run.weight_format)
        if run.act_bits == 8 and run.bits != 8:
            return (f"int8 activations of an ONNX file are its {onnx_variants.QDQ} variant, which holds 8-bit "
                    f"weights (--bits 8), not {run.bits}-bit ones")
        if run.granularity == "per-channel" and variant not in ("fp32", "fp16", onnx_variants.QDQ):
            return (f"the {variant} variant holds its weights in blocks or per tensor; per-channel weights are the "
                    f"{onnx_variants.QDQ} variant's (--act-bits 8 --bits 8)")
        return ""

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        assert isinstance(engine, OrtWebEngine)
        workload = run.workload
        assert isinstance(workload, OnnxFileWorkload)
        name = onnx_variants.variant_for(run.bits, run.act_bits, run.weight_format)

        def build() -> PreparedOnnx:
            variant = workload.variant(name, run.bits, run.block_size, run.observer, run.weight_quant,
                                       tables=engine.platform in TABLE_PROVIDERS)
            return prepare(workload, variant, run.bits, run.block_size)

        try:
            prepared = await asyncio.to_thread(build)  # quantize_static takes seconds
        except onnx_variants.VariantRefused as exc:
            return Refusal(Outcome.UNSUPPORTED, str(exc))
        except OnnxFileError as exc:
            return Refusal(Outcome.UNSUPPORTED, f"{name}: {exc}; without a CPU reference it cannot be judged")
        variant = prepared.variant
        node_of = {layer.name: d.partition("=")[2] or layer.name
                   for layer in workload.weight_layers for d in [variant.node_dtypes.get(layer.name, "")]}
        ort_layers = [{"name": p.layer.name, "node": node_of[p.layer.name],
                       "weight_dtype": variant.node_dtypes.get(p.layer.name, "").partition("=")[0] or p.layer.kind,
                       "bits": p.bits} for p in prepared.layers]
        external = {f"external:{i}": location for i, location in enumerate(variant.external)}
        tensors = prepared.input_tensors() | {"onnx_model": variant.path} | {
            key: variant.path.parent / location for key, location in external.items()}
        options = {
            **engine.session_options(run),
            "onnx_model": "onnx_model",
            "external_data": [{"path": location, "key": key} for key, location in external.items()],
            "inputs": prepared.input_options(),
            "dims": prepared.feeds.dims,
            "half": variant.name in HALF_VARIANTS,
            "ort_layers": ort_layers,
        }
        set_accuracy_level(run, tensors)  # the file's MatMulNBits nodes at the level asked for
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, options)
        return EngineJob(
            spec=spec, tensors=tensors, prepared=prepared, weight_format=variant.name,
            weight_dtype=weight_dtype(variant, run.bits),
            scale_dtype="float16" if variant.name == onnx_variants.Q4F16 else (
                "" if variant.name in ("fp32", "fp16") else "float32"),
            details={"onnx_variant": variant.to_json() | {"node_dtypes": len(variant.node_dtypes)},
                     "model_bytes": variant.path.stat().st_size, "inputs": prepared.feeds.description,
                     "kernel_spread": prepared.spread, "repairs": variant.repairs,
                     "onnx_inventory": prepared.inventory.to_json()},
            largest_constant=prepared.inventory.largest,
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        providers = {p.value for p in Platform} | {"?"}
        wanted = job.spec.options["ort_layers"]
        if len(page.layers) != len(wanted):
            raise PageDataError(f"the reply has {len(page.layers)} layers, the job has {len(wanted)}")
        layers = []
        for want, reply in zip(wanted, page.layers):
            dtype, _, provider = reply.weight_dtype.partition("@")
            if reply.name != want["name"] or dtype != want["weight_dtype"] or provider not in providers:
                raise PageDataError(f"layer {reply.name!r:.80}: {reply.weight_dtype!r:.60} is not the job's "
                                    f"{want['name']!r:.80} '{want['weight_dtype']}@<provider>'")
            layers.append(LayerExecuted(reply.name, int(want["bits"]), reply.weight_dtype, None, reply.gpu_ms))
        if page.executed_on not in providers:
            raise PageDataError(f"executed_on {page.executed_on!r:.40} is not a provider")
        fallback = page.kind_fields.get("fallback_nodes", [])
        placed = page.kind_fields.get("nodes_placed", 0)
        notes = []
        if fallback:
            ops = Counter(n.split(" ", 1)[0] for n in fallback)
            where = Counter(n.rpartition("@")[2] for n in fallback)
            notes.append(f"{len(fallback)} of {placed} nodes ran off {engine.platform} (on "
                         f"{', '.join(f'{p} {c}' for p, c in where.items())}): "
                         + ", ".join(f"{op} x{c}" for op, c in ops.most_common(12)))
        if page.executed_on != engine.platform.value:
            notes.append(f"most nodes ran on {page.executed_on}, not {engine.platform}")
        if page.fallback:
            if not fallback:
                notes.append(f"at least 1 node ran off {engine.platform} (ORT's placement log listed none)")
            notes.append(f"{engine.platform} refused a session without CPU fallback: {page.fallback[:300]}")
        prepared = job.prepared
        assert isinstance(prepared, PreparedOnnx)
        if prepared.variant.repairs:
            notes.append(f"the harness {prepared.variant.repairs}")
        # the CPU (wasm) provider casts float16 nodes it has no kernel for up to float32
        half = prepared.variant.name in HALF_VARIANTS and engine.platform is not Platform.WASM
        compute = "f16" if half else "f32"
        return Executed(run.bits, compute, page.executed_on, note="; ".join(notes), layers=tuple(layers))

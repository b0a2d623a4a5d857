"""ONNX Runtime Web (onnxruntime-web, from npm) as a peer engine, one per execution provider,
and one module per workload kind it runs: matmul.py (a one-node model, onnx_matmul.py) and
encoder.py (the exported encoder, onnx_encoder.py), decoder.py, and onnx.py (a user's own
ONNX file in its precision variants, the only engine that runs them). Every model built here holds THE SAME quantized values
the harness's kernels get. ORT silently moves nodes a provider cannot take to its CPU (wasm)
provider; the page first asks for a session with that fallback disabled, so a fallback is seen,
and the row says where the node ran and why.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from ...formats.matmul_nbits import MS_DOMAIN
from ...page_protocol import JobSpec, PageDataError, PageReply
from ...precision.quantizers import INTEGER_ZERO, QUANTIZERS
from ...run_spec import RunSpec, TimingConfig, coded_bits
from ...vocabulary import EngineName, Platform
from ...workloads import OnnxFileWorkload, TensorSpec, Workload
from ...workloads.matmul import PreparedWorkload
from ..base import Engine, EngineJob, Executed, KindRunner
from ..builds import EngineBuild, Pack
from ..webnn.forms import QDQ_FORM  # noqa: F401 - ORT's int8 QDQ models are rows of this graph form
from . import dp4a

ORT_BUNDLE = "ort.webgpu.min.mjs"
"""The bundle with the webgpu, webnn and wasm providers."""
BACKENDS = {"native": ORT_BUNDLE, "jsep": "ort.min.mjs"}
"""ONNX Runtime Web's two WebGPU implementations and the bundle that has each: 'native', its C++
WebGPU execution provider compiled to WebAssembly (``onnxruntime-web/webgpu``, what transformers.js
loads; the default here), and 'jsep', its JavaScript execution provider (the default
``onnxruntime-web`` import). Both bundles also hold the webnn and wasm providers."""
DEFAULT_BACKEND = "native"
ACCURACY_LEVELS = ("0", "1", "2", "3", "4")
"""MatMulNBits' ``accuracy_level`` (the schema's default, when a node has none, is 0). On WebGPU,
the native implementation's kernels at level 4 quantize the activations to int8 per block and
multiply with DP4A, where the adapter has subgroups (not Apple's), K is a multiple of 128 and N of
16; JSEP's read no level."""
NBITS = (8, 4, 2)
"""The bits ORT runs as MatMulNBits nodes (float activations), where an accuracy level applies."""


def ort_build(version: str) -> EngineBuild:
    """An ONNX Runtime Web release: its dist/ bundles and wasm files (not their source maps)."""
    return EngineBuild(EngineName.ORT, version, f"onnxruntime-web-{version}",
                       packs=(Pack(f"onnxruntime-web@{version}", ("package/dist",), flat=True,
                                   suffixes=(".mjs", ".wasm")),),
                       present=(ORT_BUNDLE, "ort-wasm-simd-threaded.asyncify.wasm"))


ORT_BUILDS = (ort_build("1.30.0"), ort_build("1.31.0-dev.20260914-8d85527a0"))
"""Installed side by side by scripts/setup.sh (``--engine ort@VERSION``), the default first: the
1.30 release, and the 1.31 dev build transformers.js 4.3 pins and bundles."""
DEFAULT_ORT = ORT_BUILDS[0]
ORT_WEB_VERSION = DEFAULT_ORT.version
ORT_THREADS = max(1, min(4, os.cpu_count() or 1))
"""wasm threads asked for (pages are cross-origin isolated, so threads are possible); the
number in effect is what the page reports."""
WASM_QUANTIZERS = tuple(QUANTIZERS)
"""What the wasm provider's runners hold: ORT's CPU ``MatMulNBits`` takes float32 zero points
(one per block, ``(q - zero_point) * scale``) as well as packed uint8 ones, so every quantizer's
bytes (at FLOAT_ZERO_BITS). Its WebGPU and WebNN ``MatMulNBits`` take uint8 zero points only:
those runners hold the integer-zero quantizers (``INTEGER_ZERO``, OrtKindRunner's default)."""
FLOAT_ZERO_BITS = (4, 2)
"""The bits at which ORT's CPU ``MatMulNBits`` computes with float zero points. At 8 bits ORT Web
1.30 fails the run ("Only 2b and 4b quantization is supported for unpacked compute for now",
``matmul_nbits.cc``; seen in the quantizer sweep, 2026-11-29): refused before any page."""


BUFFER_CACHES = ("bucket", "simple", "lazyRelease", "disabled")
"""ONNX Runtime Web's WebGPU storage-buffer cache modes (its webgpu execution provider's
``storageBufferCacheMode``; transformers.js passes it through its session options): how freed
buffers are kept for reuse. ``bucket`` keeps them in size buckets, ``simple`` by exact size,
``lazyRelease`` frees them after each run, ``disabled`` at once. The first session on a device
sets it for every later one (each run is its own page, so its own device). ORT's own issue
tracker measured one model at 5.13 GB of live buffers with ``bucket`` and 3.73 GB with ``simple``."""
DEFAULT_BUFFER_CACHE = "bucket"
"""ORT Web's default storage-buffer cache mode (webgpu_buffer_cache config, 1.30)."""


DP4A_LEVEL = "4"
"""The accuracy level at which the native implementation's MatMulNBits may take int8 activations:
where a page times without ORT's profile (the decoders), it reads each layer's programs from one
more profiled run (``node_programs``)."""


def may_run_dp4a(run: RunSpec) -> bool:
    """Whether the run's MatMulNBits may take int8 activations: ORT's native WebGPU implementation
    at DP4A_LEVEL (where K, N and the adapter fit; the profile says where it did)."""
    return (run.platform is Platform.WEBGPU and (run.backend or DEFAULT_BACKEND) == "native"
            and run.accuracy_level == DP4A_LEVEL)


DP4A_PROGRAM = "DP4AMatMul"
"""How the native WebGPU implementation names the programs of its int8-activation MatMulNBits
path (DP4AMatMulQuantize, DP4AMatMulNBits, DP4AMatMulNBitsSmallM: contrib_ops/webgpu/quantization)."""


def act_from_programs(programs: tuple[str, ...]) -> str:
    """'int8' when a DP4A MatMulNBits program ran, 'float' when other MatMulNBits programs did, ''
    when the programs name none (no MatMulNBits node, or no profile)."""
    if any(DP4A_PROGRAM in p for p in programs):
        return "int8"
    return "float" if any("MatMulNBits" in p for p in programs) else ""


def check_backend(name: str) -> None:
    """ValueError naming ORT's WebGPU implementations, for one it does not have."""
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r} is not one of ONNX Runtime Web's on WebGPU: {', '.join(BACKENDS)}")


def check_accuracy_level(level: str) -> None:
    if str(level) not in ACCURACY_LEVELS:
        raise ValueError(f"accuracy level {level!r} is not one of MatMulNBits': {', '.join(ACCURACY_LEVELS)}")


def with_accuracy_level(model: bytes, level: str) -> bytes:
    """The model with ``accuracy_level`` set to ``level`` on every com.microsoft MatMulNBits node
    (an existing one replaced)."""
    import onnx
    from onnx import helper

    proto = onnx.load_from_string(model)
    for node in proto.graph.node:
        if node.op_type == "MatMulNBits" and node.domain == MS_DOMAIN:
            kept = [a for a in node.attribute if a.name != "accuracy_level"]
            del node.attribute[:]
            node.attribute.extend([*kept, helper.make_attribute("accuracy_level", int(level))])
    return proto.SerializeToString()


def check_buffer_cache(mode: str) -> None:
    """ValueError naming the modes, for a mode ORT Web does not have."""
    if mode not in BUFFER_CACHES:
        raise ValueError(f"buffer cache mode {mode!r} is not one of ONNX Runtime Web's: {', '.join(BUFFER_CACHES)}")


class OrtWebEngine(Engine):
    """ONNX Runtime Web on one execution provider (the subclasses below fix which)."""

    name = EngineName.ORT
    refusal_stages = ("session",)
    builds = ORT_BUILDS

    def weight_formats(self, workload: Workload, bits: int, act_bits: int = 32) -> tuple[str, ...]:
        """An ONNX file's precision variants at these bits (workloads/onnx_file/variants.py), one
        run each; ('',) for the models ORT builds from the harness's own bytes."""
        if isinstance(workload, OnnxFileWorkload):
            return workload.variants(bits, act_bits)
        return ("",)

    def session_options(self, run: RunSpec, graph_optimization: str = "all") -> dict[str, object]:
        """What every ORT page needs to load the bundle and open a session on this provider
        (``graph_optimization``: ORT's graphOptimizationLevel)."""
        return {"provider": self.platform.value, "device_type": run.webnn_device, "threads": ORT_THREADS,
                "assets": self.build(run).url, "bundle": BACKENDS[run.backend or DEFAULT_BACKEND],
                "backend": run.backend, "graph_optimization": graph_optimization, "buffer_cache": run.buffer_cache,
                "node_programs": may_run_dp4a(run)}

    def what_ran(self, run: RunSpec, job: EngineJob, page: PageReply, executed: Executed) -> Executed:
        """On WebGPU, the implementation the page found (a run on another than asked is invalid)
        and, from the kernel programs ORT's profile names, whether its MatMulNBits kernels took
        int8 activations (DP4A) or float ones. A lone matmul that took int8 ones, and a whole
        model's layers whose nodes ran DP4A programs, are checked against the reference of ORT's own
        activation rule (dp4a.py)."""
        if self.platform is not Platform.WEBGPU:
            return executed
        asked = run.backend or DEFAULT_BACKEND
        if page.backend not in BACKENDS:
            raise PageDataError(f"backend {page.backend!r:.30} is not one of {', '.join(BACKENDS)}")
        problem = executed.problem or (f"ran ORT's {page.backend} WebGPU implementation, not {asked}"
                                       if page.backend != asked else "")
        act = act_from_programs(page.programs)
        ran = dataclasses.replace(executed, backend=page.backend, problem=problem, act_executed=act)
        if act != "int8":
            return ran
        said = "ORT's kernels quantized the activations to int8 (DP4A, per 128 values, accuracy_level 4)"
        found: dp4a.Check | None = None
        if isinstance(job.prepared, PreparedWorkload):
            found = dp4a.matmul_check(job.prepared)
        elif isinstance(job.prepared, dp4a.MODELS) and executed.layers:
            int8 = {reply.name for reply in page.layers if act_from_programs(reply.programs) == "int8"}
            if int8:  # each layer's node, as the profile names its programs
                found = dp4a.model_check(job.prepared, int8)
                layers = tuple(dataclasses.replace(layer, act_dtype="int8") if layer.name in int8 else layer
                               for layer in executed.layers)
                ran = dataclasses.replace(ran, layers=layers)
                said += f" in {len(int8)} of {len(layers)} linear layers"
        if found is None:  # ONNX files: their reference of ORT's rule is not built yet
            note = f"{said}; the kernel check is against float activations, which that rounding alone may miss"
            return dataclasses.replace(ran, note="; ".join(filter(None, [ran.note, note])))
        check, slack = found
        note = f"{said}: the kernel check is against that rule's reference"
        return dataclasses.replace(ran, check=check, check_slack=slack, note="; ".join(filter(None, [ran.note, note])))

    def accuracy_levels(self, asked: tuple[str, ...], bits: int, act_bits: int) -> tuple[str, ...]:
        """The levels asked for, at the bits ORT runs as MatMulNBits with float activations."""
        return asked if asked and bits in NBITS and act_bits == 32 else ("",)


QDQ_WEBNN_OPTIMIZATION = "disabled"
"""ORT's ``graphOptimizationLevel`` for a lone matmul's int8 QDQ model on the WebNN provider (ORT
Web's default, 'all', everywhere else). With optimizations on, ORT's ConstantSharing (level 1)
merges the Q and DQ nodes' equal scalar scales into one initializer; the WebNN provider reshapes
it for each node, and Chromium folds a constant reshape only when the constant has one user, so
the scale is no longer a constant and the backend's int8 fusion (engines/webnn/forms.py) does not
happen: 20.2 against 11.2 ms at 128x768x3072 here (docs/history/webnn-integer-path.md; current
figures: docs/findings/integer-path.md). Every Q and DQ node holds its own scale and zero point (onnx_matmul.qdq_linear_nodes) for the same reason.
A whole exported encoder keeps 'all': without constant folding its shape arithmetic (Range,
Expand, Slice) falls to the CPU provider and the graph splits (203 against 83 ms for MiniLM)."""


class OrtKindRunner(KindRunner):
    """What every ORT kind runner built from the harness's bytes shares: the quantizers whose zero
    points its provider's MatMulNBits takes (the registry widens wasm's), and its refusals."""

    weight_quants = INTEGER_ZERO

    def refusal(self, engine: Engine, run: RunSpec) -> str:
        return super().refusal(engine, run) or qdq_refusal(run) or float_zero_refusal(run)

    def spec(self, engine: Engine, run: RunSpec, timing: TimingConfig, tensors: dict[str, bytes | Path],
             outputs: tuple[TensorSpec, ...], options: dict[str, Any], bits: int | None = None) -> JobSpec:
        set_accuracy_level(run, tensors)
        return super().spec(engine, run, timing, tensors, outputs, options, bits)


MODEL_TENSORS = ("model", "onnx_model")
"""The job tensors that carry an ORT run's ONNX model (a lone matmul's; a whole model's)."""


def set_accuracy_level(run: RunSpec, tensors: dict[str, bytes | Path]) -> None:
    """With ``run.accuracy_level`` set, the job's model (in ``tensors``, replaced in place, so the
    job serves the same bytes its spec names) with that level on every MatMulNBits node."""
    if not run.accuracy_level:
        return
    for key in MODEL_TENSORS:
        if key in tensors:
            model = tensors[key]
            tensors[key] = with_accuracy_level(model.read_bytes() if isinstance(model, Path) else model,
                                               run.accuracy_level)


def float_zero_refusal(run: RunSpec) -> str:
    """Why ORT's MatMulNBits cannot hold this run's float zero points at some layer's bits ('' when it can)."""
    if not QUANTIZERS[run.weight_quant].float_zero:
        return ""
    other = sorted(coded_bits(run.bits, run.workload) - set(FLOAT_ZERO_BITS), reverse=True)
    if not other:
        return ""
    return (f"ORT's MatMulNBits computes float zero points (the {run.weight_quant} quantizer's) at "
            f"{' and '.join(map(str, FLOAT_ZERO_BITS))} bits only, not {other[0]} (ORT Web {ORT_WEB_VERSION}: "
            "'Only 2b and 4b quantization is supported for unpacked compute')")


def holding(run: RunSpec) -> dict[str, object]:
    """How an ORT run's preparation holds its bytes (the prepare_* keywords): unsigned codes for
    MatMulNBits (values and zero points shifted by 2^(bits-1)); with int8 activations the int8 QDQ
    form's signed per-channel weights, its layers' int8 inputs and outputs calibrated."""
    qdq = run.act_bits == 8
    return {"unsigned": not qdq, "weight_quant": run.weight_quant, "act_bits": run.act_bits,
            "observer": run.observer, "out_int8": qdq}


def held_workload(run: RunSpec) -> Workload:
    """The run's workload as ORT holds it: in its int8 QDQ form, the layers the harness's fused
    WebNN graph holds in float32 held so too (a generating workload's ``int8_outputs_held``)."""
    if run.act_bits == 8 and hasattr(run.workload, "int8_outputs_held"):
        return run.workload.int8_outputs_held(run.bits, run.weight_block, run.seed, run.observer)
    return run.workload


def qdq_refusal(run: RunSpec) -> str:
    """Why ORT cannot build this run's int8 QDQ model ('' when it can or the run has float inputs)."""
    if run.act_bits == 8 and (run.bits != 8 or run.granularity != "per-channel"):
        return ("int8 activations on ORT are its int8 QDQ models, built with 8-bit per-channel weights "
                f"(--bits 8 --granularity per-channel), not {run.bits}-bit {run.granularity} ones")
    return ""


class OrtWebGpu(OrtWebEngine):
    platform = Platform.WEBGPU

    def buffer_caches(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        return asked or (DEFAULT_BUFFER_CACHE,)

    def backends(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        return asked or (DEFAULT_BACKEND,)


class OrtWebNN(OrtWebEngine):
    platform = Platform.WEBNN


class OrtWasm(OrtWebEngine):
    platform = Platform.WASM

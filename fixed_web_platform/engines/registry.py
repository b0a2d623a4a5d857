"""The explicit registries: every engine (one line per engine and platform), and the table of
what each runs (one line per engine, platform and workload kind). A run whose (engine, platform,
kind) is not in ``RUNS`` is refused when the plan is built, with ``refusal``'s reason."""

from __future__ import annotations

from collections.abc import Mapping

from ..page_protocol import PageReply
from ..run_spec import RunSpec, TimingConfig
from ..vocabulary import EngineName, Outcome, Platform, parse_enum
from .base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from .builds import EngineBuild, EngineChoice, choose
from .ort import WASM_QUANTIZERS, OrtWasm, OrtWebGpu, OrtWebNN
from .ort.decoder import OrtDecoder
from .ort.encoder import OrtEncoder
from .ort.matmul import OrtMatmul
from .ort.onnx import OrtOnnxFile
from .ort.speech import OrtSpeech
from .transformersjs import TjsWasm, TjsWebGpu, TjsWebNN
from .transformersjs.decoder import TjsDecoder
from .transformersjs.encoder import TjsEncoder
from .transformersjs.speech import TjsSpeech
from .webnn import WebnnEngine
from .webnn.decoder import WebnnDecoder
from .webnn.encoder import WebnnEncoder
from .webnn.matmul import WebnnMatmul
from .webnn.speech import WebnnSpeech
from .wgsl import WgslEngine
from .wgsl.decoder import WgslDecoder
from .wgsl.encoder import WgslEncoder
from .wgsl.matmul import WgslMatmul
from .wgsl.speech import WgslSpeech
from .wllama import WllamaWasm, WllamaWebGpu
from .wllama.decoder import WllamaDecoder

ENGINES: tuple[Engine, ...] = (
    WgslEngine(),
    WebnnEngine(),
    OrtWebGpu(),
    OrtWebNN(),
    OrtWasm(),
    WllamaWasm(),
    WllamaWebGpu(),
    TjsWasm(),
    TjsWebGpu(),
    TjsWebNN(),
)

ENGINE_BUILDS: dict[EngineName, tuple[EngineBuild, ...]] = {e.name: e.builds for e in ENGINES if e.builds}
"""Every engine's installed builds (the default first), as its module declares them."""


def engine_choice(value: EngineName | EngineChoice | str) -> EngineChoice:
    """An engine as a user names it (``ort``, ``ort@1.31``: a build's version or a prefix of one),
    with the build's full version; ValueError naming the engines or the builds otherwise."""
    if isinstance(value, EngineChoice):
        return value
    name, sep, asked = str(value).partition("@")
    engine = EngineName(parse_enum(EngineName, name, "engine"))
    if not sep:
        return EngineChoice(engine)
    if not asked:
        raise ValueError(f"engine {value!r}: write {engine}@VERSION")
    return EngineChoice(engine, choose(engine, ENGINE_BUILDS.get(engine, ()), asked).version)


HARNESS, ORT, WLLAMA, TJS = EngineName.HARNESS, EngineName.ORT, EngineName.WLLAMA, EngineName.TRANSFORMERSJS
WEBGPU, WEBNN, WASM = Platform.WEBGPU, Platform.WEBNN, Platform.WASM

RUNS: dict[tuple[EngineName, Platform, str], KindRunner] = {
    (HARNESS, WEBGPU, "matmul"): WgslMatmul(),
    (HARNESS, WEBGPU, "encoder"): WgslEncoder(),
    (HARNESS, WEBGPU, "decoder"): WgslDecoder(),
    (HARNESS, WEBGPU, "speech"): WgslSpeech(),
    (HARNESS, WEBNN, "matmul"): WebnnMatmul(),
    (HARNESS, WEBNN, "encoder"): WebnnEncoder(),
    (HARNESS, WEBNN, "decoder"): WebnnDecoder(),
    (HARNESS, WEBNN, "speech"): WebnnSpeech(),
    (ORT, WEBGPU, "matmul"): OrtMatmul(),
    (ORT, WEBGPU, "encoder"): OrtEncoder(),
    (ORT, WEBGPU, "decoder"): OrtDecoder(),
    (ORT, WEBNN, "matmul"): OrtMatmul(),
    (ORT, WEBNN, "encoder"): OrtEncoder(),
    (ORT, WEBNN, "decoder"): OrtDecoder(),
    (ORT, WASM, "matmul"): OrtMatmul(WASM_QUANTIZERS),
    (ORT, WASM, "encoder"): OrtEncoder(WASM_QUANTIZERS),
    (ORT, WASM, "decoder"): OrtDecoder(WASM_QUANTIZERS),
    (ORT, WEBGPU, "onnx"): OrtOnnxFile(),
    (ORT, WEBNN, "onnx"): OrtOnnxFile(),
    (ORT, WASM, "onnx"): OrtOnnxFile(WASM_QUANTIZERS),
    (ORT, WEBGPU, "speech"): OrtSpeech(),
    (ORT, WEBNN, "speech"): OrtSpeech(),
    (ORT, WASM, "speech"): OrtSpeech(WASM_QUANTIZERS),
    (WLLAMA, WASM, "decoder"): WllamaDecoder(),
    (WLLAMA, WEBGPU, "decoder"): WllamaDecoder(),
    (TJS, WASM, "encoder"): TjsEncoder(WASM_QUANTIZERS),
    (TJS, WEBGPU, "encoder"): TjsEncoder(),
    (TJS, WEBNN, "encoder"): TjsEncoder(),
    (TJS, WASM, "decoder"): TjsDecoder(WASM_QUANTIZERS),
    (TJS, WEBGPU, "decoder"): TjsDecoder(),
    (TJS, WEBNN, "decoder"): TjsDecoder(),
    (TJS, WASM, "speech"): TjsSpeech(WASM_QUANTIZERS),
    (TJS, WEBGPU, "speech"): TjsSpeech(),
    (TJS, WEBNN, "speech"): TjsSpeech(),
}
"""(engine, platform, workload kind) -> the module that runs it, with its page runner."""


def engine_for(name: EngineName, platform: Platform) -> Engine | None:
    return next((e for e in ENGINES if e.name is name and e.platform is platform), None)


def engines_for_platform(platform: Platform) -> list[EngineName]:
    return [e.name for e in ENGINES if e.platform is platform]


def kind_runner(name: EngineName, platform: Platform, kind: str) -> KindRunner | None:
    return RUNS.get((name, platform, kind))


def kinds_run_by(name: EngineName) -> list[str]:
    """The workload kinds ``name`` runs on some platform, in the table's order."""
    return list(dict.fromkeys(k for (e, _, k) in RUNS if e is name))


def _who_runs(kind: str, act_bits: int | None = None, weight_quant: str | None = None) -> str:
    """'engines that do: harness/webgpu, ...' for a kind (at these activation bits, with weights
    from this quantizer)."""
    runs_it = sorted({f"{e}/{p}" for (e, p, k), r in RUNS.items()
                      if k == kind and (act_bits is None or act_bits in r.act_bits)
                      and (weight_quant is None or weight_quant in r.weight_quants)})
    return "engines that do: " + ", ".join(runs_it) if runs_it else "no engine does yet"


def refusal(name: EngineName, platform: Platform, kind: str) -> str:
    """Why no registered module runs this kind on this engine and platform ('' when one does)."""
    if kind_runner(name, platform, kind) is not None:
        return ""
    return f"engine {name} on {platform} does not run {kind} workloads ({_who_runs(kind)})"


def planned_refusal(run: RunSpec) -> str:
    """Why ``run`` cannot be attempted, from the table and its kind runner ('' if it can): what
    the plan records in ``RunSpec.refused`` before any browser starts."""
    engine, runner = _pair(run)
    if runner is None or engine is None:
        return refusal(run.engine, run.platform, run.workload.kind)
    why = runner.refusal(engine, run)
    if why and run.act_bits not in runner.act_bits:
        why += f" ({_who_runs(run.workload.kind, run.act_bits)})"
    elif why and run.weight_quant not in runner.weight_quants:
        why += f" ({_who_runs(run.workload.kind, weight_quant=run.weight_quant)})"
    return why


def _pair(run: RunSpec) -> tuple[Engine | None, KindRunner | None]:
    return engine_for(run.engine, run.platform), kind_runner(run.engine, run.platform, run.workload.kind)


async def build_job(run: RunSpec, timing: TimingConfig, browser: BrowserFacts) -> EngineJob | Refusal:
    """The page's job for ``run`` from its engine's module for its kind, or why there is none."""
    why = run.refused or planned_refusal(run)  # a plan saved by another version may lack it
    engine, runner = _pair(run)
    if why or engine is None or runner is None:
        return Refusal(Outcome.UNSUPPORTED, why)
    job = await runner.job(engine, run, timing, browser)
    if isinstance(job, EngineJob) and run.platform is Platform.WEBGPU and job.largest_constant[1]:
        too_large = buffer_limit_refusal(job.largest_constant, await browser.adapter_limits(), runner.binds_whole)
        if too_large:
            return Refusal(Outcome.UNSUPPORTED, f"{run.engine} on WebGPU: {too_large}")
    return job


def buffer_limit_refusal(constant: tuple[str, int], limits: Mapping[str, int], binds_whole: bool = False) -> str:
    """Why a model whose largest constant is ``constant`` (name, bytes) cannot load on an adapter
    with ``limits``, or '': no WebGPU buffer may exceed maxBufferSize (the WebGPU spec's
    createBuffer rule), and an engine that ``binds_whole`` buffers (the harness's kernels) none
    past maxStorageBufferBindingSize. For ONNX Runtime that is not a refusal: it binds a larger
    buffer in segments (measured: a 163,840,000-byte MatMul weight and Gather table ran right on
    Firefox's 134,217,728-byte binding limit; docs/concepts/memory.md)."""
    name, size = constant
    for limit_name in ("maxBufferSize", *(("maxStorageBufferBindingSize",) if binds_whole else ())):
        limit = limits.get(limit_name)
        if limit and size > limit:
            return (f"its largest constant, {name} ({size:,} bytes), exceeds the adapter's {limit_name} {limit:,}"
                    + (": no WebGPU buffer can hold it" if limit_name == "maxBufferSize" else
                       ": the harness's kernels bind each tensor whole"))
    return ""


def read_reply(run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
    """What ran, as the module that built ``job`` reads the page's reply."""
    engine, runner = _pair(run)
    if engine is None or runner is None:
        raise ValueError(f"no module runs {run.workload.kind} on {run.engine}/{run.platform}")
    return engine.what_ran(run, job, page, runner.interpret(engine, run, job, page))

"""transformers.js (npm ``@huggingface/transformers``) as an engine: the library most people call to
run Hugging Face models in a browser, one engine per device it takes (``wasm``, ``webgpu``,
``webnn``), running its pipelines as users call them on model folders in its own layout
(folders.py), one run per dtype (its names: fp32, fp16, q8, int8, uint8, q4, q4f16, bnb4).

It runs fully offline: the page loads ``transformers.js`` from the local server, turns remote
models off, local models on, the browser's and the wasm caches off, and points ORT's wasm at
the local copy of the build transformers.js bundles (ONNX Runtime Web 1.31-dev); every file the
library asks for is fetched through the run's job. With ``FWP_TJS_ORT=harness`` the page hands it
the harness's ONNX Runtime Web 1.30 instead (``globalThis[Symbol.for('onnxruntime')]``), so the
library's cost and the runtime's version can be told apart.

Kinds: encoder.py (the ``feature-extraction`` pipeline), decoder.py (``text-generation``),
speech.py (``automatic-speech-recognition``); each runs the harness's made folder of its model or
the user's own (``--model DIR``: the dtype files it holds, none made; without weights its fp32
graph on onnxruntime's CPU is the float reference).
"""

from __future__ import annotations

import asyncio
import os
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...precision.quantizers import INTEGER_ZERO, QUANTIZERS
from ...vocabulary import HELD_FORMAT, EngineName, Outcome, Platform
from ...workloads import Workload
from ...workloads.onnx_file.variants import VariantRefused
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from ..builds import EngineBuild, Pack
from ..ort import DEFAULT_BUFFER_CACHE, DEFAULT_ORT, ORT_BUNDLE, ORT_THREADS, torch_ops
from .folders import DTYPES, HELD_BITS, HELD_DTYPE, WIDTHS, ModelFolder, user_folder
from .placement import executed
from .prepared import PreparedTjs

TJS_MODULE = "transformers.js"
TJS_ORT_BUILD = "1.31.0-dev.20260914-8d85527a0"
"""The ONNX Runtime Web build transformers.js 4.3 pins and bundles."""


def tjs_build(version: str) -> EngineBuild:
    """A transformers.js release: only what a page loads: dist/transformers.js (self-contained ESM
    with its ONNX Runtime Web build inside) and the asyncify wasm pair of that ORT build, which it
    would fetch from a CDN (taken from ORT's own tarball; set-up checks the library pins it)."""
    return EngineBuild(
        EngineName.TRANSFORMERSJS, version, f"transformers-{version}",
        packs=(Pack(f"@huggingface/transformers@{version}",
                    ("package/dist/transformers.js", "package/package.json", "package/LICENSE"), flat=True),
               Pack(f"onnxruntime-web@{TJS_ORT_BUILD}", ("package/dist/ort-wasm-simd-threaded.asyncify.mjs",
                                                         "package/dist/ort-wasm-simd-threaded.asyncify.wasm"), flat=True)),
        present=(TJS_MODULE, "ort-wasm-simd-threaded.asyncify.wasm"),
        requires=(("package.json", f'"onnxruntime-web": "{TJS_ORT_BUILD}"'),))


TJS_BUILDS = (tjs_build("4.3.2"), tjs_build("4.3.1"))
"""Installed side by side by scripts/setup.sh (``--engine transformersjs@VERSION``), the default first."""
TJS_ORT_ENV = "FWP_TJS_ORT"
"""'bundled' (the default: the ORT build transformers.js ships) or 'harness' (the harness's ORT
engine's default build): which ONNX Runtime the library runs on; the row's engine_version says
which ran."""
TJS_ORTS = ("bundled", "harness")
HALF_DTYPES = ("fp16", "q4f16")
"""dtypes whose arithmetic is float16 outside wasm (ORT's CPU provider casts float16 nodes up)."""


def tjs_ort() -> str:
    value = os.environ.get(TJS_ORT_ENV, "").strip() or TJS_ORTS[0]
    if value not in TJS_ORTS:
        raise ValueError(f"{TJS_ORT_ENV}={value!r}: the ONNX Runtime under transformers.js is one of "
                         f"{', '.join(TJS_ORTS)}")
    return value


class TransformersJsEngine(Engine):
    """transformers.js on one device (the subclasses below fix which)."""

    name = EngineName.TRANSFORMERSJS
    refusal_stages = ("load model",)
    dtype_names = {**WIDTHS, HELD_FORMAT: HELD_BITS}
    held_on_request = True

    builds = TJS_BUILDS

    def assets(self) -> dict[str, Path]:
        return super().assets() | {DEFAULT_ORT.url: DEFAULT_ORT.directory}

    def weight_formats(self, workload: Workload, bits: int, act_bits: int = 32) -> tuple[str, ...]:
        """transformers.js's dtypes at these bits, one run each (--dtype keeps those it names), and
        at HELD_BITS the held variant (the harness's quantizers' codes, one run per --weight-quant:
        folders.with_held); ('',) where it has none, which the kind runner refuses with the reason."""
        if act_bits != 32:
            return ("",)
        held = (HELD_FORMAT,) if bits == HELD_BITS else ()
        return (*(d for d in DTYPES if WIDTHS[d] == bits), *held) or ("",)

    def page_options(self, run: RunSpec) -> dict[str, object]:
        """What every transformers.js page needs: the library, the device, the ORT under it."""
        device = f"webnn-{run.webnn_device}" if self.platform is Platform.WEBNN else self.platform.value
        injected = tjs_ort() == "harness"
        return {"provider": self.platform.value, "device": device, "device_type": run.webnn_device,
                "dtype": HELD_DTYPE if run.weight_format == HELD_FORMAT else run.weight_format,
                "threads": ORT_THREADS, "assets": self.build(run).url,
                "buffer_cache": run.buffer_cache,
                "module": TJS_MODULE, "ort": {"assets": DEFAULT_ORT.url, "bundle": ORT_BUNDLE} if injected else None}


class TjsKindRunner(KindRunner):
    """What every transformers.js kind runner shares: its refusals before a page loads, and its job
    (the folder's files for the run's dtype served through the job, the library's options). A kind
    says how its run is prepared (``preparer(workload, dtype, seed)``: the run's references,
    prepared.judge_files, and the model's folder with its dtype; cached, and run off the event loop:
    an export or a dtype file takes seconds to minutes) and what else its page gets (``page``)."""

    preparer: ClassVar[Callable[[Any, str, int, str], tuple[PreparedTjs, ModelFolder]]]
    runs_onnx_folders = True
    weight_quants = INTEGER_ZERO
    """The held variant's quantizers whose zero points the device's MatMulNBits takes (the registry
    gives wasm's every one: ORT's CPU kernel takes float zero points at 4 bits)."""
    supports = torch_ops.SUPPORTS

    def lowers_graph(self, run: RunSpec) -> bool:
        """A transformers.js folder's own files run as given; the harness's models are exported
        from their op graph (exports.py)."""
        return user_folder(run.workload.model, run.workload.kind) is None

    @abstractmethod
    def page(self, run: RunSpec, prepared: PreparedTjs) -> tuple[dict[str, bytes], dict[str, Any]]:
        """The kind's own tensors (its inputs) and page options."""

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        assert isinstance(engine, TransformersJsEngine)
        try:
            prepared, folder = await asyncio.to_thread(self.preparer, run.workload, run.weight_format, run.seed,
                                                       run.weight_quant)
        except VariantRefused as exc:
            return Refusal(Outcome.UNSUPPORTED, str(exc))
        files = folder.for_dtype(prepared.dtype)
        keys = {name: f"file{i}" for i, name in enumerate(files)}
        inputs, options = self.page(run, prepared)
        tensors: dict[str, bytes | Path] = {**inputs, **{keys[n]: p for n, p in files.items()}}
        options = {**engine.page_options(run), **options, "files": keys, "weight_bytes": prepared.weight_bytes,
                   "external_data": folder.data_chunks(prepared.dtype)}
        inventory = prepared.inventory
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options), tensors=tensors,
            prepared=prepared, note=prepared.unloadable, refusal_is_unsupported=not prepared.unloadable,
            weight_format=run.weight_format, weight_dtype=inventory.matmul_precision(),
            details={"tjs_files": {n: p.stat().st_size for n, p in files.items()}, "tjs_folder": folder.made_by,
                     "onnx_inventory": {n: inv.to_json() for n, inv in prepared.inventories.items()}},
            largest_constant=inventory.largest)

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        half = run.weight_format in HALF_DTYPES and engine.platform is not Platform.WASM
        return executed(engine, run, page, "f16" if half else "f32")

    def refusal(self, engine: Engine, run: RunSpec) -> str:
        why = super().refusal(engine, run)
        if why:
            return why
        if not run.weight_format:
            return (f"transformers.js has no dtype at {run.bits} bits (its dtypes: "
                    + ", ".join(f"{d} {WIDTHS[d]}" for d in DTYPES) + ")")
        held = run.weight_format == HELD_FORMAT
        if held and QUANTIZERS[run.weight_quant].calibrated and run.workload.kind not in ("encoder", "decoder"):
            return (f"the {run.weight_quant} quantizer calibrates on the graph's inputs, which the harness makes for "
                    f"transformers.js's encoder and decoder graphs, not its {run.workload.kind} graphs yet")
        user = user_folder(getattr(run.workload, "model", ""), run.workload.kind)
        needs = "fp32" if held else run.weight_format  # the held files are made from the fp32 graphs
        if user is not None and user.lacks(needs):
            return (f"the folder has no {' or '.join(user.lacks(needs))}{' to quantize' if held else ''} (it holds "
                    f"{', '.join(user.dtypes())})")
        return ""


class TjsWasm(TransformersJsEngine):
    platform = Platform.WASM


class TjsWebGpu(TransformersJsEngine):
    platform = Platform.WEBGPU

    def buffer_caches(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        """ONNX Runtime's modes (engines/ort: BUFFER_CACHES), set through the library's session options."""
        return asked or (DEFAULT_BUFFER_CACHE,)


class TjsWebNN(TransformersJsEngine):
    platform = Platform.WEBNN

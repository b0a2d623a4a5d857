"""The run matrix, built, validated and saved before anything launches.

rounds (repetitions) x browsers x workloads x bits x engines x platforms (x an engine's weight
formats at those bits, where it names several: wllama's GGUF types), with engines and
platforms innermost so the rows of one configuration (harness WebGPU, harness WebNN, ORT on each
provider) sit side by side in one browser session. Repetitions are rounds, outermost: each round
runs the whole matrix in fresh browser sessions, so the repetitions of a configuration are spread
over the sweep's time and over browser sessions (asv's rounds), the independent units compare
judges on. Every user-facing check of a run happens here or in
the vocabulary, so the CLI, the Python API and ``--resume`` share one path.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

from .browsers.products import BrowserChoice, browser_choice
from .engines.builds import EngineChoice
from .engines.registry import engine_choice, engine_for, engines_for_platform, kinds_run_by, planned_refusal
from .engines.ort import check_accuracy_level, check_backend, check_buffer_cache
from .engines.webnn.forms import QDQ_FORM, check_form
from .formats import transformersjs_folder
from .precision.observers import OBSERVERS
from .precision.quantizers import DEFAULT_QUANTIZER, check_quantizer
from .results.writer import write_atomically
from .run_spec import RunSpec, TimingConfig, holds_codes
from .vocabulary import (
    ACT8_WEIGHT_BITS,
    ACT_BITS,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GRANULARITY,
    HELD_FORMAT,
    SCHEMA_VERSION,
    WEBNN_DEVICES,
    BrowserName,
    EngineName,
    Platform,
    PrecisionMode,
    block_for,
    parse_bits,
)
from .workloads import ONNX_FILE, Workload

DEFAULT_OBSERVER = "minmax"


def default_engines(workloads: Sequence[Workload]) -> list[EngineName]:
    """The engines a sweep runs when none is named: ONNX Runtime Web for users' ONNX files (no
    other engine runs them), transformers.js for folders in its layout, the harness's own engines
    otherwise."""
    if workloads and all(w.kind == ONNX_FILE.name for w in workloads):
        return [EngineName.ORT]
    if workloads and all(transformersjs_folder.is_folder(getattr(w, "model", "")) for w in workloads):
        return [EngineName.TRANSFORMERSJS]
    return [EngineName.HARNESS]


def build_plan(
    browsers: Sequence[BrowserName | BrowserChoice | str],
    platforms: Sequence[Platform],
    workloads: Sequence[Workload],
    bits: Sequence[int],
    *,
    engines: Sequence[EngineName | EngineChoice | str] = (EngineName.HARNESS,),
    repetitions: int = 1,
    block_size: int = DEFAULT_BLOCK_SIZE,
    precision_mode: PrecisionMode = PrecisionMode.STANDARD,
    seed: int = 0,
    webnn_device: str = "cpu",
    act_bits: Sequence[int] = (32,),
    observer: str | Sequence[str] = DEFAULT_OBSERVER,
    granularity: str | Sequence[str] = DEFAULT_GRANULARITY,
    graph_form: str | Sequence[str] = "",
    buffer_cache: Sequence[str] = (),
    backend: Sequence[str] = (),
    accuracy_level: Sequence[str | int] = (),
    weight_quant: str | Sequence[str] = DEFAULT_QUANTIZER,
    dtypes: Sequence[str] = (),
) -> list[RunSpec]:
    """Validate everything up front (bad bits, shapes, block sizes, engine/platform pairs no
    engine can run fail before any launch). ``act_bits`` 8 adds int8-activation runs for the
    8- and 4-bit weights (W8A8, W4A8), one per ``observer`` (a name or several), side by side.
    A run whose workload kind (or activation precision) its engine does not run is planned as
    refused (``RunSpec.refused``): its row says why, and no browser starts for it.
    ``granularity`` (one or several of vocabulary.GRANULARITIES) groups the 8/4/2-bit weights;
    ``graph_form`` (one or several; '' the engine's default) multiplies the runs of engines that
    build several forms (the harness's WebNN graphs: engines/webnn/forms.py). ``weight_quant`` (one
    or several of precision/quantizers.QUANTIZERS) multiplies the blockwise 8/4/2-bit runs of
    engines whose bits name the format (per-channel weights and wllama's GGUF types round by their
    own rule: one run each, whatever the quantizers); an engine that cannot hold a quantizer's bytes
    refuses its runs. ``buffer_cache`` (ONNX Runtime's WebGPU storage-buffer cache modes; none: its
    default) multiplies the runs of engines that take one (ORT and transformers.js on WebGPU); ``backend``
    (ONNX Runtime Web's WebGPU implementations, native and jsep; none: native) those of ORT on WebGPU;
    ``accuracy_level`` (MatMulNBits' levels, 0-4; none: the model's own) those of ORT at 8/4/2 bits
    with float activations. ``dtypes`` (--dtype) keeps, of the weight formats of engines that name theirs
    by dtype (transformers.js), those it names. A browser or an engine may be named with a
    build (``chrome@chromium``, ``ort@1.31``: browsers/products.browser_choice,
    engines/registry.engine_choice), each its own runs side by side: an engine's builds run in the
    same browser session, one after another (page loads interleaved), a browser's in sessions of
    their own, round after round."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, got {repetitions}")
    if webnn_device not in WEBNN_DEVICES:
        raise ValueError(f"WebNN device {webnn_device!r} is not one of {', '.join(WEBNN_DEVICES)}")
    if block_size <= 0:
        raise ValueError(f"block size must be positive, got {block_size}")
    bits = [parse_bits(b) for b in bits]
    browsers = list(dict.fromkeys(browser_choice(b) for b in browsers))
    engines = list(dict.fromkeys(engine_choice(e) for e in engines))
    act_bits = list(dict.fromkeys(int(a) for a in act_bits))
    observers = list(dict.fromkeys([observer] if isinstance(observer, str) else observer))
    unknown = [a for a in act_bits if a not in ACT_BITS]
    if unknown or not act_bits:
        raise ValueError(f"activation bits {unknown[0] if unknown else 'none'}: use 32 (float) or 8 (int8)")
    if 8 in act_bits:
        if not any(b in ACT8_WEIGHT_BITS for b in bits):
            raise ValueError("--act-bits 8 runs int8 activations with 8- or 4-bit weights (W8A8, W4A8): "
                             "add --bits 8 or 4")
        unknown_observers = [o for o in observers if o not in OBSERVERS]
        if unknown_observers or not observers:
            raise ValueError(f"observer {unknown_observers[0] if unknown_observers else 'none'!r} is "
                             f"not one of {', '.join(OBSERVERS)}")
    granularities = list(dict.fromkeys([granularity] if isinstance(granularity, str) else granularity))
    forms = tuple(dict.fromkeys([graph_form] if isinstance(graph_form, str) else graph_form))
    caches = tuple(dict.fromkeys(buffer_cache))
    for mode in caches:
        check_buffer_cache(mode)
    backends = tuple(dict.fromkeys(backend))
    for name in backends:
        check_backend(name)
    levels = tuple(dict.fromkeys(str(level) for level in accuracy_level))
    for level in levels:
        check_accuracy_level(level)
    quantizers = list(dict.fromkeys([weight_quant] if isinstance(weight_quant, str) else weight_quant))
    if not quantizers:
        raise ValueError("no weight quantizer given")
    for q in quantizers:
        check_quantizer(q)
    chosen = [q for q in quantizers if q != DEFAULT_QUANTIZER]
    if chosen and not any(holds_codes(b, w) for b in bits for w in workloads):
        raise ValueError(f"--weight-quant {chosen[0]} quantizes 8-, 4- or 2-bit weights, and --bits "
                         f"{' '.join(map(str, bits))} holds none: add --bits 8, 4 or 2")
    for g in granularities:
        block_for(g, block_size)  # the one check of a granularity's name
    for form in forms:
        check_form(form)
    if QDQ_FORM in forms and 8 not in act_bits:
        raise ValueError(f"graph form {QDQ_FORM} quantizes each layer's input and output to int8: add --act-bits 8")
    for workload in workloads:
        for b in bits:
            for g in granularities:
                workload.validate(b, block_for(g, block_size))
    pairs = [(e, p) for e in engines for p in dict.fromkeys(platforms) if engine_for(e.name, p) is not None]
    if caches and not any(engine_for(e.name, p).buffer_caches(caches) != ("",) for e, p in pairs):
        raise ValueError(f"--buffer-cache {caches[0]} sets ONNX Runtime's WebGPU buffer cache: add --engine ort or "
                         "transformersjs and --platform webgpu")
    if backends and not any(engine_for(e.name, p).backends(backends) != ("",) for e, p in pairs):
        raise ValueError(f"--backend {backends[0]} picks ONNX Runtime Web's WebGPU implementation: add --engine ort "
                         "and --platform webgpu")
    if levels and not any(engine_for(e.name, p).accuracy_levels(levels, b, 32) != ("",)
                          for e, p in pairs for b in bits):
        raise ValueError(f"--accuracy-level {levels[0]} is set on ONNX Runtime's MatMulNBits nodes: add --engine ort "
                         "and --bits 8, 4 or 2")
    for platform in dict.fromkeys(platforms):
        if not any(p == platform for _, p in pairs):
            runs_it = ", ".join(str(e) for e in engines_for_platform(platform)) or "none"
            raise ValueError(f"no chosen engine runs platform {platform} (engines that do: {runs_it})")
    runs: list[RunSpec] = []
    for rep in range(repetitions):
        for browser in browsers:
            for workload in dict.fromkeys(workloads):
                for b in dict.fromkeys(bits):
                    activations = [(a, o) for a in act_bits for o in (observers if a != 32 else [""])
                                   if a == 32 or b in ACT8_WEIGHT_BITS]  # int8: 8/4-bit weights only
                    groupings = granularities if b <= 8 else [DEFAULT_GRANULARITY]
                    quants = quantizers if holds_codes(b, workload) else [DEFAULT_QUANTIZER]
                    for (acts, obs), group, wq in itertools.product(activations, groupings, quants):
                        if group != DEFAULT_GRANULARITY and wq != quants[0]:
                            continue  # per-channel weights are symmetric minmax (precision/held.py): once
                        for engine, platform in pairs:
                            runner = engine_for(engine.name, platform)
                            assert runner is not None
                            formats = runner.weight_formats(workload, b, acts)
                            if runner.held_on_request and not (chosen or HELD_FORMAT in dtypes):
                                formats = tuple(f for f in formats if f != HELD_FORMAT) or ("",)
                            if dtypes and runner.dtype_names:  # the held runs a quantizer asks for stay
                                formats = tuple(f for f in formats if f in dtypes or f == HELD_FORMAT and chosen)
                            for fmt, form, cache, impl, level in itertools.product(
                                    formats, runner.graph_forms(forms, acts), runner.buffer_caches(caches),
                                    runner.backends(backends), runner.accuracy_levels(levels, b, acts)):
                                coded = fmt in ("", HELD_FORMAT)  # the quantizer makes its codes
                                if not coded and wq != quants[0]:
                                    continue  # a named format (wllama's GGUF types) rounds by its own rule: once
                                run = RunSpec(
                                    run_id=len(runs), browser=browser.name, browser_build=browser.build,
                                    engine=engine.name, engine_build=engine.build, platform=platform,
                                    workload=workload, bits=b, block_size=block_size, repetition=rep,
                                    precision_mode=precision_mode, seed=seed, webnn_device=webnn_device,
                                    act_bits=acts, observer=obs, weight_format=fmt, granularity=group,
                                    graph_form=form, buffer_cache=cache, backend=impl, accuracy_level=level,
                                    weight_quant=wq if group == DEFAULT_GRANULARITY and coded else DEFAULT_QUANTIZER,
                                )
                                runs.append(dataclasses.replace(run, refused=planned_refusal(run)))
    return runs


def check_engines_fit(engines: Sequence[EngineName | EngineChoice | str], workloads: Sequence[Workload]) -> None:
    """ValueError when an engine the user named runs none of the sweep's workload kinds on any
    platform (a column of refused rows nobody meant to ask for: transformers.js on the default
    sweep's matmuls). The CLI and the API call it on the engines they were given; ``build_plan``
    itself plans such runs as refused, and an engine that runs a kind elsewhere but not on a chosen
    platform plans refused rows that say so (a nightly matrix cell)."""
    kinds = list(dict.fromkeys(w.kind for w in workloads))
    for engine in dict.fromkeys(engine_choice(e).name for e in engines):
        runs = kinds_run_by(engine)
        if not set(kinds) & set(runs):
            hint = ": name a model with --model" if kinds == ["matmul"] else ""
            raise ValueError(f"--engine {engine} runs {', '.join(runs)} workloads, none of this sweep's "
                             f"({', '.join(kinds)}){hint}")


PLAN_FILE = "plan.json"


def save_plan(directory: Path, runs: Sequence[RunSpec], timing: TimingConfig) -> Path:
    """Write the plan beside the results so an interrupted sweep can be resumed exactly."""
    path = directory / PLAN_FILE
    doc = {
        "schema_version": SCHEMA_VERSION,
        "timing": dataclasses.asdict(timing),
        "runs": [r.to_json() for r in runs],
    }
    write_atomically(path, json.dumps(doc, indent=1) + "\n")  # never an empty plan.json
    return path


def load_plan(directory: Path) -> tuple[list[RunSpec], TimingConfig]:
    path = directory / PLAN_FILE
    if not path.is_file():
        raise ValueError(f"{directory} has no {PLAN_FILE}: not a results folder that can be resumed")
    try:
        doc = json.loads(path.read_text())
        if int(doc.get("schema_version", 0)) > SCHEMA_VERSION:
            raise ValueError(f"{path}: schema version {doc['schema_version']} is newer than this "
                             f"tool understands ({SCHEMA_VERSION})")
        return [RunSpec.from_json(r) for r in doc["runs"]], TimingConfig(**doc["timing"])
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a readable plan ({type(exc).__name__}: {exc})") from None

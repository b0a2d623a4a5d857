"""Importable async API for notebooks and asyncio code: the same plan path as the CLI (plan.json
saved first, resumable), rows returned as dicts.

    rows = await run_real_webnn_test(browser="chrome", bits=[8, 4], experimental_precision=True)
    rows = await run_real_webnn_test(model="all-MiniLM-L6-v2", browser="chrome", bits=4,
                                     experimental_precision=True, mixed_precision=False)
    rows = await run_real_test([Platform.WEBGPU, Platform.WASM], engines=["harness", "ort"])
    rows = await resume_test("results/<sweep>")   # finish an interrupted sweep
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import sweep
from .browsers.products import browser_choice, parse_browser_args, parse_browser_prefs
from .engines.registry import engine_choice
from .harness.runner import SweepOptions
from .harness.server import LOOPBACK
from .plan import DEFAULT_OBSERVER, build_plan, check_engines_fit, default_engines
from .precision.quantizers import DEFAULT_QUANTIZER
from .progress import PlainProgress
from .run_spec import DEFAULT_TIMING, MODEL_TIMING, TimingConfig
from .vocabulary import (
    DEFAULT_BLOCK_SIZE,
    Platform,
    PrecisionMode,
    experimental_precision_default,
    parse_enum,
)
from .workloads import DEFAULT_WORKLOADS, model_workloads, parse_shape
from .workloads.encoder import DEFAULT_BATCH_SIZE, DEFAULT_SEQ_LEN


DEFAULT_BITS = (32, 4)
"""The API's default precisions: 4-bit weights beside their float32 baseline, which the report's
speed and accuracy figures are judged against (the CLI's default sweeps every precision)."""


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


async def run_real_test(
    platforms: Sequence[Platform | str],
    *,
    model: str | None = None,
    browser: str | Sequence[str] = "chrome",
    bits: int | Sequence[int] = DEFAULT_BITS,
    engines: str | Sequence[str] | None = None,
    experimental_precision: bool | None = None,
    mixed_precision: bool = False,
    precision_rules: str | Path | None = None,
    random_weights: bool = False,
    inputs: str | Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    seq_len: int = DEFAULT_SEQ_LEN,
    shapes: Sequence[str] | None = None,
    webnn_device: str = "cpu",
    block_size: int = DEFAULT_BLOCK_SIZE,
    repetitions: int = 1,
    timing: TimingConfig | None = None,
    output_dir: str | Path | None = None,
    progress: bool = False,
    remote: str | None = None,
    serve_host: str = LOOPBACK,
    parallel: int = 1,
    act_bits: int | Sequence[int] = 32,
    observer: str | Sequence[str] = DEFAULT_OBSERVER,
    weight_quant: str | Sequence[str] = DEFAULT_QUANTIZER,
    buffer_cache: str | Sequence[str] = (),
    calibration: str | Path | None = None,
    model_options: Mapping[str, Any] | None = None,
    browser_args: Sequence[str] = (),
    browser_prefs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Plan, save the plan, run in real browsers and return one plain dict per run (the rows are
    on disk too, in ``output_dir`` or results/<UTC time>_api-<platforms>/). Defaults: ``bits``
    32 and 4 (DEFAULT_BITS), one browser (Chrome), the default matmul shapes without ``model``, the
    engines the CLI picks when none is named (the harness; ONNX Runtime for an ONNX file,
    transformers.js for its folder), the CLI's timing protocol (matmuls
    or models). Bad arguments raise ValueError with one line before anything is written. ``remote``: a
    Selenium Grid URL that creates the browsers; ``parallel``: concurrent browser sessions.
    ``experimental_precision`` None follows WEBNN_EXPERIMENTAL_PRECISION=1, as the CLI does.
    ``model_options``: options only the model's workload kind takes, by the CLI's names
    (``{"batch_size": 8}`` for an encoder, as the ``batch_size`` argument does).
    ``browser_args`` / ``browser_prefs``: the CLI's --browser-arg NAME=ARG and --browser-pref
    NAME=KEY=VALUE values. ``weight_quant``: the CLI's --weight-quant (one quantizer or several);
    ``buffer_cache``: the CLI's --buffer-cache (ONNX Runtime's WebGPU storage-buffer cache modes)."""
    options = SweepOptions(remote=remote, serve_host=serve_host, parallel=parallel,
                           browser_args=parse_browser_args(browser_args),
                           browser_prefs=parse_browser_prefs(browser_prefs))
    if experimental_precision is None:
        experimental_precision = experimental_precision_default()
    if model is not None:
        given = {"batch_size": batch_size, "seq_len": seq_len, "random_weights": random_weights,
                 "inputs": inputs, "mixed_precision": mixed_precision, "precision_rules": precision_rules,
                 "calibration": calibration, "random_weights_hint": "random_weights=True"}
        workloads = [*(parse_shape(s) for s in shapes or ()),
                     *model_workloads(model, given | dict(model_options or {}))]
    elif mixed_precision or precision_rules is not None or calibration is not None:
        raise ValueError("mixed precision, precision rules and calibration texts go with a model (model=...)")
    else:
        workloads = [parse_shape(s) for s in shapes] if shapes else list(DEFAULT_WORKLOADS)
    named = [engine_choice(e) for e in _as_list(engines)] if engines else []
    check_engines_fit(named, workloads)
    plan = build_plan(
        [browser_choice(b) for b in _as_list(browser)],
        [parse_enum(Platform, p, "platform") for p in _as_list(platforms)],
        workloads,
        _as_list(bits),
        engines=named or default_engines(workloads),
        repetitions=repetitions,
        block_size=block_size,
        precision_mode=PrecisionMode.EXPERIMENTAL if experimental_precision else PrecisionMode.STANDARD,
        webnn_device=webnn_device,
        act_bits=_as_list(act_bits),
        observer=observer,
        weight_quant=weight_quant,
        buffer_cache=_as_list(buffer_cache),
    )
    if timing is None:
        timing = MODEL_TIMING if model is not None else DEFAULT_TIMING
    label = "api-" + "-".join(dict.fromkeys(r.platform.value for r in plan))
    try:
        writer = sweep.start(plan, timing, output_dir=Path(output_dir) if output_dir else None, label=label)
    except sweep.OutputDirError as exc:
        raise ValueError(f"output_dir {exc}") from None
    options = dataclasses.replace(options, timing=timing, progress=PlainProgress() if progress else None)
    rows = await sweep.execute(plan, writer, options)
    return [r.record() for r in rows]


async def resume_test(directory: str | Path, *, retry_failed: bool = False, progress: bool = False,
                      remote: str | None = None, serve_host: str = LOOPBACK,
                      parallel: int = 1) -> list[dict[str, Any]]:
    """Run what an interrupted sweep in ``directory`` has not run yet (and, with
    ``retry_failed``, again what crashed, timed out or hit a harness error); the new rows."""
    options = SweepOptions(remote=remote, serve_host=serve_host, parallel=parallel)
    _, remaining, timing, writer = sweep.resume(Path(directory), retry_failed=retry_failed)
    options = dataclasses.replace(options, timing=timing, progress=PlainProgress() if progress else None)
    rows = await sweep.execute(remaining, writer, options)
    return [r.record() for r in rows]


async def run_real_webnn_test(
    *,
    model: str | None = None,
    browser: str | Sequence[str] = "chrome",
    bits: int | Sequence[int] = DEFAULT_BITS,
    engines: str | Sequence[str] | None = None,
    experimental_precision: bool | None = None,
    mixed_precision: bool = False,
    precision_rules: str | Path | None = None,
    random_weights: bool = False,
    inputs: str | Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    seq_len: int = DEFAULT_SEQ_LEN,
    shapes: Sequence[str] | None = None,
    webnn_device: str = "cpu",
    block_size: int = DEFAULT_BLOCK_SIZE,
    repetitions: int = 1,
    timing: TimingConfig | None = None,
    output_dir: str | Path | None = None,
    progress: bool = False,
    remote: str | None = None,
    serve_host: str = LOOPBACK,
    parallel: int = 1,
    act_bits: int | Sequence[int] = 32,
    observer: str | Sequence[str] = DEFAULT_OBSERVER,
    weight_quant: str | Sequence[str] = DEFAULT_QUANTIZER,
    buffer_cache: str | Sequence[str] = (),
    calibration: str | Path | None = None,
    model_options: Mapping[str, Any] | None = None,
    browser_args: Sequence[str] = (),
    browser_prefs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """WebNN runs (MLGraph with dequantizeLinear + matmul); the arguments are ``run_real_test``'s."""
    return await run_real_test(
        [Platform.WEBNN], model=model, browser=browser, bits=bits, engines=engines,
        experimental_precision=experimental_precision, mixed_precision=mixed_precision,
        precision_rules=precision_rules, random_weights=random_weights, inputs=inputs, batch_size=batch_size,
        seq_len=seq_len, shapes=shapes, webnn_device=webnn_device, block_size=block_size,
        repetitions=repetitions, timing=timing, output_dir=output_dir, progress=progress, remote=remote,
        serve_host=serve_host, parallel=parallel, act_bits=act_bits, observer=observer, weight_quant=weight_quant,
        buffer_cache=buffer_cache, calibration=calibration,
        model_options=model_options, browser_args=browser_args, browser_prefs=browser_prefs)


async def run_real_webgpu_test(
    *,
    model: str | None = None,
    browser: str | Sequence[str] = "chrome",
    bits: int | Sequence[int] = DEFAULT_BITS,
    engines: str | Sequence[str] | None = None,
    experimental_precision: bool | None = None,
    mixed_precision: bool = False,
    precision_rules: str | Path | None = None,
    random_weights: bool = False,
    inputs: str | Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    seq_len: int = DEFAULT_SEQ_LEN,
    shapes: Sequence[str] | None = None,
    webnn_device: str = "cpu",
    block_size: int = DEFAULT_BLOCK_SIZE,
    repetitions: int = 1,
    timing: TimingConfig | None = None,
    output_dir: str | Path | None = None,
    progress: bool = False,
    remote: str | None = None,
    serve_host: str = LOOPBACK,
    parallel: int = 1,
    act_bits: int | Sequence[int] = 32,
    observer: str | Sequence[str] = DEFAULT_OBSERVER,
    weight_quant: str | Sequence[str] = DEFAULT_QUANTIZER,
    buffer_cache: str | Sequence[str] = (),
    calibration: str | Path | None = None,
    model_options: Mapping[str, Any] | None = None,
    browser_args: Sequence[str] = (),
    browser_prefs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """WebGPU runs (WGSL kernels on packed weights); the arguments are ``run_real_test``'s."""
    return await run_real_test(
        [Platform.WEBGPU], model=model, browser=browser, bits=bits, engines=engines,
        experimental_precision=experimental_precision, mixed_precision=mixed_precision,
        precision_rules=precision_rules, random_weights=random_weights, inputs=inputs, batch_size=batch_size,
        seq_len=seq_len, shapes=shapes, webnn_device=webnn_device, block_size=block_size,
        repetitions=repetitions, timing=timing, output_dir=output_dir, progress=progress, remote=remote,
        serve_host=serve_host, parallel=parallel, act_bits=act_bits, observer=observer, weight_quant=weight_quant,
        buffer_cache=buffer_cache, calibration=calibration,
        model_options=model_options, browser_args=browser_args, browser_prefs=browser_prefs)

"""End-to-end sweeps that several test modules assert on, run once per test session (loaded by
tests/conftest.py as a plug-in): one real browser sweep per (model, browser) instead of one per
module, so a new check of an existing sweep costs no browser time (docs/testing.md).

- ``minilm_chrome``: all-MiniLM-L6-v2 (3 x 16 tokens, 6 texts) in Chromium on the harness's WGSL
  and WebNN engines at 32/8/4 bits, weight-only and with int8 activations (minmax), and on ONNX
  Runtime Web (``ORT_MINILM_RUNS``; ORT's refusal of int8 activations). test_e2e_model and
  test_e2e_model_int8 read it.
- ``minilm_firefox``: the same model in Firefox at 8 bits, weight-only and W8A8 on WebGPU, and
  its WebNN row (unsupported)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import require_browser

from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.models.inputs import builtin_texts
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.run_spec import RunSpec
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform
from fixed_web_platform.workloads import EncoderWorkload

MINILM = "all-MiniLM-L6-v2"
MINILM_TEXTS = builtin_texts()[:6]


@functools.cache
def minilm_small() -> EncoderWorkload:
    """The shared sweeps' MiniLM: 3 x 16 tokens of 6 texts (made when first asked for, not at
    collection: every test worker collects every module)."""
    return EncoderWorkload.create(MINILM, batch_size=3, seq_len=16, texts=MINILM_TEXTS)


MODEL_QUICK = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=3, timeout_s=240)
"""The quickest protocol with two timed samples (a median and a spread); no warm-up floor, as no
check here is of speed (the steady-state tests are test_e2e_steady's)."""


@dataclass(frozen=True)
class Swept:
    """A finished sweep: its results folder and its rows."""

    out: Path
    rows: tuple[ResultRow, ...]


def sweep(browser: BrowserName, platforms: Sequence[Platform], workloads: Sequence, bits: Sequence[int], out: Path,
          engines: Sequence[EngineName] = (EngineName.HARNESS,), timing: TimingConfig = MODEL_QUICK,
          skip: Callable[[RunSpec], bool] = lambda run: False, **plan_options) -> Swept:  # noqa: ANN003
    """Plan (browser x platforms x workloads x bits x engines), leave out ``skip``'s runs, run the
    rest in one browser session and keep the rows."""
    require_browser(browser)
    plan = build_plan([browser], list(platforms), list(workloads), list(bits), engines=list(engines), **plan_options)
    plan = [dataclasses.replace(run, run_id=i) for i, run in enumerate(run for run in plan if not skip(run))]
    writer = ResultWriter(out)
    rows = asyncio.run(run_sweep(plan, writer, SweepOptions(timing=timing)))
    writer.close()
    return Swept(out, tuple(rows))


ORT_MINILM_RUNS = {(Platform.WEBGPU, 8), (Platform.WEBNN, 32), (Platform.WEBNN, 8), (Platform.WASM, 32)}
"""ONNX Runtime Web's MiniLM runs in the shared Chromium sweep (its refusals of int8 activations
besides): WebGPU at 8 bits only (20-60 s a run in SwiftShader), WebNN at float32 and at 8 bits
(the MatMulNBits Chromium's WebNN takes), wasm at float32. The tiny decoder's sweep
(test_e2e_decoder) runs the same MatMulNBits rewrite at every bits on wasm and WebNN."""


def _ort_stand_ins(run: RunSpec) -> bool:
    return run.engine == EngineName.ORT and not run.refused and (run.platform, run.bits) not in ORT_MINILM_RUNS


@pytest.fixture(scope="session")
def minilm_chrome(tmp_path_factory: pytest.TempPathFactory) -> Swept:
    return sweep(BrowserName.CHROME, [Platform.WEBGPU, Platform.WEBNN, Platform.WASM], [minilm_small()], (32, 8, 4),
                 tmp_path_factory.mktemp("minilm-chrome"), engines=(EngineName.HARNESS, EngineName.ORT),
                 act_bits=[32, 8], observer="minmax", skip=_ort_stand_ins)


@pytest.fixture(scope="session")
def minilm_firefox(tmp_path_factory: pytest.TempPathFactory) -> Swept:
    return sweep(BrowserName.FIREFOX, [Platform.WEBGPU, Platform.WEBNN], [minilm_small()], (8,),
                 tmp_path_factory.mktemp("minilm-firefox"), act_bits=[32, 8], observer="minmax",
                 skip=lambda run: run.platform == Platform.WEBNN and run.act_bits == 8)

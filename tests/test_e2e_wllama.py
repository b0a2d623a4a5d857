"""End to end: wllama (llama.cpp in WebAssembly) running SmolLM2-135M's GGUF files in real Chromium
and Firefox at a short prompt, few new tokens and a short evaluation: the harness's Q8_0 and
Q4_0 files and the model's own file, judged against PyTorch fp32 and the float64 decoder with each
file's weights; the WebGPU row says where llama.cpp really ran."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest
from conftest import require_browser

from fixed_web_platform.engines.wllama import HELD, SHIPPED
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads import DecoderWorkload
from fixed_web_platform.workloads.decoder import accuracy

pytestmark = pytest.mark.browser
QUICK = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=3, timeout_s=300)


@functools.cache
def workload() -> DecoderWorkload:
    """Made when a test first runs, not at collection (reading SmolLM2's GGUF for its tokens takes
    about 12 s, which every test worker would pay)."""
    return DecoderWorkload.create("smollm2-135m", prompt_len=8, new_tokens=4, eval_len=8)


def _sweep(browser: BrowserName, platforms, bits, out: Path,  # noqa: ANN001, ANN202
           formats=("Q8_0", "Q4_0", SHIPPED, f"{HELD} offset")):
    """``formats``: 'format' for llama.cpp's (planned with minmax), 'held <quantizer>' for the harness's codes."""
    require_browser(browser)
    plan = build_plan([browser], list(platforms), [workload()], bits, engines=[EngineName.WLLAMA],
                      weight_quant=["minmax", "offset"])
    plan = [r for r in plan if (f"{HELD} {r.weight_quant}" if r.weight_format == HELD else r.weight_format) in formats
            and (r.weight_format == HELD or r.weight_quant == "minmax")]  # Q4_1 re-written: the shipped file's twin here
    plan = [dataclasses.replace(r, run_id=i) for i, r in enumerate(plan)]
    writer = ResultWriter(out)
    rows = asyncio.run(run_sweep(plan, writer, SweepOptions(timing=QUICK)))
    writer.close()
    return {(r.platform, r.format_requested): r for r in rows}


@pytest.fixture(scope="module")
def chrome_rows(tmp_path_factory):  # noqa: ANN001, ANN201
    out = tmp_path_factory.mktemp("wllama-chrome")
    rows = _sweep(BrowserName.CHROME, (Platform.WASM,), (8, 4), out)
    return out, rows | _sweep(BrowserName.CHROME, (Platform.WEBGPU,), (8,), out / "webgpu", ("Q8_0",))


@pytest.mark.budget(400, why="wllama runs only real GGUF files: SmolLM2-135M's own and three re-written from it "
                           "(8 s each), each read back through transformers (about 20 s) for its float64 reference")
def test_llama_cpp_formats_in_chrome_are_right_and_accuracy_falls_with_bits(chrome_rows) -> None:  # noqa: ANN001
    _, rows = chrome_rows
    q8, q4, shipped = rows[("wasm", "Q8_0")], rows[("wasm", "Q4_0")], rows[("wasm", SHIPPED)]
    for row in (q8, q4, shipped):
        assert row.outcome == Outcome.OK, row.reason
        assert row.executed_on == "wasm" and row.rel_error_vs_dequantized <= row.kernel_tolerance
        assert row["decode_tokens_per_s"] > 0 and row["ttft_ms"] > 0 and row["device_weight_bytes"] > 0
        assert row.engine_version.startswith("wllama (llama.cpp b")
        assert row.wasm_peak_bytes >= row.weight_bytes  # measured in wllama's worker (web/meter.js)
    # The fp32 reference IS the shipped file's weights (its Q4_1 dequantized): the shipped file agrees
    # best, Q8_0 of those weights next, Q4_0 (re-quantized onto another grid) least.
    assert shipped["next_token_top1"] >= 0.9 and shipped["leading_tokens_equal"] == 4
    assert q8["next_token_top1"] >= 0.8
    assert shipped["kl_mean"] < q4["kl_mean"] and q8["kl_mean"] < q4["kl_mean"]
    assert q4.weight_bytes < shipped.weight_bytes < q8.weight_bytes
    assert q8.weight_format == "gguf Q8_0" and shipped.weight_format == "gguf Q4_1 (as shipped)"


def test_the_harness_s_own_codes_run_in_llama_cpp(chrome_rows) -> None:  # noqa: ANN001
    """The held file: the harness's offset codes as Q4_1 (gguf_files.write_held), the float embedding
    and a 4-bit head of its own. Its body is the shipped file's bytes, its head 4-bit: it loses less
    than Q4_0 (every layer re-rounded onto another grid); a query/key row order llama.cpp does not
    expect would lose far more."""
    _, rows = chrome_rows
    held, q4 = rows[("wasm", HELD)], rows[("wasm", "Q4_0")]
    assert held.outcome == Outcome.OK, held.reason
    assert held.rel_error_vs_dequantized <= held.kernel_tolerance
    assert held.weight_quant == "offset" and held.weight_format == "gguf Q4_1 (the harness's offset codes)"
    assert held.weight_dtype.startswith("Q4_1x211") and "F32" in held.weight_dtype
    assert held["kl_mean"] < q4["kl_mean"]


def test_outputs_on_disk_recompute_the_wllama_figures(chrome_rows) -> None:  # noqa: ANN001
    out, rows = chrome_rows
    row = rows[("wasm", "Q4_0")]
    saved = np.load(out / row.outputs_file)
    assert saved["top1"].shape == saved["input_ids"].shape == (4, 8)
    assert float((saved["top1"] == saved["fp32_top1"]).mean()) == pytest.approx(row["next_token_top1"])
    assert float(saved["kl_fp32_engine_lower_bound"].mean()) == pytest.approx(row["kl_mean"], rel=1e-6)
    assert accuracy.perplexity(saved["ref_logprob"]) == pytest.approx(row["perplexity"], rel=1e-6)
    assert accuracy.leading_equal(saved["generated_ids"], saved["generated_ids_fp32"]) == row["leading_tokens_equal"]


def test_wllama_webgpu_says_where_llama_cpp_ran(chrome_rows) -> None:  # noqa: ANN001
    _, rows = chrome_rows
    row = rows[("webgpu", "Q8_0")]
    assert row.outcome == Outcome.OK, row.reason
    assert row.executed_on in ("wasm", "webgpu")
    if row.executed_on == "wasm":  # no WebGPU device llama.cpp can use (software adapters lack shader-f16)
        assert "CPU backend" in row.reason and "shader-f16" in row.reason
    assert row.rel_error_vs_dequantized <= row.kernel_tolerance


def test_wllama_in_firefox(tmp_path) -> None:  # noqa: ANN001
    row = _sweep(BrowserName.FIREFOX, (Platform.WASM,), (8,), tmp_path, ("Q8_0",))[("wasm", "Q8_0")]
    assert row.outcome == Outcome.OK, row.reason
    assert row.executed_on == "wasm" and row.rel_error_vs_dequantized <= row.kernel_tolerance
    assert row["next_token_top1"] >= 0.8 and row["decode_tokens_per_s"] > 0

"""End to end: a tiny random-weight Gemma 3 (architectures/gemma3: per-head query/key norms,
(1 + weight) norms, the scaled embedding, GELU-tanh gating, two RoPE bases) in real Chromium and
Firefox on the engines whose lowering runs its ops (ONNX Runtime Web's wasm, transformers.js from
an export in its layout), judged against PyTorch fp32 and the float64 Gemma decoder; the harness's
own WebGPU and WebNN runs refused in the plan, naming what their lowerings lack."""

from __future__ import annotations

import pytest
from shared_sweeps import sweep
from test_e2e_decoder import ONCE
from test_gemma3 import tiny_gemma_config

from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads import DecoderWorkload

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> DecoderWorkload:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("tiny-gemma3")
    tiny_gemma_config(vocab_size=30522, max_position_embeddings=128).save_pretrained(folder)  # window 4: in play
    return DecoderWorkload.create(str(folder), prompt_len=8, new_tokens=4, eval_len=12, random_weights=True)


@pytest.mark.parametrize("browser", [BrowserName.CHROME, BrowserName.FIREFOX])
def test_tiny_gemma3_runs_where_its_ops_are_lowered_and_is_refused_by_name_elsewhere(tiny, browser, tmp_path) -> None:  # noqa: ANN001
    engines = (EngineName.HARNESS, EngineName.ORT, EngineName.TRANSFORMERSJS)
    swept = sweep(browser, (Platform.WEBGPU, Platform.WASM), [tiny], (32, 4), tmp_path, engines=engines, timing=ONCE,
                  skip=lambda run: run.platform is Platform.WEBGPU and run.engine is not EngineName.HARNESS)
    rows = {(r.engine, r.platform, r.bits_requested): r for r in swept.rows}
    for bits in (32, 4):
        harness = rows[("harness", "webgpu", bits)]
        assert harness.outcome == Outcome.UNSUPPORTED, harness.reason
        assert "has no lowering of" in harness.reason and "Norm.offset" in harness.reason, harness.reason
        row = rows[("ort", "wasm", bits)]
        assert row.outcome == Outcome.OK, (bits, row.reason)
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, bits
        assert row["ttft_ms"] > 0 and row["decode_tokens_per_s"] > 0
    assert rows[("ort", "wasm", 32)]["next_token_top1"] == 1.0
    assert rows[("ort", "wasm", 32)]["leading_tokens_equal"] == 4
    assert rows[("ort", "wasm", 4)]["kl_mean"] > rows[("ort", "wasm", 32)]["kl_mean"]
    tjs = rows[("transformersjs", "wasm", 32)]
    assert tjs.outcome == Outcome.OK, tjs.reason
    assert tjs["next_token_top1"] == 1.0

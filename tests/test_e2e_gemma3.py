"""End to end: a tiny random-weight Gemma 3 (architectures/gemma3: per-head query/key norms,
(1 + weight) norms, the scaled embedding, GELU-tanh gating, two RoPE bases, a sliding window of 4
positions within the rows generated and scored) in real Chromium and Firefox on every engine whose
lowering runs a graph: the harness's WGSL kernels and WebNN graphs, ONNX Runtime Web's wasm and
transformers.js from an export in its layout, each judged against the float64 Gemma decoder with
the bytes it held (itself checked against PyTorch in test_gemma3) and against fp32's tokens. A
lowering that dropped one of Gemma's op parameters fails its row's kernel check."""

from __future__ import annotations

import pandas as pd
import pytest
from shared_sweeps import sweep
from test_e2e_decoder import ONCE
from test_gemma3 import tiny_gemma_config

from fixed_web_platform.engines.webnn import decoder as webnn_decoder
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads import DecoderWorkload

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> DecoderWorkload:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("tiny-gemma3")
    tiny_gemma_config(vocab_size=30522, max_position_embeddings=128).save_pretrained(folder)  # window 4: in play
    return DecoderWorkload.create(str(folder), prompt_len=8, new_tokens=4, eval_len=12, random_weights=True)


@pytest.mark.parametrize("browser", [BrowserName.CHROME, BrowserName.FIREFOX])
def test_tiny_gemma3_is_right_on_every_engine_that_lowers_its_graph(tiny, browser, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """(And the harness's WebNN plan holds a head past one graph's quantized budget in float32, as
    Gemma 3 270M's: the budget lowered under the tiny head's 1,953,408 elements.)"""
    assert "Attention.window" in tiny.op_needs()
    monkeypatch.setattr(webnn_decoder, "QUANTIZED_PER_GRAPH", 1_000_000)
    engines = (EngineName.HARNESS, EngineName.ORT, EngineName.TRANSFORMERSJS)
    platforms = (Platform.WEBGPU, Platform.WEBNN, Platform.WASM) if browser is BrowserName.CHROME else \
        (Platform.WEBGPU, Platform.WASM)
    swept = sweep(browser, platforms, [tiny], (32, 4), tmp_path, engines=engines, timing=ONCE,
                  skip=lambda run: run.platform is not Platform.WASM and run.engine is not EngineName.HARNESS)
    rows = {(r.engine, r.platform, r.bits_requested): r for r in swept.rows}
    checked = [(engine, platform) for engine, platform, _ in rows if engine != "transformersjs"]
    assert ("harness", "webgpu") in checked and ("ort", "wasm") in checked
    assert (("harness", "webnn") in checked) == (browser is BrowserName.CHROME)
    for engine, platform in checked:
        for bits in (32, 4):
            row = rows[(engine, platform, bits)]
            assert row.outcome == Outcome.OK, (engine, platform, bits, row.reason)
            assert row.rel_error_vs_dequantized <= row.kernel_tolerance, (engine, platform, bits)
            assert row["ttft_ms"] > 0 and row["decode_tokens_per_s"] > 0
        fp32, q4 = rows[(engine, platform, 32)], rows[(engine, platform, 4)]
        assert fp32["next_token_top1"] == 1.0 and fp32["leading_tokens_equal"] == 4, (engine, platform)
        assert q4["kl_mean"] > fp32["kl_mean"], (engine, platform)
    if browser is BrowserName.CHROME:
        webnn = rows[("harness", "webnn", 4)]
        assert ("1 layer held in float32 (lm_head's 4-bit weights, 1,953,408 elements, pass the 1,000,000 one "
                "WebNN graph may hold") in webnn.reason
        layers = pd.read_csv(tmp_path / "layers.csv").set_index(["run_id", "layer"])
        assert layers.loc[(webnn.run_id, "lm_head"), "weight_dtype"] == "float32"
        assert layers.loc[(webnn.run_id, "model.layers.0.mlp.down_proj"), "weight_dtype"] != "float32"
    tjs = rows[("transformersjs", "wasm", 32)]
    assert tjs.outcome == Outcome.OK, tjs.reason
    assert tjs["next_token_top1"] == 1.0

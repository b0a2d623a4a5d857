"""End to end: all-MiniLM-L6-v2 as a whole model in real Chromium and Firefox, at small batch and
sequence length, on every engine; rows judged against PyTorch fp32 and the float64 reference."""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd
import pytest
from conftest import report_reads_well
from shared_sweeps import MINILM, MINILM_TEXTS, Swept, minilm_small, sweep

from fixed_web_platform.models import rules
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads import EncoderWorkload
from fixed_web_platform.workloads.encoder import accuracy

pytestmark = pytest.mark.browser


@functools.cache
def mixed_minilm() -> EncoderWorkload:
    """MiniLM under the mixed-precision rules (made when first asked for, not at collection)."""
    return EncoderWorkload.create(MINILM, batch_size=3, seq_len=16, texts=MINILM_TEXTS,
                                  rules=rules.mixed_precision_rules(), rules_name="mixed-precision")


def _weight_only(swept: Swept, quantizer: str = "minmax") -> dict:
    """The weight-only rows by (engine, platform, bits, precision plan) whose weights ``quantizer``
    made (float ones too); the int8-activation rows of the shared sweep are test_e2e_model_int8's."""
    return {(r.engine, r.platform, r.bits_requested, r.precision_plan.split(":")[0]): r
            for r in swept.rows if r.act_bits == 32 and r.weight_quant in ("", quantizer)}


@pytest.fixture(scope="module")
def second(tmp_path_factory) -> Swept:  # noqa: ANN001
    """One more Chromium session: MiniLM at 4 bits under the mixed-precision rules, and uniform with
    HQQ's weights (a float zero point per block) beside the shared sweep's min/max ones."""
    return sweep(BrowserName.CHROME, [Platform.WEBGPU], [mixed_minilm(), minilm_small()], (4,),
                 tmp_path_factory.mktemp("model-chrome-second"), weight_quant=["minmax", "hqq"],
                 skip=lambda run: (run.workload == mixed_minilm()) == (run.weight_quant == "hqq"))


@pytest.fixture(scope="module")
def chrome(minilm_chrome: Swept, second: Swept):  # noqa: ANN201
    return minilm_chrome.out, second.out, _weight_only(minilm_chrome) | _weight_only(second)


@pytest.mark.budget(400, why="pays for the shared MiniLM sweep in Chromium (shared_sweeps.minilm_chrome): 17 runs on "
                           "every engine, weight-only and int8 activations, which two modules assert on")
def test_harness_webgpu_fp32_matches_pytorch_and_8bit_stays_close(chrome) -> None:  # noqa: ANN001
    _, _, rows = chrome
    fp32 = rows[("harness", "webgpu", 32, "uniform")]
    assert fp32.outcome == Outcome.OK, fp32.reason
    assert fp32.cosine_min >= 0.99999
    assert fp32.rel_error_vs_dequantized <= fp32.kernel_tolerance
    eight = rows[("harness", "webgpu", 8, "uniform")]
    four = rows[("harness", "webgpu", 4, "uniform")]
    assert eight.outcome == four.outcome == Outcome.OK
    assert eight.cosine_mean >= 0.999
    assert fp32.cosine_mean > eight.cosine_mean > four.cosine_mean  # accuracy ordered by bits
    assert fp32.weight_bytes > eight.weight_bytes > four.weight_bytes
    assert four.tokens_per_s > 0 and four.latency_ms_median > 0


def test_every_engine_row_is_ok_or_says_why(chrome) -> None:  # noqa: ANN001
    _, _, rows = chrome
    for key, row in rows.items():
        assert row.outcome in (Outcome.OK, Outcome.UNSUPPORTED), (key, row.outcome, row.reason)
        if row.outcome == Outcome.OK:
            assert row.rel_error_vs_dequantized <= row.kernel_tolerance, key
            assert row.cosine_min is not None and row.spearman is not None and row.top1_agreement is not None
        else:
            assert row.reason, key
    for platform in ("webgpu", "webnn", "wasm"):
        # ORT's WebGPU encoder runs at 8 bits only here (20-60 s a run in SwiftShader)
        assert ("ort", platform, 8 if platform == "webgpu" else 32, "uniform") in rows
    assert rows[("harness", "webnn", 32, "uniform")].outcome == Outcome.OK


def test_layers_and_outputs_are_on_disk_and_recompute_the_row(chrome) -> None:  # noqa: ANN001
    out, _, rows = chrome
    layers = pd.read_csv(out / "layers.csv")
    row = rows[("harness", "webgpu", 4, "uniform")]
    mine = layers[layers.run_id == row.run_id]
    assert len(mine) == 36 and set(mine.bits_requested) == {4} and set(mine.bits_executed) == {4}
    saved = np.load(out / row.outputs_file)
    assert saved["embeddings"].shape == (len(MINILM_TEXTS), 384) and saved["input_ids"].shape == (len(MINILM_TEXTS), 16)
    again = accuracy.compare(saved["embeddings"], saved["reference_pytorch_fp32"])
    assert again.cosine_min == pytest.approx(row.cosine_min, abs=1e-9)
    assert again.spearman == pytest.approx(row.spearman, abs=1e-9)


def test_mixed_precision_is_more_accurate_than_4bit_in_fewer_bytes_than_8bit(chrome) -> None:  # noqa: ANN001
    _, mixed_out, rows = chrome
    mixed = rows[("harness", "webgpu", 4, "mixed")]
    assert mixed.outcome == Outcome.OK, mixed.reason
    assert mixed.precision_plan == "mixed:8x12,4x24"
    four, eight = rows[("harness", "webgpu", 4, "uniform")], rows[("harness", "webgpu", 8, "uniform")]
    assert mixed.cosine_mean > four.cosine_mean
    assert four.weight_bytes < mixed.weight_bytes < eight.weight_bytes
    layers = pd.read_csv(mixed_out / "layers.csv")
    counts = layers[layers.run_id == mixed.run_id].groupby("bits_executed").size().to_dict()
    assert counts == {4: 24, 8: 12}


def test_firefox_runs_webgpu_and_says_it_has_no_webnn(minilm_firefox: Swept) -> None:
    rows = _weight_only(minilm_firefox)
    gpu, nn = rows[("harness", "webgpu", 8, "uniform")], rows[("harness", "webnn", 8, "uniform")]
    assert gpu.outcome == Outcome.OK, gpu.reason
    assert gpu.cosine_mean >= 0.999 and gpu.rel_error_vs_dequantized <= gpu.kernel_tolerance
    assert nn.outcome == Outcome.UNSUPPORTED and "WebNN" in nn.reason


def test_every_engine_s_memory_is_measured_the_same_way(minilm_chrome: Swept, minilm_firefox: Swept) -> None:
    """web/meter.js under every engine: a WebGPU row holds at least its weights in live buffers, a
    wasm row has its WebAssembly memory, a WebNN row the bytes handed to the graph builder, whichever
    engine built the work (the harness's pages, ONNX Runtime's)."""
    seen = set()
    for swept in (minilm_chrome, minilm_firefox):
        for r in swept.rows:
            if r.outcome != Outcome.OK:
                continue
            where = (r.browser, r.engine, r.platform, r.bits_requested, r.act_bits)
            seen.add((r.browser, r.engine, r.platform))
            if r.platform == "webgpu":
                assert r.gpu_peak_bytes >= r.weight_bytes, where
                assert r.gpu_largest_buffer_bytes <= r.gpu_peak_bytes and r.gpu_measured_peak_bytes <= r.gpu_peak_bytes
            elif r.platform == "wasm":
                assert r.wasm_peak_bytes >= r.weight_bytes, where
            elif r.platform == "webnn" and r.executed_on == "webnn":
                assert r.webnn_constant_bytes > 0, where
    assert {("chrome", "harness", "webgpu"), ("chrome", "ort", "webgpu"), ("chrome", "ort", "wasm"),
            ("firefox", "harness", "webgpu")} <= seen


def test_the_report_of_a_minilm_sweep_reads_at_a_laptops_and_a_phones_width(chrome, tmp_path) -> None:  # noqa: ANN001
    out, mixed_out, _ = chrome
    laptop, _ = report_reads_well([out, mixed_out], tmp_path / "report")
    # the harness's WebGPU MiniLM at float32 meets the cosine bar: its setting has a pick, not 'none'
    # (a software adapter is named in the setting: ' · fallback adapter')
    assert any(re.match(r"minilm-chrome0: chrome · harness webgpu( · fallback adapter)?, all-MiniLM-L6-v2", pick)
               and ": none:" not in pick for pick in laptop.picks), laptop.picks
    assert [s.name for s in laptop.section_shots] == ["screenshot-glance-encoder.png"]


def test_hqq_weights_run_in_the_wgsl_encoder_and_cost_less_per_layer(chrome, second: Swept) -> None:  # noqa: ANN001
    """The same MiniLM at 4 bits with HQQ's codes: the kernels read its float zero points (the
    row's kernel check on the same bytes), each layer's weight error is in layers.csv, and HQQ's is
    below min/max's on average; the row names the quantizer and the bytes it held."""
    shared_out, _, rows = chrome
    minmax = rows[("harness", "webgpu", 4, "uniform")]
    (hqq,) = [r for r in second.rows if r.weight_quant == "hqq"]
    assert hqq.outcome == Outcome.OK, hqq.reason
    assert hqq.rel_error_vs_dequantized <= hqq.kernel_tolerance
    assert hqq.zero_point_dtype == "float32" and "-zf32" in hqq.kernel_variant, hqq.kernel_variant
    assert hqq.weight_bytes > minmax.weight_bytes  # a float32 zero per block where min/max packs 4 bits
    errors = {}
    for out, row in ((shared_out, minmax), (second.out, hqq)):
        layers = pd.read_csv(out / "layers.csv")
        errors[row.weight_quant] = layers[layers.run_id == row.run_id].set_index("layer")["weight_error"]
    assert len(errors["hqq"]) == 36 and errors["minmax"].between(0.05, 0.15).all(), errors["minmax"].describe()
    assert errors["hqq"].mean() < errors["minmax"].mean()

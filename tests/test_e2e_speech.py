"""End-to-end: Whisper on the harness's WGSL kernels in real browsers, on the shortest built-in
clip. Firefox runs the real tiny.en at float32: its transcript is PyTorch fp32's and the clip's
own words, its log-mel front end (a compute shader) agrees with WhisperFeatureExtractor, and every
figure is on disk. Chrome (SwiftShader takes about 40 s per tiny.en encoder pass) runs the tests'
small random-weight Whisper (tests/speech_models.py) at 4 bits through the same page, through the
harness's WebNN graphs (standard mode: as 8-bit), and through ONNX Runtime Web on wasm and WebNN,
whose transcripts must be the harness's WGSL ones (ORT's WebGPU provider on
SwiftShader takes about a minute even for this model: docs/guides/speech.md's sweep measures it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import held_in_float32, require_browser
from speech_models import tiny_whisper

from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.prepared_caches import release
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import PER_CHANNEL_BLOCK, BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads.speech import SpeechWorkload, calibration

pytestmark = pytest.mark.browser
QUICK = TimingConfig(warmup=0, min_iterations=1, min_time_s=0, max_iterations=2, timeout_s=300)


def _sweep(browser: BrowserName, workload: SpeechWorkload, bits: int, out: Path,
           platforms: tuple[Platform, ...] = (Platform.WEBGPU,), engines: tuple[EngineName, ...] = (EngineName.HARNESS,),
           **options):  # noqa: ANN003, ANN202
    require_browser(browser)
    plan = build_plan([browser], list(platforms), [workload], [bits], engines=list(engines), **options)
    plan = [r for r in plan if not r.refused and not (r.engine == "ort" and r.platform == "webgpu")]
    rows = asyncio.run(run_sweep(plan, ResultWriter(out), SweepOptions(timing=QUICK)))
    return {(r.engine, r.platform): r for r in rows}


@pytest.fixture(scope="module")
def firefox(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    out = tmp_path_factory.mktemp("speech-firefox") / "results"
    workload = SpeechWorkload.from_options("whisper-tiny.en", clips=1, max_tokens=16)
    return out, workload, _sweep(BrowserName.FIREFOX, workload, 32, out)[("harness", "webgpu")]


@pytest.fixture(scope="module")
def chrome(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    root = tmp_path_factory.mktemp("speech-chrome")
    workload = SpeechWorkload.from_options(str(tiny_whisper(root / "tiny-whisper")), clips=1, max_tokens=8)
    rows = _sweep(BrowserName.CHROME, workload, 4, root / "results", (Platform.WEBGPU, Platform.WEBNN, Platform.WASM),
                  (EngineName.HARNESS, EngineName.ORT))
    return root / "results", workload, rows


def _check_common(out: Path, workload: SpeechWorkload, row, front_end: bool = True) -> list:  # noqa: ANN001
    assert row.outcome == Outcome.OK, row.reason
    assert row.kind == "speech" and row["clips"] == 1
    if front_end:  # the page's log-mel features (WGSL: frames, Hann window, DFT, mel bank, log, clamp) are Python's
        assert 0 <= row["frontend_error"] < 1e-3 and row["frontend_ms"] > 0
    else:  # an engine fed Python's features has no front end to time or check
        assert row["frontend_error"] is None and row["frontend_ms"] is None
    assert row.rel_error_vs_dequantized <= row.kernel_tolerance
    assert row["encoder_error_vs_reference"] < 1e-3
    for figure in ("encoder_ms", "first_token_ms", "clip_s", "real_time_factor", "load_weights_ms"):
        assert row[figure] > 0, figure
    assert row["clip_s"] * 1000 >= row["encoder_ms"]
    saved = json.loads((out / row.outputs_file).read_text())
    assert [e["clip"] for e in saved] == [c.name for c in workload.clips]
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    (clip_times,) = [s["kind"][0]["speech"]["clips"] for s in samples if s["run_id"] == row.run_id]
    assert len(clip_times) == row.n_samples and all(c["clip"] == 0 for c in clip_times)
    layers = pd.read_csv(out / "layers.csv")
    assert len(layers[layers["run_id"] == row.run_id]) == len(workload.config().linear_layers())
    return saved


def test_firefox_transcribes_as_pytorch_fp32(firefox) -> None:  # noqa: ANN001
    out, workload, row = firefox
    (entry,) = _check_common(out, workload, row)
    assert entry["text"] == entry["fp32_text"] == workload.clips[0].reference == row["transcript"]
    assert entry["token_ids"] == entry["fp32_token_ids"]
    assert row["clips_equal_fp32"] == 1 and row["wer"] == 0 and row["wer_vs_fp32"] == 0
    assert row["encoder_cosine_vs_fp32"] > 0.99999
    assert row.bits_executed == 32 and row.weight_bytes == row.weight_bytes_f32


def test_chrome_runs_four_bit_whisper_on_the_harness_and_ort(chrome) -> None:  # noqa: ANN001
    out, workload, rows = chrome
    assert set(rows) == {("harness", "webgpu"), ("harness", "webnn"), ("ort", "wasm"), ("ort", "webnn")}
    harness = rows[("harness", "webgpu")]
    (entry,) = _check_common(out, workload, harness)
    assert harness.bits_executed == 4 and harness.weight_bytes < harness.weight_bytes_f32
    assert 1 <= len(entry["token_ids"]) <= 8
    assert harness["decode_tokens_per_s"] is None or harness["decode_tokens_per_s"] > 0
    for platform in ("wasm", "webnn"):
        row = rows[("ort", platform)]
        (ort_entry,) = _check_common(out, workload, row, front_end=False)
        assert row.bits_executed == 4 and row.weight_format == "MatMulNBits4"
        # ORT's WebNN provider leaves 4-bit MatMulNBits to its CPU provider, and the row says so;
        # the cross keys and values those nodes compute stay on the CPU (ort_speech.js: bound to
        # MLTensors they came back wrong)
        assert row.executed_on == "wasm", row.reason
        # the same held bytes, the same greedy rule: the same ids as the harness's kernels
        assert ort_entry["token_ids"] == entry["token_ids"], (platform, ort_entry, entry)
    # WebNN's standard mode runs 4-bit layers as 8-bit and says so; the graphs match the float64
    # Whisper holding those 8-bit weights (the kernel check in _check_common)
    webnn = rows[("harness", "webnn")]
    (webnn_entry,) = _check_common(out, workload, webnn, front_end=False)
    assert webnn.bits_executed == 8 and "4-bit layers ran as 8-bit" in webnn.reason
    assert webnn.weight_bytes < webnn.weight_bytes_f32 and 1 <= len(webnn_entry["token_ids"]) <= 8


def test_chrome_runs_w8a8_whisper_on_webnn_in_the_fused_form(chrome, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The 4-bit test's small Whisper with int8 activations through its encoder and decoder graphs:
    per-channel 8-bit weights in gemm_qdq, every 8-bit layer's input (smoothed, scaled per token)
    and output through int8 (calibrated on the calibration clips), the layers whose outputs int8
    cannot hold held in float32, judged stage by stage against the float64 Whisper with the same
    int8 activations; and ORT's int8 QDQ form of the same parameters and float layers on wasm
    (ORT's WebNN leaves its speech layers to the CPU as the 4-bit test shows). The floor is raised
    to 42 dB so that some of the small model's layers miss it (none do at Whisper's own)."""
    _, workload, _ = chrome
    monkeypatch.setattr(calibration.SpeechClips, "out_min_sqnr_db", 42.0)
    release()  # nothing prepared at another floor is reused
    misses = set(calibration.int8_output_misses(workload, 8, PER_CHANNEL_BLOCK, 0, "minmax"))
    linears = len(workload.config().linear_layers())
    assert 0 < len(misses) < linears
    out = tmp_path / "results"
    rows = _sweep(BrowserName.CHROME, workload, 8, out, (Platform.WEBNN, Platform.WASM),
                  (EngineName.HARNESS, EngineName.ORT), act_bits=(8,), granularity="per-channel")
    release()
    layers = pd.read_csv(out / "layers.csv", keep_default_na=False)
    int8 = linears - len(misses)
    for key, form in (("harness", "webnn"), "int8"), (("ort", "wasm"), "QDQ8"):
        row = rows[key]
        _check_common(out, workload, row, front_end=False)
        assert row.act_bits == 8 and row.graph_form == "gemm_qdq" and row.act_smoothing == "smoothquant-0.7"
        assert row.act_scale == "per-token" and f"int8 inputs scaled per token in {int8} layers" in row.reason
        assert f"{len(misses)} layers held in float32 by exact-name rules (those whose int8 outputs miss the 42 dB " \
               "floor" in row.reason
        assert "int8 activations, stage by stage: the first logits against the float64 decoder" in row.reason
        held_in_float32(layers, row, misses, form)
    assert f"int8 outputs (the fused form) in {int8} of {linears} linear layers" in rows[("harness", "webnn")].reason
    assert rows[("ort", "wasm")].weight_format == "mixed:QDQ8+float32"

"""End to end: transformers.js's pipelines on tiny model folders the harness makes in its layout,
in real Chrome and Firefox: feature-extraction on a BERT (Chrome: wasm, WebNN, WebGPU; Firefox:
wasm), text-generation on a Llama and automatic-speech-recognition on a Whisper (wasm). fp32
rows match PyTorch fp32 (the library's greedy ids are PyTorch's); every dtype row is judged
against onnxruntime on the same file and says what the file holds, which ORT build ran and where
ORT placed the nodes; a dtype the browser cannot run is the library's own refusal."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import require_browser
from speech_models import tiny_whisper
from test_decoder import tiny_hf_config
from test_transformersjs import tiny_bert, users_folder

from fixed_web_platform.engines.transformersjs import TJS_BUILDS, TJS_MODULE, TJS_ORT_BUILD, folders
from fixed_web_platform import sweep
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.models import source
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads import DecoderWorkload, EncoderWorkload, SpeechWorkload

pytestmark = pytest.mark.browser
QUICK = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=2, timeout_s=120)
WANTED = {  # browser -> (platform, dtype) runs
    BrowserName.CHROME: {(Platform.WASM, "fp32"), (Platform.WASM, "q8"), (Platform.WASM, "q4"),
                         (Platform.WEBNN, "fp32"), (Platform.WEBGPU, "fp32"), (Platform.WEBGPU, "fp16"),
                         (Platform.WASM, "held")},
    BrowserName.FIREFOX: {(Platform.WASM, "fp32"), (Platform.WASM, "q4")},
}


DECODER_WANTED = {(Platform.WASM, "fp32"), (Platform.WASM, "q4")}
USERS_WANTED = {"fp32", "q4", "bnb4", "held"}
"""A user's folder without weights (Chrome wasm): fp32 and a q4 file cut short; it lacks bnb4; the
held variant (gptq, as every held run here) made from its fp32 graph."""


def _tiny_llama(folder: Path) -> DecoderWorkload:
    tiny_hf_config(vocab_size=30522, hidden_size=64, intermediate_size=128, max_position_embeddings=128,
                   num_attention_heads=4, num_key_value_heads=2).save_pretrained(folder)
    return DecoderWorkload.create(str(folder), prompt_len=12, new_tokens=5, eval_len=16, random_weights=True)


def _sweep(browser: BrowserName, out: Path) -> dict:
    require_browser(browser)
    assert (TJS_BUILDS[0].directory / TJS_MODULE).is_file(), "run scripts/setup.sh first"
    encoder = EncoderWorkload.create(str(tiny_bert(out.parent / "tiny-bert")), batch_size=2, seq_len=8,
                                     random_weights=True)
    decoder = _tiny_llama(out.parent / "tiny-llama")
    speech = SpeechWorkload.from_options(str(tiny_whisper(out.parent / "tiny-whisper")), clips=2, max_tokens=4)
    users = EncoderWorkload.create(str(_users(encoder, out.parent / "users")), batch_size=2, seq_len=8)
    plan = build_plan([browser], [Platform.WASM, Platform.WEBNN, Platform.WEBGPU], [encoder, decoder, speech, users],
                      [32, 16, 8, 4], engines=[EngineName.TRANSFORMERSJS], weight_quant=["minmax", "gptq"])
    plan = [r for r in plan if r.weight_format != "held" or r.weight_quant == "gptq"]
    chrome = browser is BrowserName.CHROME
    plan = [r for r in plan if (r.platform, r.weight_format) in WANTED[browser] and r.workload == encoder
            or chrome and r.workload in (decoder, speech) and (r.platform, r.weight_format) in DECODER_WANTED
            or chrome and r.workload == users and r.platform is Platform.WASM and r.weight_format in USERS_WANTED]
    writer = sweep.start(plan, QUICK, output_dir=out)  # with plan.json, from which the report writes its picks
    rows = asyncio.run(run_sweep(plan, writer, SweepOptions(timing=QUICK)))
    return {("users" if r.kind_fields.get("weights") == source.ONNX_WEIGHTS else r.kind, r.platform, r.weight_format): r
            for r in rows}


def _users(encoder: EncoderWorkload, out: Path) -> Path:
    """The tiny BERT's folder as a user brings one: no weights, fp32 with its weights in an external
    data chunk (onnx/model.onnx_data, as transformers.js names them for graphs over 2 GB) and a q4
    file cut short."""
    import onnx

    made = folders.made_folder(source.load(source.resolve(encoder.model, True), True, 1), "encoder")
    users_folder(made, out, ("fp32", "q4"))
    fp32 = out / "onnx/model.onnx"
    onnx.save(onnx.load(str(fp32)), str(fp32), save_as_external_data=True, location="model.onnx_data")
    assert fp32.stat().st_size < (out / "onnx/model.onnx_data").stat().st_size / 10  # the weights moved out
    (out / "onnx/model_q4.onnx").write_bytes((out / "onnx/model_q4.onnx").read_bytes()[:4096])
    return out


@pytest.fixture(scope="module")
def chrome_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tjs-chrome") / "results"


@pytest.fixture(scope="module")
def chrome(chrome_dir: Path) -> dict:
    return _sweep(BrowserName.CHROME, chrome_dir)


def test_chrome_runs_the_pipeline_on_every_device_and_judges_each_dtype(chrome: dict) -> None:
    chrome = {key[1:]: row for key, row in chrome.items() if key[0] == "encoder"}
    assert set(chrome) == WANTED[BrowserName.CHROME]
    for platform in (Platform.WASM, Platform.WEBNN, Platform.WEBGPU):
        fp32 = chrome[(platform, "fp32")]
        assert fp32.outcome == Outcome.OK, (platform, fp32.reason)
        assert fp32.executed_on == platform.value, fp32.reason
        assert fp32.cosine_min >= 0.9999  # vs PyTorch fp32
        assert fp32.rel_error_vs_dequantized <= fp32.kernel_tolerance
        assert fp32.engine_version == f"transformers.js {TJS_BUILDS[0].version} ORT {TJS_ORT_BUILD}"
        measured = {Platform.WEBGPU: fp32.gpu_peak_bytes, Platform.WASM: fp32.wasm_peak_bytes,
                    Platform.WEBNN: fp32.webnn_constant_bytes}[platform]  # web/meter.js under the library
        # WebNN: every weight is handed to the graph builder; a few small initializers (shape
        # arithmetic, 7 kB of 4 MB here) ORT computes on its side
        least = 0.99 * fp32.weight_bytes if platform is Platform.WEBNN else fp32.weight_bytes
        assert measured >= least, (platform, measured, fp32.weight_bytes)
    assert chrome[(Platform.WEBGPU, "fp32")].buffer_cache == "bucket"  # ORT's default, named
    q8, q4, fp32 = chrome[(Platform.WASM, "q8")], chrome[(Platform.WASM, "q4")], chrome[(Platform.WASM, "fp32")]
    assert q8.outcome == q4.outcome == Outcome.OK, (q8.reason, q4.reason)
    assert "DynamicQuantizeLinear" in q8.kind_fields["onnx_inventory"] and q8.weight_dtype == "int8"
    assert "onnx reference evaluator" in q8.reason  # dynamic int8 is judged against a third implementation
    assert "MatMulNBits/int4" in q4.kind_fields["onnx_inventory"] and q4.weight_dtype == "int4"
    assert q4.kind_fields["precision_promise"] == "" and q4.weight_bytes < fp32.weight_bytes
    assert q4.rel_error_vs_dequantized <= q4.kernel_tolerance < q4.rel_error_vs_float
    half = chrome[(Platform.WEBGPU, "fp16")]  # SwiftShader has no shader-f16: the library says so
    if half.outcome != Outcome.OK:
        assert half.outcome == Outcome.UNSUPPORTED and "does not support fp16" in half.reason, half.reason


def test_a_users_folder_runs_as_it_is_its_broken_file_failing_with_the_librarys_error(chrome: dict) -> None:
    fp32, q4, bnb4 = (chrome[("users", Platform.WASM, d)] for d in ("fp32", "q4", "bnb4"))
    assert fp32.outcome == Outcome.OK and fp32.cosine_min >= 0.9999, fp32.reason  # vs its own fp32 graph
    assert fp32.kind_fields["onnx_inventory"] and fp32.rel_error_vs_dequantized <= fp32.kernel_tolerance
    assert q4.outcome == Outcome.FAILED and "transformers.js load model" in q4.reason, q4.reason
    assert "protobuf" in q4.reason.split("browser said:")[1].lower()  # the library's own words
    assert bnb4.outcome == Outcome.UNSUPPORTED and "no onnx/model_bnb4.onnx" in bnb4.reason
    for key in (("users", Platform.WASM, "held"), ("encoder", Platform.WASM, "held")):  # gptq's codes, the q4 file
        held = chrome[key]
        assert held.outcome == Outcome.OK and held.weight_quant == "gptq", (key, held.reason)
        assert "MatMulNBits/int4" in held.kind_fields["onnx_inventory"] and held.calibration == "builtin-calibration"
        assert held.rel_error_vs_dequantized <= held.kernel_tolerance


def test_each_pick_is_written_as_a_folder_the_library_loads(chrome: dict, chrome_dir: Path, tmp_path: Path) -> None:
    """The report writes each transformers.js pick as a folder in the library's layout; the user's
    folder's pick, loaded back as a folder in Chrome, returns what the picked run returned."""
    from fixed_web_platform.report.render import build_report

    build_report([chrome_dir], tmp_path / "report")
    ship = tmp_path / "report" / "ship"
    picked = sorted(p for p in ship.iterdir() if p.is_dir() and p.name.startswith("users."))
    assert len(picked) == 1 and (picked[0] / "config.json").is_file(), list(ship.iterdir())
    dtype = picked[0].name.split(".", 1)[1].split("-")[0]  # users.fp32, users.held-gptq-4bit
    row = chrome[("users", Platform.WASM, dtype)]
    card = (ship / f"{picked[0].name}.md").read_text()
    assert "Picked for chrome · transformersjs wasm" in card and f"{row.cosine_min:.4f}" in card
    folder = tmp_path / "again"
    shutil.copytree(picked[0], folder)
    for name in ("model.onnx", "model.onnx_data"):  # the float reference a weightless folder is judged by
        if not (folder / "onnx" / name).exists():
            shutil.copy(chrome_dir.parent / "users" / "onnx" / name, folder / "onnx" / name)
    again = EncoderWorkload.create(str(folder), batch_size=2, seq_len=8)
    plan = build_plan([BrowserName.CHROME], [Platform.WASM], [again], [row.bits_requested],
                      engines=[EngineName.TRANSFORMERSJS], dtypes=("q4" if dtype == "held" else dtype,))
    (loaded,) = asyncio.run(run_sweep(plan, ResultWriter(tmp_path / "results"), SweepOptions(timing=QUICK)))
    assert loaded.outcome == Outcome.OK, loaded.reason
    first, second = np.load(chrome_dir / row.outputs_file), np.load(tmp_path / "results" / loaded.outputs_file)
    assert np.allclose(first["embeddings"], second["embeddings"], atol=1e-6)  # the file that ran, written out


def test_firefox_runs_the_pipeline_on_wasm(tmp_path_factory: pytest.TempPathFactory) -> None:
    rows = _sweep(BrowserName.FIREFOX, tmp_path_factory.mktemp("tjs-firefox") / "results")
    for dtype in ("fp32", "q4"):
        row = rows[("encoder", Platform.WASM, dtype)]
        assert row.outcome == Outcome.OK, row.reason
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance
    assert rows[("encoder", Platform.WASM, "fp32")].cosine_min >= 0.9999


def test_the_library_generates_pytorchs_greedy_ids_and_is_timed_token_by_token(chrome: dict) -> None:
    fp32, q4 = chrome[("decoder", Platform.WASM, "fp32")], chrome[("decoder", Platform.WASM, "q4")]
    assert fp32.outcome == q4.outcome == Outcome.OK, (fp32.reason, q4.reason)
    assert fp32.next_token_top1 >= 0.99 and fp32.kind_fields["leading_tokens_equal"] == 5  # PyTorch's greedy ids
    assert fp32.rel_error_vs_dequantized <= fp32.kernel_tolerance and q4.rel_error_vs_dequantized <= q4.kernel_tolerance
    for row in (fp32, q4):
        assert row.kind_fields["ttft_ms"] > 0 and row.kind_fields["decode_tokens_per_s"] > 0
    assert "MatMulNBits/int4" in q4.kind_fields["onnx_inventory"] and q4.weight_bytes < fp32.weight_bytes


def test_the_asr_pipeline_transcribes_as_pytorch_and_is_timed_inside(chrome: dict) -> None:
    fp32, q4 = chrome[("speech", Platform.WASM, "fp32")], chrome[("speech", Platform.WASM, "q4")]
    assert fp32.outcome == q4.outcome == Outcome.OK, (fp32.reason, q4.reason)
    assert fp32.kind_fields["clips_equal_fp32"] == 2  # the library's greedy ids are PyTorch's, clip by clip
    assert fp32.kind_fields["frontend_error"] < 1e-3  # its own log-mel front end, against Python's
    assert fp32.kind_fields["encoder_ms"] > 0 and fp32.kind_fields["frontend_ms"] > 0
    for row in (fp32, q4):
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, row.reason
    assert "MatMulNBits/int4" in q4.kind_fields["onnx_inventory"] and q4.weight_bytes < fp32.weight_bytes

"""The speech kind without a browser: CTranslate2's file format read and written back, its
Whisper mapped onto transformers' names, the float64 numpy Whisper against PyTorch, the clips
(espeak-ng's set, WAV folders, resampling), the word error rate, the plan, and bad input as one
line with exit status 2."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile
from speech_models import tiny_whisper

from fixed_web_platform.architectures.whisper import reference, torch_module
from fixed_web_platform.architectures.whisper.config import WhisperConfig
from fixed_web_platform.cli import main as cli
from fixed_web_platform.formats import ctranslate2
from fixed_web_platform.models import source
from fixed_web_platform.plan import build_plan
from fixed_web_platform.precision.held import hold_weights
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform
from fixed_web_platform.workloads.speech import SpeechWorkload, accuracy, audio, calibration
from fixed_web_platform.workloads.speech.prepared import prepare_speech


@pytest.fixture(scope="module")
def tiny_en() -> source.LoadedModel:
    return source.load(source.resolve("whisper-tiny.en"))


def test_ctranslate2_round_trip(tmp_path: Path) -> None:
    """The packaged tiny.en file reads, writes back byte for byte, and a file of every dtype the
    reader knows survives the trip; a truncated or unknown-version file is one clear error."""
    path = source.resolve("whisper-tiny.en").folder / ctranslate2.MODEL_FILE
    model = ctranslate2.read(path)
    assert model.spec == "WhisperSpec" and len(model.variables) == 148
    assert model.aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    assert sum(v.size for v in model.variables.values()) == pytest.approx(37.76e6, rel=1e-3)
    copy = tmp_path / "model.bin"
    ctranslate2.write(copy, model)
    assert copy.read_bytes() == path.read_bytes()
    rng = np.random.default_rng(0)
    mixed = ctranslate2.CTranslate2Model("TestSpec", 7, {
        "a/f32": rng.standard_normal((3, 4)).astype(np.float32), "b/f16": rng.standard_normal(5).astype(np.float16),
        "c/i8": np.array(3, np.int8), "d/i16": np.arange(6, dtype=np.int16).reshape(2, 3),
        "e/i32": np.arange(4, dtype=np.int32)}, {"z": "a/f32"})
    ctranslate2.write(tmp_path / "mixed.bin", mixed)
    back = ctranslate2.read(tmp_path / "mixed.bin")
    assert (back.spec, back.revision, back.aliases) == ("TestSpec", 7, {"z": "a/f32"})
    for name, value in mixed.variables.items():
        assert back.variables[name].dtype == value.dtype and np.array_equal(back.variables[name], value)
    assert np.array_equal(back.get("z"), mixed.variables["a/f32"])
    data = (tmp_path / "mixed.bin").read_bytes()
    (tmp_path / "short.bin").write_bytes(data[:-9])
    with pytest.raises(ctranslate2.CTranslate2Error, match="truncated"):
        ctranslate2.read(tmp_path / "short.bin")
    (tmp_path / "v5.bin").write_bytes(struct.pack("<I", 5) + data[4:])
    with pytest.raises(ctranslate2.CTranslate2Error, match="binary version 5"):
        ctranslate2.read(tmp_path / "v5.bin")


def test_tiny_en_maps_onto_transformers(tiny_en: source.LoadedModel) -> None:
    """Every tensor lands on a transformers name (the module loads strictly), the fused q|k|v
    and cross k|v split in order, and the projection is the token embeddings."""
    cfg = tiny_en.config
    assert cfg == WhisperConfig(d_model=384, encoder_layers=4, decoder_layers=4, heads=6, ffn=1536, mels=80,
                                vocab=51864)
    raw = ctranslate2.read(source.resolve("whisper-tiny.en").folder / ctranslate2.MODEL_FILE).variables
    fused = raw["decoder/layer_1/self_attention/linear_0/weight"].astype(np.float32)
    w = tiny_en.weights
    for part, name in enumerate(("q_proj", "k_proj", "v_proj")):
        assert np.array_equal(w[f"model.decoder.layers.1.self_attn.{name}.weight"], fused[part * 384:(part + 1) * 384])
    cross = raw["decoder/layer_2/attention/linear_1/weight"].astype(np.float32)
    assert np.array_equal(w["model.decoder.layers.2.encoder_attn.v_proj.weight"], cross[384:])
    assert "model.decoder.layers.2.encoder_attn.k_proj.bias" not in w
    assert np.array_equal(w["proj_out.weight"], w["model.decoder.embed_tokens.weight"])
    tiny_en.module()  # raises on any missing or unexpected key


def test_numpy_whisper_matches_pytorch(tiny_en: source.LoadedModel) -> None:
    """On the first built-in clip: the float64 encoder, the KV-cached decoder's logits and the
    greedy transcript match transformers' fp32 Whisper (which reads it right)."""
    cfg, net = tiny_en.config, tiny_en.module()
    clip = audio.builtin_clips(1)[0]
    feats = audio.features(audio.read_wav(clip.path), cfg.mels)
    ours = reference.encode(cfg, tiny_en.weights, feats)
    theirs = torch_module.encode(net, feats)
    assert np.max(np.abs(ours - theirs)) < 1e-3
    decoder = reference.Decoder(cfg, tiny_en.weights, ours)
    ids = [*cfg.prompt, 383, 3797]
    stepped = np.concatenate([decoder.step(ids[:2]), decoder.step(ids[2:3]), decoder.step(ids[3:])])
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    with torch.no_grad():
        full = net(encoder_outputs=BaseModelOutput(last_hidden_state=torch.from_numpy(theirs.astype(np.float32))[None]),
                   decoder_input_ids=torch.tensor([ids])).logits[0].double().numpy()
    assert np.max(np.abs(stepped - full)) < 2e-3 * np.abs(full).max()
    ours_ids, _ = reference.greedy(cfg, tiny_en.weights, ours, 20)
    assert ours_ids == torch_module.greedy(cfg, net, theirs, 20)
    tokenizer = SpeechWorkload.from_options("whisper-tiny.en", clips=1)
    from fixed_web_platform.workloads.speech.prepared import tokenizer_for

    assert tokenizer_for(tokenizer).decode(ours_ids, skip_special_tokens=True).strip() == clip.reference


def test_numpy_whisper_matches_pytorch_random_weights(tmp_path: Path) -> None:
    """A local Hugging Face folder (the tests' small Whisper) loads through the same path, and the
    numpy forward matches PyTorch on it too (GELU, norms and biases not of tiny.en's values)."""
    folder = tiny_whisper(tmp_path / "tiny-whisper")
    loaded = source.load(source.resolve(str(folder)))
    cfg = loaded.config
    rng = np.random.default_rng(1)
    feats = rng.uniform(-1, 1, (cfg.mels, cfg.frames)).astype(np.float32)
    ours = reference.encode(cfg, loaded.weights, feats)
    theirs = torch_module.encode(loaded.module(), feats)
    assert np.max(np.abs(ours - theirs)) < 1e-4


def test_whisper_tiny_runs_tiny_en_with_a_notice(capsys: pytest.CaptureFixture[str]) -> None:
    resolved = source.resolve("whisper-tiny")
    assert (resolved.name, resolved.asked, resolved.ctranslate2) == ("whisper-tiny.en", "whisper-tiny", True)
    assert "in place of whisper-tiny" in resolved.origin
    random = source.resolve("whisper-tiny", random_weights=True)
    assert random.folder is None and source.architecture(random)[1].vocab == 51865
    assert source.architecture(source.resolve("whisper-small", random_weights=True))[1].d_model == 768


def test_builtin_clips_and_wav_folders(tmp_path: Path) -> None:
    clips = audio.builtin_clips(3)
    assert [c.reference for c in clips] == audio.builtin_sentences()[:3]
    samples = audio.read_wav(clips[0].path)
    assert samples.dtype == np.float32 and 1.0 < len(samples) / 16000 < 3.0 and np.abs(samples).max() > 0.1
    # a stereo 44.1 kHz int16 file: averaged to mono and resampled to 16 kHz
    t = np.arange(44100) / 44100
    tone = (0.5 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)
    wavfile.write(tmp_path / "b.wav", 44100, np.stack([tone, tone], axis=1))
    wavfile.write(tmp_path / "a.wav", 16000, np.zeros(8000, np.int16))
    (tmp_path / "transcripts.txt").write_text("a.wav silence\nb.wav\ta tone\n")
    found = audio.folder_clips(tmp_path)
    assert [(c.name, c.reference) for c in found] == [("a.wav", "silence"), ("b.wav", "a tone")]
    resampled = audio.read_wav(str(tmp_path / "b.wav"))
    assert len(resampled) == 16000 and abs(np.abs(resampled).max() - 0.5) < 0.02
    (tmp_path / "transcripts.txt").unlink()
    assert [c.reference for c in audio.folder_clips(tmp_path)] == ["", ""]


def test_word_error_rate() -> None:
    assert accuracy.wer(["The cat sat on the mat."], ["the cat sat on the mat"]) == 0.0
    assert accuracy.wer(["The cat sat."], ["The dog sat."]) == pytest.approx(1 / 3)
    assert accuracy.wer(["red green", "blue gray black"], ["red", "blue gray black"]) == pytest.approx(1 / 5)
    assert accuracy.normalise("Twenty-one cats!") == "21 cats"  # Whisper's English normaliser
    assert accuracy.wer([""], ["anything"]) is None


def test_prepared_references_and_plan() -> None:
    """The run's references: fp32 transcripts are the clips' own ids; the 2-bit first logits
    move away from fp32's while the float64 reference follows the held weights. The harness's
    WebNN graphs are refused before launch, with who runs speech."""
    workload = SpeechWorkload.from_options("whisper-tiny.en", clips=1, max_tokens=12)
    fp32 = prepare_speech(workload, 32, 32, 0)
    two = prepare_speech(workload, 2, 32, 0)
    assert fp32.text(fp32.transcripts_fp32[0]) == workload.clips[0].reference
    from fixed_web_platform.precision.quant import cosine_similarity

    assert cosine_similarity(fp32.ref_dequantized, fp32.ref_float) > 0.9999
    assert cosine_similarity(two.ref_dequantized, two.ref_float) < 0.9
    assert two.weight_bytes < fp32.weight_bytes / 2
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WEBNN, Platform.WASM], [workload], [4],
                      engines=[EngineName.HARNESS, EngineName.ORT, EngineName.WLLAMA])
    refused = {(str(r.engine), str(r.platform)): r.refused for r in plan}
    runs = {"harness/webgpu", "harness/webnn", "ort/wasm", "ort/webgpu", "ort/webnn"}
    assert {"/".join(k) for k, why in refused.items() if not why} == runs
    every = sorted(runs | {f"transformersjs/{p}" for p in ("wasm", "webgpu", "webnn")})
    assert ("does not run speech workloads (engines that do: " + ", ".join(every) + ")"
            in refused[("wllama", "wasm")])


def test_speech_calibration_is_apart_from_evaluation_and_reaches_every_layer(tmp_path: Path) -> None:
    """gptq on Whisper calibrates on the calibration sentences spoken, none of them an evaluation
    clip; the float model transcribing them reaches every linear layer (encoder, decoder, cross
    keys and values, output projection), and gptq's 4-bit weights answer those inputs better
    than min/max's."""
    assert not {c.reference for c in calibration.calibration_clips()} & set(audio.builtin_sentences())
    loaded = source.load(source.resolve(str(tiny_whisper(tmp_path / "tiny-whisper"))))
    layers = tuple(lay.name for lay in loaded.config.linear_layers())
    moments = calibration.clip_moments(loaded, 3, layers, clips=2)
    assert set(moments) == set(layers)
    for name, h in moments.items():
        k = loaded.weights[f"{name}.weight"].shape[1]
        assert h.shape == (k, k) and np.allclose(h, h.T) and np.all(np.diag(h) > 0)
    for name in ("model.encoder.layers.0.fc1", "model.decoder.layers.1.encoder_attn.k_proj", "proj_out"):
        w = loaded.weights[f"{name}.weight"].astype(np.float64)

        def output_error(quantizer: str, name: str = name, w: np.ndarray = w) -> float:
            d = hold_weights(w.astype(np.float32), 4, 32, quantizer=quantizer, hessian=moments[name]).w_exec - w
            return float(np.sum((d @ moments[name]) * d))  # trace(d H d^T)

        assert output_error("gptq") < 0.9 * output_error("minmax"), name


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, no_browser: None, capsys: pytest.CaptureFixture[str]) -> None:
    wavfile.write(tmp_path / "a.wav", 16000, np.zeros(8000, np.int16))
    (tmp_path / "transcripts.txt").write_text("b.wav hello\n")
    (tmp_path / "empty").mkdir()
    long = tmp_path / "long"
    long.mkdir()
    wavfile.write(long / "x.wav", 16000, np.zeros(16000 * 31, np.int16))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x.wav").write_bytes(b"RIFF not really")
    bad_ct2 = tmp_path / "ct2"
    bad_ct2.mkdir()
    (bad_ct2 / "model.bin").write_bytes(struct.pack("<I", 6) + b"\x05\x00Spec")
    base = ["--model", "whisper-tiny.en", "--platform", "webgpu"]
    cases = {
        "bits 3": ([*base, "--bits", "3"], "bits 3"),
        "too many clips": ([*base, "--clips", "99"], "--clips must be between 1 and 30"),
        "too many tokens": ([*base, "--max-tokens", "1000"], "--max-tokens must be between 1 and 446"),
        "no folder": ([*base, "--inputs", str(tmp_path / "nowhere")], "not a folder of WAV files"),
        "no wavs": ([*base, "--inputs", str(tmp_path / "empty")], "no .wav files in it"),
        "transcript of a missing file": ([*base, "--inputs", str(tmp_path)], "'b.wav' is not a .wav file"),
        "longer than 30 s": ([*base, "--inputs", str(long)], "longer than one 30-second window"),
        "not a wav": ([*base, "--inputs", str(broken)], "not a readable WAV file"),
        "broken CTranslate2 file": (["--model", str(bad_ct2)], "does not load"),
        "rules matching nothing": ([*base, "--precision-rules", str(tmp_path / "rules.json")], "matches no layer"),
    }
    (tmp_path / "rules.json").write_text('[{"match": "nothing.*", "bits": 8}]')
    for name, (argv, message) in cases.items():
        assert cli.main(argv) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        err = [line for line in err if not line.startswith("notice:")]
        assert len(err) == 1 and message in err[0], (name, err)


def test_onnx_graphs_hold_the_harness_bytes_and_match_the_reference(tmp_path: Path) -> None:
    """ONNX Runtime Web's graphs (engines/ort/onnx_speech.py), run here on onnxruntime's CPU
    provider: every linear layer is a MatMulNBits node of the run's bytes, the encoder's output and
    the first logits after the prompt match the float64 Whisper with the held weights, and a
    decoder step with the cache reproduces the reference's next logits."""
    import dataclasses

    import onnxruntime as ort

    from fixed_web_platform.engines.ort import onnx_speech

    folder = tiny_whisper(tmp_path / "tiny-whisper")
    workload = SpeechWorkload.from_options(str(folder), clips=1, max_tokens=4)
    prepared = dataclasses.replace(prepare_speech(workload, 4, 32, 0, unsigned=True), front_end_on_device=False)
    model = onnx_speech.speech_model(prepared)
    cfg = prepared.config
    assert [layer.name for layer in model.layers] == [p.layer.name for p in prepared.plan]
    assert {layer.weight_dtype for layer in model.layers} == {"MatMulNBits4"}
    assert sum(layer.weight_bytes for layer in model.layers) == sum(hl.held.weight_bytes for hl in prepared.held.layers)
    enc = ort.InferenceSession(model.encoder, providers=["CPUExecutionProvider"])
    dec = ort.InferenceSession(model.decoder, providers=["CPUExecutionProvider"])
    feats = np.frombuffer(prepared.features_tensor(), np.float32).reshape(1, cfg.mels, cfg.frames)
    outs = dict(zip([o.name for o in enc.get_outputs()], enc.run(None, {"input_features": feats})))
    assert np.max(np.abs(outs["encoder_out"][0] - prepared.encoder_reference)) < 1e-4
    suppress = {k: np.frombuffer(v, np.float32) for k, v in prepared.suppress_tensors().items() if "suppress" in k}
    context = len(cfg.prompt) + 4
    cache = {f"past.{i}.{part}": np.zeros((1, cfg.heads, context, cfg.head_dim), np.float32)
             for i in range(cfg.decoder_layers) for part in ("key", "value")}
    cross = {k: v for k, v in outs.items() if k.startswith("cross.")}

    def step(ids: list[int], position: int, first: bool) -> tuple[np.ndarray, int]:
        rows, total = len(ids), context + len(ids)
        bias = np.full((1, 1, rows, total), -1e9, np.float32)
        for r in range(rows):  # the cache's last `position` rows and the new rows up to this one
            bias[0, 0, r, context - position:context + r + 1] = 0
        res = dec.run(None, {"input_ids": np.array([ids], np.int32),
                             "position_ids": np.arange(position, position + rows, dtype=np.int32)[None],
                             "attention_bias": bias, "suppress": suppress["suppress.first" if first else "suppress.rest"],
                             **cross, **cache})
        cache.update(zip(cache, res[2:]))
        return res[0][0], int(res[1][0, 0])

    logits, first_id = step(list(cfg.prompt), 0, True)
    assert np.sqrt(np.mean((logits - prepared.ref_dequantized) ** 2)) < 1e-4 * np.sqrt(np.mean(prepared.ref_dequantized ** 2)) + 1e-6
    from fixed_web_platform.architectures.whisper import decoding

    assert first_id == decoding.choose(cfg, logits, first=True)
    decoder = reference.Decoder(cfg, prepared.held.exec_weights(), prepared.encoder_reference)
    decoder.step(list(cfg.prompt))
    expected = decoder.step([first_id])[-1]
    logits, _ = step([first_id], len(cfg.prompt), False)
    assert np.max(np.abs(logits - expected)) < 1e-3 * np.abs(expected).max()


def test_int8_whisper_is_judged_stage_by_stage(tmp_path: Path) -> None:
    """With int8 activations the first logits are judged against the float64 decoder on the page's
    own encoder output (an encoder output off by flips moves the logits far, yet the decoder is
    right), and the encoder output against the float64 encoder within its own flip floor."""
    from fixed_web_platform.precision.quant import error_metrics
    from fixed_web_platform.workloads.speech import prepared as speech_prepared

    workload = SpeechWorkload.from_options(str(tiny_whisper(tmp_path / "tiny-whisper")), clips=1, max_tokens=4)
    prepared = prepare_speech(workload, 8, 32, 0, act_bits=8, observer="minmax", out_int8=True)
    assert prepared.int8 is not None and "stage by stage" in prepared.tolerance_basis
    weights, act = prepared.held.exec_weights(), prepared.int8.act
    right = {speech_prepared.ENCODER_OUT: prepared.encoder_reference,
             speech_prepared.FIRST_LOGITS: prepared.ref_dequantized}
    assert prepared.staged_check(right) == (pytest.approx(prepared.ref_dequantized, abs=0), "")
    off = prepared.encoder_reference * (1 + 0.05 * np.random.default_rng(0).standard_normal(
        prepared.encoder_reference.shape))  # an encoder output 5% off: its own fault, not the decoder's
    logits = speech_prepared.first_logits(prepared.config, weights, off, act)
    ref, problem = prepared.staged_check({speech_prepared.ENCODER_OUT: off, speech_prepared.FIRST_LOGITS: logits})
    assert error_metrics(logits, ref)["rel_error"] == 0  # the decoder judged from its own input
    assert error_metrics(logits, prepared.ref_dequantized)["rel_error"] > 1e-3  # what judging end to end sees
    assert "the encoder output lands 0.0499 from the float64 encoder" in problem

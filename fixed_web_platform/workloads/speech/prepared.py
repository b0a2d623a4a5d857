"""A speech run prepared in Python: the bytes the page gets (PCM, front-end tables, weights), and
the references its outputs are judged against.

The page returns ``features`` float32 [mels, frames] (its own log-mel front end on the first
clip), ``encoder_out`` float32 [positions, d_model] (the first clip's encoder output),
``first_logits`` float32 [vocab] (the first clip's logits after the prompt: the whole model,
encoder, cross-attention and decoder, in one vector) and ``token_ids`` int32 [clips, max_tokens]
(each clip's transcript ids, -1 after its end).

- ``ref_float``: PyTorch fp32's first logits with the model's float weights: what precision costs.
- ``ref_dequantized``: the harness's float64 numpy Whisper (architectures/whisper/reference.py)
  with the weights this run holds (and, with int8 activations, each quantized layer's input, and
  in WebNN's fused form its output, quantized with the scale and zero point calibrated on the
  calibration clips), on Python's features: is the engine right. With int8 activations the
  check goes stage by stage (``staged_check``, ``Int8Stages``): the first logits against the
  float64 decoder on the page's own encoder output, the encoder output against the float64
  encoder.
- PyTorch fp32's transcript of every clip (the WER of the model itself, and what the engine's
  transcripts are compared to).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...architectures import ActQuant
from ...architectures.whisper import reference, torch_module
from ...architectures.whisper.config import CHUNK_SECONDS, N_FFT, SAMPLE_RATE, WhisperConfig
from ...models import calibration as models_calibration
from ...models import rules, smoothing, source
from ...models.quantized import HeldModel, hold_model
from ...precision import quant
from ...precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ...prepared_caches import per_configuration
from ..base import HeldModelFacts, SavedOutputs, TensorSpec
from ..int8_activations import FLIP_PERTURBATION, Int8Check, flip_floor
from . import accuracy, audio, calibration
from .workload import SpeechWorkload

KERNEL_TOLERANCE_F32 = 2e-3
KERNEL_TOLERANCE_F16 = 1e-1
"""Relative RMS error of the first logits vs the float64 Whisper with the held weights beyond
which the engine is wrong (f32 or f16 arithmetic through the encoder's 1500 positions and the
decoder; the page's features are its own, within ``frontend_error`` of Python's). f16: ORT's
float16 MatMul rounds every linear layer's input to float16 too; measured 5.7e-2 on Firefox's
WebGPU with every transcript equal to fp32's (the harness's f16 kernels, float32 inputs: 4.2e-3)."""
ARITHMETIC = {"f32": "f32 arithmetic",
              "f16": "f16 arithmetic, inputs of linear layers rounded to float16 where the engine does,"}
"""What a tolerance allows for, by compute dtype (``tolerance_basis`` adds where the features came from)."""

FEATURES, ENCODER_OUT, FIRST_LOGITS, TOKEN_IDS = "features", "encoder_out", "first_logits", "token_ids"
PAD_ID = -1


@dataclass(frozen=True, eq=False)
class Int8Stages:
    """Whisper's int8-activation check, one stage at a time. Rounding flips in the encoder's 1500
    positions move the first logits far: on whisper-tiny.en per token (2026-12-04, one clip,
    Chromium 153), references whose weights carry FLIP_PERTURBATION noise landed 0.15-0.35 from
    the int8 reference (12 seeds), and correct engines as far (harness WebNN 0.22, ORT 0.16),
    while from each page's own encoder output the float64 decoder lands 0.017 (harness WebNN) and
    0.0008 (ORT) from its first logits. So each stage is judged from its own input: the first
    logits against the float64 decoder on the page's encoder output, within the decoder's flip
    floor (``decoder_floor``: its references perturbed on the reference encoder output), and the
    encoder output against the float64 encoder within its own (``encoder_floor``)."""

    act: ActQuant
    decoder_floor: float
    encoder_floor: float

    @property
    def basis(self) -> str:
        return (f"int8 activations, stage by stage: the first logits against the float64 decoder on the page's "
                f"own encoder output, references with {FLIP_PERTURBATION:g} weight noise move by up to "
                f"{self.decoder_floor:.2g}; the encoder output within its references' {self.encoder_floor:.2g}")


@dataclass(frozen=True, eq=False)
class PreparedSpeech(HeldModelFacts):
    workload: SpeechWorkload
    bits: int
    block_size: int
    held: HeldModel
    plan: tuple[rules.LayerPrecision, ...]
    pcm: tuple[np.ndarray, ...]
    """Each clip's 16 kHz samples (float32)."""
    features: np.ndarray
    """Python's log-mel features of the first clip [mels, frames] (WhisperFeatureExtractor)."""
    ref_float: np.ndarray
    ref_dequantized: np.ndarray
    encoder_fp32: np.ndarray
    encoder_reference: np.ndarray
    transcripts_fp32: tuple[tuple[int, ...], ...]
    tokenizer: Any
    front_end_on_device: bool = True
    """The page computes the log-mel features (and returns the first clip's); False: the engine
    takes Python's features (``features_tensor``) and there is no front end to time or check."""
    act_bits: int = 32
    observer: str = ""
    act_quant: tuple[models_calibration.ActivationQuant | None, ...] = ()
    """int8 activations: each plan layer's input scale and zero point (None: float input)."""
    out_quant: tuple[models_calibration.OutputQuant | None, ...] = ()
    """int8 outputs (WebNN's fused form): each plan layer's x @ W^T scale and zero point."""
    int8: Int8Stages | None = None
    """int8 activations: what they change in the kernel check (workloads/int8_activations.py)."""

    @property
    def config(self) -> WhisperConfig:
        config = self.held.model.config
        assert isinstance(config, WhisperConfig)
        return config

    @property
    def durations_s(self) -> list[float]:
        return [len(p) / SAMPLE_RATE for p in self.pcm]

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        cfg = self.config
        front = (TensorSpec(FEATURES, "float32", (cfg.mels, cfg.frames)),) if self.front_end_on_device else ()
        return (*front,
                TensorSpec(ENCODER_OUT, "float32", (cfg.source_positions, cfg.d_model)),
                TensorSpec(FIRST_LOGITS, "float32", (cfg.vocab,)),
                TensorSpec(TOKEN_IDS, "int32", (len(self.pcm), self.workload.max_tokens)))

    def front_end_tensors(self) -> dict[str, bytes]:
        """The PCM of every clip back to back, and the front end's tables: the periodic Hann window,
        the DFT's cosines and sines (index n*f mod N_FFT) and the mel filter bank [bins, mels]."""
        n = np.arange(N_FFT)
        window = 0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)
        angles = 2 * np.pi * n / N_FFT
        filters = audio.feature_extractor(self.config.mels).mel_filters  # [N_FFT // 2 + 1, mels]
        return {"audio": np.concatenate(self.pcm).astype("<f4").tobytes(),
                "frontend.window": window.astype("<f4").tobytes(),
                "frontend.cos": np.cos(angles).astype("<f4").tobytes(),
                "frontend.sin": np.sin(angles).astype("<f4").tobytes(),
                "frontend.mel_filters": np.ascontiguousarray(filters, dtype="<f4").tobytes(),
                "prompt_ids": np.array(self.config.prompt, dtype="<i4").tobytes()}

    def tensors(self) -> dict[str, bytes]:
        return self.front_end_tensors() | self.held.tensors()

    def features_tensor(self) -> bytes:
        """Every clip's log-mel features from Python, [clips, mels, frames] float32 (for engines
        without a front end of their own)."""
        mels = self.config.mels
        return np.stack([audio.features(p, mels) for p in self.pcm]).astype("<f4").tobytes()

    def suppress_tensors(self) -> dict[str, bytes]:
        """decoding.py's rule as additive biases [vocab]: 0, or -inf for ids never chosen, at the
        first position of a transcript and after it."""
        cfg = self.config
        rest = np.zeros(cfg.vocab, np.float32)
        rest[cfg.timestamp_begin:] = -np.inf
        first = rest.copy()
        first[list(cfg.begin_suppress)] = -np.inf
        return {"suppress.first": first.astype("<f4").tobytes(), "suppress.rest": rest.astype("<f4").tobytes(),
                "prompt_ids": np.array(cfg.prompt, dtype="<i4").tobytes()}

    @property
    def precision_note(self) -> str:
        if self.act_bits != 8:
            return ""
        notes = (models_calibration.scale_note(self.act_quant),
                 models_calibration.held_note(self.plan, calibration.SpeechClips) if self.out_quant else "",
                 smoothing.note(self.held.model.architecture, self.held.model.config))
        return "; ".join(filter(None, notes))

    @property
    def tolerance_basis(self) -> str:
        start = "through the front end," if self.front_end_on_device else "from Python's features through"
        basis = f"{ARITHMETIC['f16' if self.bits == 16 else 'f32']} {start} the encoder's 1500 positions and the decoder"
        return f"{basis}; {self.int8.basis}" if self.int8 else basis

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return outputs[FIRST_LOGITS]

    def tolerance(self, compute_dtype: str) -> float:
        base = KERNEL_TOLERANCE_F16 if compute_dtype == "f16" else KERNEL_TOLERANCE_F32
        return max(base, self.int8.decoder_floor) if self.int8 else base

    def kernel_problem(self, judged: np.ndarray) -> str:
        return ""  # staged_check asks

    def staged_check(self, outputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, str]:
        """The first logits' reference and any fault: with int8 activations the float64 decoder on
        the page's own encoder output, which must lie within ``Int8Stages.encoder_floor`` of the
        float64 encoder's (Int8Stages says why)."""
        if not self.int8:
            return self.ref_dequantized, ""
        encoded = np.asarray(outputs[ENCODER_OUT], np.float64)
        weights = self.held.exec_weights()
        reference = first_logits(self.config, weights, encoded, self.int8.act)
        float_acts = first_logits(self.config, weights, encoded, None)
        problem = Int8Check(self.int8.decoder_floor, float_acts).problem(self.judged(outputs), reference)
        encoder_error = quant.error_metrics(encoded, self.encoder_reference)["rel_error"]
        if not encoder_error <= self.int8.encoder_floor:
            problem = "; ".join(filter(None, (problem, (
                f"the encoder output lands {encoder_error:.3g} from the float64 encoder's, beyond the "
                f"{self.int8.encoder_floor:.3g} its int8 rounding flips allow"))))
        return reference, problem

    def linear_int8(self) -> list[dict[str, Any]]:
        """Each plan layer's int8 input and output parameters for the page (``act``, ``out``: None
        where float), in the plan's order."""
        return models_calibration.linear_int8(self.plan, self.act_quant, self.out_quant)

    def transcripts(self, token_ids: np.ndarray) -> list[list[int]]:
        """Each clip's ids up to its first padding (-1); PageDataError-free: ids out of the
        vocabulary are kept and decode to nothing."""
        out = []
        for row in np.asarray(token_ids):
            ends = np.flatnonzero(row == PAD_ID)
            out.append([int(t) for t in row[:ends[0] if len(ends) else len(row)]])
        return out

    def text(self, ids: list[int] | tuple[int, ...]) -> str:
        vocab = self.config.vocab
        return self.tokenizer.decode([i for i in ids if 0 <= i < vocab], skip_special_tokens=True).strip()

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        ids = self.transcripts(outputs[TOKEN_IDS])
        texts = [self.text(i) for i in ids]
        fp32_texts = [self.text(i) for i in self.transcripts_fp32]
        references = [c.reference for c in self.workload.clips]
        has_references = any(r.strip() for r in references)
        encoder = np.asarray(outputs[ENCODER_OUT], np.float64)
        return {
            "wer": accuracy.wer(references, texts) if has_references else None,
            "wer_fp32": accuracy.wer(references, fp32_texts) if has_references else None,
            "wer_vs_fp32": accuracy.wer(fp32_texts, texts),
            "clips_equal_fp32": sum(1 for a, b in zip(ids, self.transcripts_fp32) if tuple(a) == tuple(b)),
            "encoder_cosine_vs_fp32": quant.error_metrics(encoder, self.encoder_fp32)["cosine"],
            "encoder_error_vs_reference": quant.error_metrics(encoder, self.encoder_reference)["rel_error"],
            "frontend_error": (float(np.max(np.abs(np.asarray(outputs[FEATURES], np.float64) - self.features)))
                               if self.front_end_on_device else None),
            "transcript": texts[0] if texts else "",
        }

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> SavedOutputs:
        """outputs/<run_id>.json: one entry per clip (its transcript, ids, reference and fp32's)."""
        ids = self.transcripts(outputs[TOKEN_IDS])
        return [{"clip": clip.name, "text": self.text(i), "token_ids": i, "reference": clip.reference,
                 "fp32_text": self.text(f), "fp32_token_ids": list(f)}
                for clip, i, f in zip(self.workload.clips, ids, self.transcripts_fp32)]


def tokenizer_for(workload: SpeechWorkload) -> Any:
    """The model's tokenizer.json (a CTranslate2 folder has no tokenizer_config for AutoTokenizer);
    a configuration-only model borrows the packaged Whisper's."""
    from transformers import PreTrainedTokenizerFast

    resolved = source.resolve(workload.model, workload.random_weights)
    folder = resolved.folder
    if folder is None or not (folder / "tokenizer.json").is_file():
        fallback = next(iter(workload.architecture().packaged))
        folder = source.resolve(fallback).folder
    if folder is None or not (folder / "tokenizer.json").is_file():
        raise source.ModelError(f"model {workload.name} brings no tokenizer.json, and no packaged Whisper is installed")
    return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))


def first_logits(cfg: WhisperConfig, weights: Mapping[str, np.ndarray], encoded: np.ndarray,
                 act: ActQuant | None) -> np.ndarray:
    """The float64 decoder's logits after the prompt, over the encoder output ``encoded``."""
    return reference.Decoder(cfg, weights, encoded, act).step(list(cfg.prompt))[-1]


@functools.lru_cache(maxsize=2)
def fp32_references(model: source.LoadedModel, workload: SpeechWorkload) -> tuple[np.ndarray, np.ndarray,
                                                                                   tuple[tuple[int, ...], ...]]:
    """PyTorch fp32's first-clip encoder output and first logits, and every clip's transcript ids
    (cached: every engine and precision of a workload is judged against the same)."""
    import torch

    cfg = model.config
    net = model.module()
    transcripts = []
    first_encoder = first_logits = None
    for clip in workload.clips:
        feats = audio.features(audio.read_wav(clip.path), cfg.mels)
        encoded = torch_module.encode(net, feats)
        transcripts.append(tuple(torch_module.greedy(cfg, net, encoded, workload.max_tokens)))
        if first_encoder is None:
            first_encoder = encoded
            with torch.no_grad():
                from transformers.modeling_outputs import BaseModelOutput

                enc = BaseModelOutput(last_hidden_state=torch.from_numpy(encoded.astype(np.float32))[None])
                out = net(encoder_outputs=enc, decoder_input_ids=torch.tensor([list(cfg.prompt)]))
                first_logits = out.logits[0, -1].double().numpy()
    assert first_encoder is not None and first_logits is not None
    return first_encoder, first_logits, tuple(transcripts)


@per_configuration(maxsize=4)
def prepare_speech(workload: SpeechWorkload, bits: int, block_size: int, seed: int,
                   unsigned: bool = False, weight_quant: str = DEFAULT_QUANTIZER, act_bits: int = 32,
                   observer: str = "", out_int8: bool = False) -> PreparedSpeech:
    """Everything a speech run needs in Python (cached: engines of one configuration share it).
    ``unsigned`` holds 8/4/2-bit layers as unsigned integers (the same values; ONNX's MatMulNBits);
    ``weight_quant`` makes their codes (precision/quantizers.py). ``act_bits`` 8: the inputs of the
    8- and 4-bit layers are int8, calibrated by ``observer`` on the calibration clips
    (calibration.py: the encoder's and the decoder's rows as a transcription sees them);
    ``out_int8`` too: the 8-bit layers' x @ W^T as well (WebNN's fused form)."""
    original = source.load(source.resolve(workload.model, workload.random_weights), workload.random_weights, seed)
    loaded, clips = calibration.int8_model(workload, seed) if act_bits == 8 else (original, None)
    cfg = loaded.config
    plan = tuple(rules.assign(cfg.linear_layers(), workload.rules, bits, block_size))
    moments = functools.partial(calibration.clip_moments, loaded, workload.max_tokens)
    held = hold_model(loaded, plan, unsigned, weight_quant, moments if QUANTIZERS[weight_quant].calibrated else None)
    pcm = tuple(audio.read_wav(c.path) for c in workload.clips)
    if any(len(p) > CHUNK_SECONDS * SAMPLE_RATE for p in pcm):
        raise ValueError("a clip is longer than one 30-second window")
    features = audio.features(pcm[0], cfg.mels)
    encoder_fp32, logits_fp32, transcripts = fp32_references(original, workload)
    weights = held.exec_weights()
    act_quant, out_quant, by_name = models_calibration.int8_parameters(
        loaded, clips, plan, act_bits, observer, out_int8)

    act = by_name or None
    encoded = reference.encode(cfg, weights, features, act)
    logits = first_logits(cfg, weights, encoded, act)
    check = None
    if by_name:
        check = Int8Stages(by_name, flip_floor(lambda w, a: first_logits(cfg, w, encoded, a), weights, by_name, logits),
                           flip_floor(lambda w, a: reference.encode(cfg, w, features, a), weights, by_name, encoded))
    return PreparedSpeech(workload, bits, block_size, held, plan, pcm, features.astype(np.float64), logits_fp32,
                          logits, encoder_fp32, encoded, transcripts, tokenizer_for(workload),
                          act_bits=act_bits, observer=observer if act_bits == 8 else "", act_quant=act_quant,
                          out_quant=out_quant, int8=check)

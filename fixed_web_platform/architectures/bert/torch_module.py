"""BERT as a PyTorch module (transformers' BertModel with the run's float32 weights): the fp32
reference, the calibration run and the graph ONNX Runtime Web runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .config import BertConfig


def bert_module(cfg: BertConfig, weights: Mapping[str, np.ndarray]) -> Any:
    """transformers.BertModel (no pooler, eager attention) holding exactly ``weights``."""
    import torch
    import transformers

    hf_cfg = transformers.BertConfig(
        vocab_size=cfg.vocab, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
        max_position_embeddings=cfg.max_positions, type_vocab_size=cfg.type_vocab,
        layer_norm_eps=cfg.eps, hidden_act=cfg.activation, attn_implementation="eager")
    with torch.device("cpu"):
        net = transformers.BertModel(hf_cfg, add_pooling_layer=False).eval()
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    missing = [m for m in missing if "position_ids" not in m and "token_type_ids" not in m]
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit transformers' BertModel (missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]})")
    return net

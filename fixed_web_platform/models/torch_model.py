"""The model as a PyTorch module (transformers' BertModel with the run's float32 weights): the
fp32 reference (models/prepared.py) and the graph ONNX Runtime Web runs (engines/ort_encoder.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .source import LoadedModel


def bert_module(model: LoadedModel) -> Any:
    """transformers.BertModel (no pooler, eager attention) holding exactly ``model.weights``."""
    import torch
    from transformers import BertConfig, BertModel

    cfg = model.config
    hf_cfg = BertConfig(vocab_size=cfg.vocab, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                        num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                        max_position_embeddings=cfg.max_positions, type_vocab_size=cfg.type_vocab,
                        layer_norm_eps=cfg.eps, hidden_act=cfg.activation, attn_implementation="eager")
    with torch.device("cpu"):
        net = BertModel(hf_cfg, add_pooling_layer=False).eval()
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in model.weights.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    missing = [m for m in missing if "position_ids" not in m and "token_type_ids" not in m]
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit transformers' BertModel (missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]})")
    return net

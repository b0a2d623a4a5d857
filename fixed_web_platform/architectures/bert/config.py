"""BERT's configuration as the harness needs it, and the names of its linear layers.

Only BERT-architecture encoders (BERT, MiniLM, ...): embeddings (word + position + token type,
layer norm), N layers of self-attention and a GELU feed-forward with post-layer-norm residuals,
then mean pooling over the attention mask and L2 normalisation (a sentence embedding).
Tensor names follow Hugging Face's BertModel without the ``bert.`` prefix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..base import LinearLayer

SUPPORTED_MODEL_TYPES = ("bert",)
SUPPORTED_ACTIVATIONS = ("gelu",)
"""Exact (erf) GELU, as BertConfig's default 'gelu'."""

ATTENTION_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense")
FFN_LINEARS = ("intermediate.dense", "output.dense")


@dataclass(frozen=True)
class BertConfig:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    activation: str = "gelu"

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @classmethod
    def from_hf(cls, hf: Any, where: str) -> BertConfig:
        """From a transformers config object; ValueError (one line) for what this harness cannot run."""
        model_type = getattr(hf, "model_type", "?")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"{where}: architecture {model_type!r} is not supported "
                             f"(only BERT-architecture encoders: {', '.join(SUPPORTED_MODEL_TYPES)})")
        act = getattr(hf, "hidden_act", "gelu")
        if act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(f"{where}: activation {act!r} is not supported (only exact GELU)")
        if getattr(hf, "position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{where}: only absolute position embeddings are supported")
        cfg = cls(layers=hf.num_hidden_layers, hidden=hf.hidden_size, heads=hf.num_attention_heads,
                  intermediate=hf.intermediate_size, vocab=hf.vocab_size,
                  max_positions=hf.max_position_embeddings, type_vocab=hf.type_vocab_size,
                  eps=float(hf.layer_norm_eps), activation=act)
        if cfg.hidden % cfg.heads:
            raise ValueError(f"{where}: hidden size {cfg.hidden} is not a multiple of {cfg.heads} heads")
        return cfg

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def has_bias(self, layer: str) -> bool:
        """Every BERT linear layer has a bias."""
        return True

    def linear_layers(self) -> list[LinearLayer]:
        """Every weight matrix that precision applies to, in forward order."""
        out = []
        for i in range(self.layers):
            for suffix in ATTENTION_LINEARS + FFN_LINEARS:
                k, n = self.hidden, self.hidden
                if suffix == "intermediate.dense":
                    n = self.intermediate
                elif suffix == "output.dense":
                    k = self.intermediate
                kind = "attention" if suffix in ATTENTION_LINEARS else "ffn"
                out.append(LinearLayer(f"encoder.layer.{i}.{suffix}", kind, k, n))
        return out

    @property
    def parameters(self) -> int:
        emb = (self.vocab + self.max_positions + self.type_vocab) * self.hidden + 2 * self.hidden
        per_layer = sum(layer.k * layer.n + layer.n for layer in self.linear_layers()[:6]) + 4 * self.hidden
        return emb + self.layers * per_layer

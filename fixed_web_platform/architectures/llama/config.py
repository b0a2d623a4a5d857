"""A Llama-family decoder's configuration as the harness needs it, and its linear layers' names.

Llama (SmolLM2, TinyLlama, ...): token embeddings, N layers of RMSNorm -> grouped-query
self-attention with rotary positions (RoPE) -> residual, RMSNorm -> SwiGLU feed-forward ->
residual, a final RMSNorm and the LM head. Tensor names are Hugging Face's LlamaForCausalLM's
(``model.layers.0.self_attn.q_proj``, ``lm_head``). A tied head (``tie_word_embeddings``) is a
layer of its own for precision purposes: the embedding table stays float32 for the lookup and the
head holds its own copy at the head's bits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..base import DECODER_ATTENTION_LINEARS as ATTENTION_LINEARS
from ..base import DECODER_FFN_LINEARS as FFN_LINEARS
from ..base import DECODER_HEAD as HEAD
from ..base import LinearLayer

SUPPORTED_ACTIVATIONS = ("silu",)
SUPPORTED_ROPE = ("default",)


@dataclass(frozen=True)
class LlamaConfig:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_positions: int
    eps: float
    rope_theta: float
    tied: bool
    attention_bias: bool = False
    model_type: str = "llama"

    @classmethod
    def from_hf(cls, hf: Any, where: str) -> LlamaConfig:
        """From a transformers config object; ValueError (one line) for what this harness cannot run."""
        act = getattr(hf, "hidden_act", "silu")
        if act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(f"{where}: activation {act!r} is not supported (only SwiGLU with SiLU)")
        rope = dict(getattr(hf, "rope_parameters", None) or {})
        legacy = getattr(hf, "rope_scaling", None)
        if isinstance(legacy, dict) and legacy:
            rope = {**legacy, **rope}
        rope_type = str(rope.get("rope_type", rope.get("type", "default")))
        if rope_type not in SUPPORTED_ROPE:
            raise ValueError(f"{where}: RoPE scaling {rope_type!r} is not supported (only plain RoPE)")
        theta = float(rope.get("rope_theta", getattr(hf, "rope_theta", 10000.0)))
        if getattr(hf, "mlp_bias", False):
            raise ValueError(f"{where}: feed-forward biases (mlp_bias) are not supported")
        heads = int(hf.num_attention_heads)
        kv_heads = int(getattr(hf, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(hf, "head_dim", None) or hf.hidden_size // heads)
        cfg = cls(layers=int(hf.num_hidden_layers), hidden=int(hf.hidden_size), heads=heads, kv_heads=kv_heads,
                  head_dim=head_dim, intermediate=int(hf.intermediate_size), vocab=int(hf.vocab_size),
                  max_positions=int(hf.max_position_embeddings), eps=float(hf.rms_norm_eps), rope_theta=theta,
                  tied=bool(getattr(hf, "tie_word_embeddings", False)),
                  attention_bias=bool(getattr(hf, "attention_bias", False)),
                  model_type=str(getattr(hf, "model_type", "llama")))
        if heads % kv_heads:
            raise ValueError(f"{where}: {heads} query heads are not a multiple of {kv_heads} key/value heads")
        if head_dim % 2:
            raise ValueError(f"{where}: head size {head_dim} is odd (RoPE rotates pairs)")
        return cfg

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linear_layers(self) -> list[LinearLayer]:
        """Every weight matrix that precision applies to, in forward order (the head last)."""
        shapes = {"self_attn.q_proj": (self.hidden, self.q_dim), "self_attn.k_proj": (self.hidden, self.kv_dim),
                  "self_attn.v_proj": (self.hidden, self.kv_dim), "self_attn.o_proj": (self.q_dim, self.hidden),
                  "mlp.gate_proj": (self.hidden, self.intermediate), "mlp.up_proj": (self.hidden, self.intermediate),
                  "mlp.down_proj": (self.intermediate, self.hidden)}
        out = []
        for i in range(self.layers):
            for suffix in ATTENTION_LINEARS + FFN_LINEARS:
                k, n = shapes[suffix]
                kind = "attention" if suffix in ATTENTION_LINEARS else "ffn"
                out.append(LinearLayer(f"model.layers.{i}.{suffix}", kind, k, n))
        out.append(LinearLayer(HEAD, "head", self.hidden, self.vocab))
        return out

    def has_bias(self, layer: str) -> bool:
        """Llama's attention_bias puts biases on q, k, v and o (none here by default)."""
        return self.attention_bias and any(layer.endswith(s) for s in ATTENTION_LINEARS)

    @property
    def parameters(self) -> int:
        """Distinct parameters (a tied head counts once)."""
        linear = sum(layer.k * layer.n for layer in self.linear_layers() if layer.name != HEAD)
        head = 0 if self.tied else self.hidden * self.vocab
        bias = 4 * self.layers * self.hidden if self.attention_bias else 0
        return self.vocab * self.hidden + linear + head + (2 * self.layers + 1) * self.hidden + bias

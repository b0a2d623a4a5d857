"""A Gemma 3 text decoder's configuration as the harness needs it, and its linear layers' names.

Gemma 3 (gemma-3-270m, transformers' Gemma3ForCausalLM, ``model_type`` gemma3_text): token
embeddings scaled by sqrt(hidden), N layers of RMSNorm -> grouped-query self-attention (queries
and keys RMS-normalised per head, then RoPE) -> RMSNorm -> residual, RMSNorm -> GELU-tanh-gated
feed-forward -> RMSNorm -> residual, a final RMSNorm and the head (tied to the embeddings). Every
norm scales by (1 + weight). Most layers attend over a sliding window with their own RoPE base
(``layer_types``: sliding_attention / full_attention). Tensor names are Hugging Face's; a tied
head is a layer of its own for precision purposes, as Llama's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..base import DECODER_ATTENTION_LINEARS as ATTENTION_LINEARS
from ..base import DECODER_FFN_LINEARS as FFN_LINEARS
from ..base import DECODER_HEAD as HEAD
from ..base import LinearLayer

LAYER_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
               "post_feedforward_layernorm", "self_attn.q_norm", "self_attn.k_norm")
SLIDING, FULL = "sliding_attention", "full_attention"


@dataclass(frozen=True)
class Gemma3Config:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_positions: int
    eps: float
    sliding: tuple[bool, ...]
    """Per layer: it attends over the last ``sliding_window`` positions with ``rope_local``."""
    sliding_window: int
    rope_global: float
    rope_local: float
    tied: bool
    model_type: str = "gemma3_text"

    @classmethod
    def from_hf(cls, hf: Any, where: str) -> Gemma3Config:
        """From a transformers Gemma3TextConfig; ValueError (one line) for what this harness cannot run."""
        if getattr(hf, "hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
            raise ValueError(f"{where}: activation {hf.hidden_activation!r} is not supported (only GELU-tanh gating)")
        for name in ("final_logit_softcapping", "attn_logit_softcapping"):
            if getattr(hf, name, None):
                raise ValueError(f"{where}: {name} is not supported")
        if getattr(hf, "use_bidirectional_attention", False):
            raise ValueError(f"{where}: bidirectional attention (an embedding model) is not a decoder's")
        if getattr(hf, "attention_bias", False):
            raise ValueError(f"{where}: attention biases are not supported")
        heads = int(hf.num_attention_heads)
        kv_heads = int(getattr(hf, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(hf, "head_dim", None) or hf.hidden_size // heads)
        if int(getattr(hf, "query_pre_attn_scalar", head_dim)) != head_dim:
            raise ValueError(f"{where}: query_pre_attn_scalar {hf.query_pre_attn_scalar} is not the head size "
                             f"{head_dim} (the only attention scale supported)")
        rope = dict(getattr(hf, "rope_parameters", None) or {})
        for kind in (SLIDING, FULL):
            rope_type = (rope.get(kind) or {}).get("rope_type", "default")
            if rope_type != "default":
                raise ValueError(f"{where}: RoPE scaling {rope_type!r} is not supported (only plain RoPE)")
        layer_types = tuple(hf.layer_types)
        if heads % kv_heads:
            raise ValueError(f"{where}: {heads} query heads are not a multiple of {kv_heads} key/value heads")
        if head_dim % 2:
            raise ValueError(f"{where}: head size {head_dim} is odd (RoPE rotates pairs)")
        return cls(layers=int(hf.num_hidden_layers), hidden=int(hf.hidden_size), heads=heads, kv_heads=kv_heads,
                   head_dim=head_dim, intermediate=int(hf.intermediate_size), vocab=int(hf.vocab_size),
                   max_positions=int(hf.max_position_embeddings), eps=float(hf.rms_norm_eps),
                   sliding=tuple(t == SLIDING for t in layer_types), sliding_window=int(hf.sliding_window),
                   rope_global=float(rope[FULL]["rope_theta"]), rope_local=float(rope[SLIDING]["rope_theta"]),
                   tied=bool(getattr(hf, "tie_word_embeddings", True)))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def embed_scale(self) -> float:
        """What the embedding rows are multiplied by: sqrt(hidden), as transformers rounds it (float32)."""
        import numpy as np

        return float(np.float32(self.hidden ** 0.5))

    def linear_layers(self) -> list[LinearLayer]:
        """Every weight matrix that precision applies to, in forward order (the head last)."""
        shapes = {"self_attn.q_proj": (self.hidden, self.q_dim), "self_attn.k_proj": (self.hidden, self.kv_dim),
                  "self_attn.v_proj": (self.hidden, self.kv_dim), "self_attn.o_proj": (self.q_dim, self.hidden),
                  "mlp.gate_proj": (self.hidden, self.intermediate), "mlp.up_proj": (self.hidden, self.intermediate),
                  "mlp.down_proj": (self.intermediate, self.hidden)}
        out = [LinearLayer(f"model.layers.{i}.{suffix}", "attention" if suffix in ATTENTION_LINEARS else "ffn", *shapes[suffix])
               for i in range(self.layers) for suffix in ATTENTION_LINEARS + FFN_LINEARS]
        return [*out, LinearLayer(HEAD, "head", self.hidden, self.vocab)]

    def has_bias(self, layer: str) -> bool:
        return False

    @property
    def parameters(self) -> int:
        """Distinct parameters (a tied head counts once)."""
        linear = sum(layer.k * layer.n for layer in self.linear_layers() if layer.name != HEAD)
        head = 0 if self.tied else self.hidden * self.vocab
        norms = self.layers * (4 * self.hidden + 2 * self.head_dim) + self.hidden
        return self.vocab * self.hidden + linear + head + norms

"""Whisper's configuration as the harness needs it, its linear layers' names, and its tokens.

Whisper (an encoder-decoder for speech): 80 log-mel bins x 3000 frames (30 s) -> two
convolutions with GELU (the second strides by 2: 1500 positions) + sinusoidal positions -> N
pre-norm encoder layers -> a final layer norm. The decoder: token + learned position embeddings
-> N pre-norm layers of causal self-attention, cross-attention over the encoder's output and a
GELU feed-forward -> a final layer norm -> logits from the token embeddings (tied). Names are
transformers' WhisperForConditionalGeneration's (``model.encoder.layers.0.self_attn.q_proj``);
the tied output projection ``proj_out`` is a layer of its own for precision purposes (the
embedding stays float32 for the lookup, the projection holds its own copy at its bits).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..base import LinearLayer

SELF_ATTENTION = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj")
CROSS_ATTENTION = ("encoder_attn.q_proj", "encoder_attn.k_proj", "encoder_attn.v_proj", "encoder_attn.out_proj")
FFN = ("fc1", "fc2")
HEAD = "proj_out"
NO_BIAS = ("self_attn.k_proj", "encoder_attn.k_proj")
"""Whisper's key projections have no bias."""
SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
CHUNK_SECONDS = 30


@dataclass(frozen=True)
class WhisperConfig:
    d_model: int
    encoder_layers: int
    decoder_layers: int
    heads: int
    ffn: int
    mels: int
    vocab: int
    source_positions: int = 1500
    target_positions: int = 448
    model_type: str = "whisper"

    @classmethod
    def from_hf(cls, hf: Any, where: str) -> WhisperConfig:
        if getattr(hf, "activation_function", "gelu") != "gelu":
            raise ValueError(f"{where}: activation {hf.activation_function!r} is not supported (only GELU)")
        if hf.encoder_attention_heads != hf.decoder_attention_heads or hf.encoder_ffn_dim != hf.decoder_ffn_dim:
            raise ValueError(f"{where}: encoder and decoder of different widths are not supported")
        cfg = cls(d_model=int(hf.d_model), encoder_layers=int(hf.encoder_layers),
                  decoder_layers=int(hf.decoder_layers), heads=int(hf.encoder_attention_heads),
                  ffn=int(hf.encoder_ffn_dim), mels=int(hf.num_mel_bins), vocab=int(hf.vocab_size),
                  source_positions=int(hf.max_source_positions), target_positions=int(hf.max_target_positions))
        if cfg.d_model % cfg.heads:
            raise ValueError(f"{where}: d_model {cfg.d_model} is not a multiple of {cfg.heads} heads")
        return cfg

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def frames(self) -> int:
        """Log-mel frames of one 30-second window (the encoder's input length)."""
        return 2 * self.source_positions

    @property
    def max_positions(self) -> int:
        return self.target_positions

    @property
    def english_only(self) -> bool:
        """tiny.en and the other .en models have one token fewer (no language tokens' shift)."""
        return self.vocab == 51864

    @property
    def eot(self) -> int:
        return 50256 if self.english_only else 50257

    @property
    def prompt(self) -> tuple[int, ...]:
        """<|startoftranscript|> (<|en|><|transcribe|>) <|notimestamps|>: transcribe English, no timestamps."""
        return (50257, 50362) if self.english_only else (50258, 50259, 50359, 50363)

    @property
    def timestamp_begin(self) -> int:
        """The first timestamp token: every id from here on is suppressed (no timestamps)."""
        return self.prompt[-1] + 1

    @property
    def begin_suppress(self) -> tuple[int, ...]:
        """Ids never chosen first (a blank, the end of text), as Whisper's generation config."""
        return (220, self.eot)

    def linear_layers(self) -> list[LinearLayer]:
        """Every weight matrix precision applies to, in forward order: the encoder's layers, the
        decoder's, the output projection last (the convolutions stay float32)."""
        d, f = self.d_model, self.ffn
        out = []
        for i in range(self.encoder_layers):
            pre = f"model.encoder.layers.{i}."
            out += [LinearLayer(pre + s, "attention", d, d) for s in SELF_ATTENTION]
            out += [LinearLayer(pre + "fc1", "ffn", d, f), LinearLayer(pre + "fc2", "ffn", f, d)]
        for i in range(self.decoder_layers):
            pre = f"model.decoder.layers.{i}."
            out += [LinearLayer(pre + s, "attention", d, d) for s in SELF_ATTENTION]
            out += [LinearLayer(pre + s, "cross_attention", d, d) for s in CROSS_ATTENTION]
            out += [LinearLayer(pre + "fc1", "ffn", d, f), LinearLayer(pre + "fc2", "ffn", f, d)]
        out.append(LinearLayer(HEAD, "head", d, self.vocab))
        return out

    def has_bias(self, layer: str) -> bool:
        return layer != HEAD and not layer.endswith(NO_BIAS)

    @property
    def parameters(self) -> int:
        """Distinct parameters (the tied projection counts once)."""
        d = self.d_model
        linear = sum(lay.k * lay.n + (lay.n if self.has_bias(lay.name) else 0)
                     for lay in self.linear_layers() if lay.name != HEAD)
        convs = self.mels * d * 3 + d + d * d * 3 + d
        norms = (2 * self.encoder_layers + 3 * self.decoder_layers + 2) * 2 * d
        return linear + convs + norms + self.vocab * d + self.target_positions * d + self.source_positions * d

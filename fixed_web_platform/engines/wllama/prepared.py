"""A wllama decoder run prepared in Python, and its accuracy from what llama.cpp returns.

llama.cpp (through wllama's llama-server API) gives no raw logits: per scored position the page
asks for one token with ``n_probs`` = ``TOP_K`` and the text's next token forced by a logit bias,
so it returns that token's log-probability and the top ``TOP_K`` (ids, log-probabilities), both
from the model's raw logits (the bias acts in the sampler, after them). From these:

- next-token top-1 agreement with PyTorch fp32 and perplexity: exact;
- KL(fp32 || engine): a lower bound, exact for the top ``TOP_K`` tokens with the rest of the
  vocabulary pooled into one outcome on both sides (pooling never raises KL); the row says so;
- the kernel check: the log-probabilities of the text's next tokens against the float64 numpy
  decoder with the weights of this very GGUF file (dequantized by transformers' GGUF reader).

Outputs the page returns: ``top1`` int32 [texts, eval_len], ``ref_logprob`` float32
[texts, eval_len - 1], ``topk_ids`` int32 and ``topk_logprobs`` float32 [texts, eval_len, TOP_K],
``generated_ids`` int32 [new_tokens].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures import DecoderArchitecture
from ...models import source
from ...prepared_caches import per_configuration
from ...workloads.base import TensorSpec
from ...workloads.decoder import accuracy
from ...workloads.decoder.prepared import fp32_references, reference_logits
from ...workloads.decoder.tokens import TokenPlan
from ...workloads.decoder.workload import DecoderWorkload
from . import gguf_files

TOP_K = 40
TOP1, REF_LOGPROB, TOPK_IDS, TOPK_LOGPROBS, GENERATED = (
    "top1", "ref_logprob", "topk_ids", "topk_logprobs", "generated_ids")
KERNEL_TOLERANCE = {"F32": 2e-3, "F16": 5e-3, "Q8_0": 0.05, "Q4_0": 0.05, "Q4_1": 0.05}
"""Relative RMS error of the next-token log-probabilities vs the float64 decoder with the file's
own weights beyond which llama.cpp is wrong. Its CPU backend keeps the KV cache in f16, rounds
activations to f16 for F16 weights and quantizes them to 8 bits for its Q8_0/Q4_x dot products,
so it is looser than the harness's f32 kernels (1e-3 on logits). Measured on SmolLM2-135M in
Chrome (16 positions x 4 texts): F32 1.9e-4, F16 3.3e-4, Q8_0 1.9e-2, Q4_0 2.4e-2, Q4_1 1.8e-2."""
TOLERANCE_BASIS = ("llama.cpp's CPU backend: f16 KV cache, activations quantized to 8 bits for "
                   "quantized weights; next-token log-probabilities vs the float64 decoder with "
                   "the file's own weights")


def kl_lower_bound(fp32_logp: np.ndarray, topk_ids: np.ndarray, topk_logp: np.ndarray) -> np.ndarray:
    """KL(fp32 || engine) per position with the vocabulary outside the engine's top-K pooled into
    one outcome on both sides: a lower bound of the full KL (data processing inequality).
    fp32_logp [..., vocab] log-probabilities; topk_ids, topk_logp [..., K]."""
    p = np.take_along_axis(np.exp(fp32_logp), topk_ids.astype(np.int64), axis=-1)
    q = np.exp(topk_logp.astype(np.float64))
    p_rest = np.clip(1.0 - p.sum(axis=-1), 0.0, 1.0)
    q_rest = np.clip(1.0 - q.sum(axis=-1), 1e-300, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        head = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0).sum(axis=-1)
        rest = np.where(p_rest > 0, p_rest * (np.log(p_rest) - np.log(q_rest)), 0.0)
    return head + rest


@dataclass(frozen=True, eq=False)
class PreparedGguf:
    workload: DecoderWorkload
    weight_format: str
    """The llama.cpp format of the file ('Q4_0', ..., or the shipped file's own)."""
    gguf: Path
    tokens: TokenPlan
    fp32_logp: np.ndarray
    """PyTorch fp32 log-softmax [texts, eval_len, vocab] (float64)."""
    ref_float: np.ndarray
    """PyTorch fp32's log-probability of each next token [texts, eval_len - 1]."""
    ref_dequantized: np.ndarray
    """The float64 decoder's, with this file's weights [texts, eval_len - 1]."""
    generated_fp32: np.ndarray
    weight_bytes: int
    weight_bytes_f32: int

    layers: tuple = ()
    tolerance_basis: str = TOLERANCE_BASIS

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        texts, length = self.tokens.eval_ids.shape
        return (TensorSpec(TOP1, "int32", (texts, length)),
                TensorSpec(REF_LOGPROB, "float32", (texts, length - 1)),
                TensorSpec(TOPK_IDS, "int32", (texts, length, TOP_K)),
                TensorSpec(TOPK_LOGPROBS, "float32", (texts, length, TOP_K)),
                TensorSpec(GENERATED, "int32", (self.workload.new_tokens,)))

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return outputs[REF_LOGPROB].astype(np.float64)

    def tolerance(self, compute_dtype: str) -> float:
        return KERNEL_TOLERANCE.get(self.weight_format, max(KERNEL_TOLERANCE.values()))

    def kernel_problem(self, judged: np.ndarray) -> str:
        return ""

    def _per_position(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        fp32_top1 = np.argmax(self.fp32_logp, axis=-1)
        return {"agree": outputs[TOP1] == fp32_top1,
                "kl": kl_lower_bound(self.fp32_logp, outputs[TOPK_IDS], outputs[TOPK_LOGPROBS])}

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        per = self._per_position(outputs)
        generated = outputs[GENERATED]
        return {"next_token_top1": float(per["agree"].mean()), "kl_mean": float(per["kl"].mean()),
                "perplexity": accuracy.perplexity(self.judged(outputs)),
                "perplexity_fp32": accuracy.perplexity(self.ref_float),
                "leading_tokens_equal": accuracy.leading_equal(generated, self.generated_fp32),
                "generated_text": self.tokens.decode(generated)}

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        per = self._per_position(outputs)
        pad = np.full((self.ref_float.shape[0], 1), np.nan)
        return {"input_ids": self.tokens.eval_ids, "top1": outputs[TOP1],
                "ref_logprob": np.concatenate([self.judged(outputs), pad], axis=1),
                "topk_ids": outputs[TOPK_IDS], "topk_logprobs": outputs[TOPK_LOGPROBS],
                "fp32_top1": np.argmax(self.fp32_logp, axis=-1).astype(np.int32),
                "fp32_logprob": np.concatenate([self.ref_float, pad], axis=1),
                "reference_logprob": np.concatenate([self.ref_dequantized, pad], axis=1),
                "kl_fp32_engine_lower_bound": per["kl"],
                "prompt_ids": self.tokens.prompt, "generated_ids": outputs[GENERATED],
                "generated_ids_fp32": self.generated_fp32,
                "generated_text": np.array(self.tokens.decode(outputs[GENERATED]))}


@per_configuration(maxsize=4)
def prepare_gguf(workload: DecoderWorkload, weight_format: str, gguf: Path, shipped: bool = False) -> PreparedGguf:
    """References for one GGUF file (cached per file: both platforms of a format share it).
    ``shipped``: ``gguf`` is a byte copy of the model's own file, whose weights are already loaded."""
    loaded = source.load(source.resolve(workload.model, False))
    tokens = workload.tokens()
    ref_logits, generated_fp32, _ = fp32_references(loaded, workload)
    fp32_logp = accuracy.log_softmax(ref_logits)
    held = loaded if shipped else source.load(source.resolve(str(gguf), False))
    assert isinstance(held.architecture, DecoderArchitecture)
    ref_deq = reference_logits(held.architecture, held.config, held.weights, tokens.eval_ids)
    stored, as_f32 = gguf_files.weight_bytes(gguf)
    return PreparedGguf(workload, weight_format, gguf, tokens, fp32_logp,
                        accuracy.next_token_logprob(ref_logits, tokens.eval_ids)[:, :-1],
                        accuracy.next_token_logprob(ref_deq, tokens.eval_ids)[:, :-1],
                        generated_fp32, stored, as_f32)

"""What a decoder's logits are worth against PyTorch fp32's, position by position (teacher-forced
on the evaluation rows), and how far its greedy generation follows fp32's. All in float64."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def next_token_logprob(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """[texts, eval_len]: the log-probability given to the text's next token at each position
    (NaN at the last position, which has no next token)."""
    logp = log_softmax(logits)
    out = np.full(ids.shape, np.nan)
    nxt = ids[:, 1:]
    out[:, :-1] = np.take_along_axis(logp[:, :-1, :], nxt[..., None], axis=-1)[..., 0]
    return out


def perplexity(logprob: np.ndarray) -> float:
    return float(np.exp(-np.nanmean(logprob)))


def leading_equal(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading ids of ``a`` equal ``b``'s."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


@dataclass(frozen=True)
class DecoderAccuracy:
    top1_agreement: float
    """Share of positions whose argmax is fp32's."""
    kl_mean: float
    """Mean over positions of KL(fp32 || engine), nats."""
    perplexity: float
    perplexity_fp32: float


def compare(logits: np.ndarray, ref_logits: np.ndarray, ids: np.ndarray) -> DecoderAccuracy:
    """logits, ref_logits [texts, eval_len, vocab]; ids [texts, eval_len]."""
    logp, ref = log_softmax(logits), log_softmax(ref_logits)
    kl = (np.exp(ref) * (ref - logp)).sum(axis=-1)
    agree = np.argmax(logits, axis=-1) == np.argmax(ref_logits, axis=-1)
    return DecoderAccuracy(float(agree.mean()), float(kl.mean()),
                           perplexity(next_token_logprob(logits, ids)),
                           perplexity(next_token_logprob(ref_logits, ids)))

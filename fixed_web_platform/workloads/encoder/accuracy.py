"""What a model run's output embeddings are worth, against a reference's.

- cosine of each output embedding with the reference's (min and mean);
- Spearman rank correlation of all pairwise cosine similarities with the reference's (does the
  run still order sentence pairs the same way: the task figure for retrieval and clustering);
- top-1 agreement: the share of texts whose nearest neighbour (by cosine, itself excluded) is the
  same as under the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr


@dataclass(frozen=True)
class EmbeddingAccuracy:
    cosine_min: float
    cosine_mean: float
    spearman: float | None
    """None with fewer than 3 texts (fewer than 3 pairs)."""
    top1_agreement: float | None
    """None with a single text."""


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)


def similarity_matrix(embeddings: np.ndarray) -> np.ndarray:
    u = _unit(embeddings)
    return u @ u.T


def nearest_neighbours(embeddings: np.ndarray) -> np.ndarray:
    sims = similarity_matrix(embeddings)
    np.fill_diagonal(sims, -np.inf)
    return sims.argmax(axis=1)


def compare(out: np.ndarray, ref: np.ndarray) -> EmbeddingAccuracy:
    if out.shape != ref.shape or out.ndim != 2:
        raise ValueError(f"embeddings {out.shape} and reference {ref.shape} differ in shape")
    cos = (_unit(out) * _unit(ref)).sum(axis=1)
    count = out.shape[0]
    spearman = top1 = None
    if count >= 3:
        upper = np.triu_indices(count, k=1)
        rho = spearmanr(similarity_matrix(out)[upper], similarity_matrix(ref)[upper]).statistic
        spearman = float(rho) if np.isfinite(rho) else None
    if count >= 2:
        top1 = float(np.mean(nearest_neighbours(out) == nearest_neighbours(ref)))
    return EmbeddingAccuracy(float(cos.min()), float(cos.mean()), spearman, top1)

"""The ``encoder`` workload kind: a transformer encoder (an architecture whose ``kind`` is
'encoder', BERT today) run end to end on texts, judged by its sentence embeddings.

workload.py: the workload (model, batch x sequence, texts, precision rules, calibration texts);
prepared.py: a run prepared in Python (page tensors, PyTorch fp32 and float64 references);
accuracy.py: what embeddings are worth against PyTorch fp32 (cosine, Spearman, top-1).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from ...models.source import RANDOM_WEIGHTS_FLAG
from ..base import Column, KindTiming, WorkloadKind, integer_text, positive_count
from ..model_columns import MODEL_COLUMNS, MODEL_IDENTITY, MODEL_PRECISION_IDENTITY
from .workload import DEFAULT_BATCH_SIZE, DEFAULT_SEQ_LEN, EncoderWorkload


class EncoderKind(WorkloadKind):
    name = EncoderWorkload.kind
    kind_timing = KindTiming(warmup=0, min_iterations=10, steady_cap_s=60.0)
    """A forward pass of MiniLM at 4 x 32 tokens (2026-12-02, 2 cores): 48-170 ms on WebAssembly
    and WebNN, 0.44-0.92 s on the harness's WebGPU kernels and 0.75-4.7 s on ONNX Runtime's on a
    software adapter: 60 s hold 10 of the slowest."""
    aliases = ("model",)
    """Plan files before schema 8 called encoders 'model'."""
    columns = (
        *MODEL_COLUMNS,
        Column("batch_size", int, "Texts per forward pass."),
        Column("seq_len", int, "Tokens per text (padded)."),
        Column("sequences_per_s", float, "Texts of the timed batch per second.", performance=True),
        Column("tokens_per_s", float, "Real (unpadded) tokens of the timed batch per second.", performance=True),
        Column("cosine_min", float, "Lowest cosine of an output embedding with PyTorch fp32's."),
        Column("cosine_mean", float, "Mean cosine of the output embeddings with PyTorch fp32's."),
        Column("spearman", float, "Rank correlation of all pairwise similarities with PyTorch fp32's."),
        Column("top1_agreement", float, "Share of texts whose nearest neighbour is the same as under "
                                        "PyTorch fp32."),
    )
    identity = (*MODEL_IDENTITY, "batch_size", "seq_len")
    precision_identity = MODEL_PRECISION_IDENTITY

    def from_json(self, doc: Mapping[str, Any]) -> EncoderWorkload:
        return EncoderWorkload.from_json(dict(doc))

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--batch-size", type=positive_count, default=DEFAULT_BATCH_SIZE,
                            help=f"with --model (encoders): sequences per forward pass (default {DEFAULT_BATCH_SIZE})")
        parser.add_argument("--seq-len", type=positive_count, default=DEFAULT_SEQ_LEN,
                            help=f"with --model (encoders): tokens per sequence, padded or truncated "
                                 f"(default {DEFAULT_SEQ_LEN})")

    def model_workloads(self, model: str, options: Mapping[str, Any]) -> tuple[EncoderWorkload]:
        return (EncoderWorkload.from_options(
            model, batch_size=options.get("batch_size", DEFAULT_BATCH_SIZE),
            seq_len=options.get("seq_len", DEFAULT_SEQ_LEN), random_weights=bool(options.get("random_weights")),
            inputs=options.get("inputs"), mixed_precision=bool(options.get("mixed_precision")),
            precision_rules=options.get("precision_rules"), calibration=options.get("calibration"),
            random_weights_hint=options.get("random_weights_hint") or RANDOM_WEIGHTS_FLAG),)

    def shape(self, row: Mapping[str, Any]) -> str:
        """'BATCHxSEQ tokens' (texts per forward pass x tokens per text)."""
        return f"{integer_text(row.get('batch_size'))}x{integer_text(row.get('seq_len'))} tokens"



ENCODER = EncoderKind()

__all__ = ["DEFAULT_BATCH_SIZE", "DEFAULT_SEQ_LEN", "ENCODER", "EncoderKind", "EncoderWorkload"]

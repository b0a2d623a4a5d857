"""The ``decoder`` workload kind: a decoder LLM (an architecture whose ``kind`` is 'decoder',
Llama and Gemma 3) generating greedily, timed per token, and scored teacher-forced against PyTorch fp32.

workload.py: the workload (model, prompt length, new tokens, evaluation texts, precision rules);
tokens.py: the token ids of the prompt and the evaluation rows; prepared.py: a run prepared in
Python (page tensors, PyTorch fp32 and float64 references); accuracy.py: top-1 agreement, KL,
perplexity and greedy agreement; timing.py: the page's per-token timestamps, checked, and the
speed figures drawn from them.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from ...models.source import RANDOM_WEIGHTS_FLAG
from ..base import Column, KindTiming, PageIterations, Workload, WorkloadKind, integer_text, positive_count
from ..model_columns import (
    DECODE_STEADY_CLASS,
    DECODE_TOKENS_PER_S,
    DEVICE_MEMORY,
    LOAD_WEIGHTS_MS,
    MODEL_COLUMNS,
    MODEL_IDENTITY,
    MODEL_PRECISION_IDENTITY,
)
from . import timing
from .workload import (
    DEFAULT_EVAL_LEN,
    DEFAULT_NEW_TOKENS,
    DEFAULT_PROMPT_LEN,
    DecoderWorkload,
)


class DecoderKind(WorkloadKind):
    name = DecoderWorkload.kind
    kind_timing = KindTiming(warmup=0, min_iterations=10, steady_cap_s=60.0, cap_waits=10)
    """An iteration is a whole generation: SmolLM2-135M's 16 + 32 tokens take 5.8-9.4 s on the
    harness's WebGPU kernels on SwiftShader and 1.2-5.9 s on ONNX Runtime's WebAssembly (Chrome,
    2026-12-02). The time to first token is one a generation, so the cap waits for 10 (a series
    the classifier can judge, and 310 decode steps); a faster engine stops once steady, or at
    60 s."""
    iteration_lists = ((timing.FIELD, "generations"),)
    columns = (
        *MODEL_COLUMNS,
        Column("prompt_len", int, "Prompt tokens prefilled before the first new token."),
        Column("new_tokens", int, "Tokens generated greedily (end of sequence suppressed)."),
        Column("eval_len", int, "Tokens of each evaluation text scored teacher-forced."),
        Column("ttft_ms", float, "Time to first token: prompt in, first new token id read back (median).",
               performance=True),
        Column("prefill_tokens_per_s", float, "Prompt tokens per second of the prefill (prompt_len / TTFT).",
               performance=True),
        DECODE_TOKENS_PER_S,
        DECODE_STEADY_CLASS,
        Column("ttft_steady_class", str, "Did the time to first token settle over the page's generations (one "
               "prefill each): flat, warm-up, slowdown, no steady state, too short (fewer than 10 generations); "
               "ttft_ms comes from its steady segment. The worst over page loads."),
        Column("token_ms_p50", float, "Per-token decode latency, median over every decode step.", performance=True),
        Column("token_ms_p90", float, "Per-token decode latency, 90th percentile.", performance=True),
        Column("token_ms_first", float, "Latency of the first decode step (median over generations).",
               performance=True),
        Column("token_ms_last", float, "Latency of the last decode step (the longest context; median).",
               performance=True),
        LOAD_WEIGHTS_MS,
        Column("first_forward_ms", float, "Load phase: the first (cold) prefill.", performance=True),
        Column("kv_cache_on_device", str, "'yes' when the KV cache stays on the device between steps."),
        *DEVICE_MEMORY,
        Column("next_token_top1", float, "Share of evaluation positions whose next-token argmax is PyTorch "
                                         "fp32's."),
        Column("kl_mean", float, "Mean KL(fp32 || engine) of the next-token distributions, nats."),
        Column("perplexity", float, "Perplexity of the evaluation texts under the engine."),
        Column("perplexity_fp32", float, "The same under PyTorch fp32."),
        Column("leading_tokens_equal", int, "Leading greedy tokens equal to PyTorch fp32's."),
        Column("generated_text", str, "The engine's greedy continuation of the prompt."),
        Column("fp32_activation_peak", float, "The largest |activation| of PyTorch fp32 over the evaluation rows "
                                              "(any module's output or linear layer's input)."),
        Column("fp16_overflow", str, "Where the engine computed in float16: did activations overflow ('none', "
                                     "or the non-finite logits and the fp32 peak past 65,504, and where); blank "
                                     "for float32 arithmetic."),
    )
    identity = (*MODEL_IDENTITY, "prompt_len", "new_tokens", "eval_len")
    precision_identity = MODEL_PRECISION_IDENTITY

    def from_json(self, doc: Mapping[str, Any]) -> DecoderWorkload:
        return DecoderWorkload.from_json(dict(doc))

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--prompt-len", type=positive_count, nargs="+", default=[DEFAULT_PROMPT_LEN],
                            metavar="TOKENS",
                            help=f"with --model (decoders): prompt tokens before generating, one row each "
                                 f"(default {DEFAULT_PROMPT_LEN})")
        parser.add_argument("--new-tokens", type=positive_count, default=DEFAULT_NEW_TOKENS,
                            help=f"with --model (decoders): tokens to generate (default {DEFAULT_NEW_TOKENS})")
        parser.add_argument("--eval-len", type=positive_count, default=DEFAULT_EVAL_LEN,
                            help=f"with --model (decoders): tokens of each evaluation text scored "
                                 f"(default {DEFAULT_EVAL_LEN})")

    def model_workloads(self, model: str, options: Mapping[str, Any]) -> tuple[Workload, ...]:
        lengths = options.get("prompt_len", [DEFAULT_PROMPT_LEN])
        lengths = [lengths] if isinstance(lengths, int) else list(dict.fromkeys(lengths))
        return tuple(DecoderWorkload.from_options(
            model, prompt_len=int(length), new_tokens=int(options.get("new_tokens", DEFAULT_NEW_TOKENS)),
            eval_len=int(options.get("eval_len", DEFAULT_EVAL_LEN)),
            random_weights=bool(options.get("random_weights")), inputs=options.get("inputs"),
            mixed_precision=bool(options.get("mixed_precision")), precision_rules=options.get("precision_rules"),
            random_weights_hint=options.get("random_weights_hint") or RANDOM_WEIGHTS_FLAG) for length in lengths)

    def shape(self, row: Mapping[str, Any]) -> str:
        """'16+32 tokens' (prompt + new tokens)."""
        return f"{integer_text(row.get('prompt_len'))}+{integer_text(row.get('new_tokens'))} tokens"

    def reply_fields(self, payload: Mapping[str, Any], max_iterations: int) -> dict[str, Any]:
        return timing.reply_fields(payload, max_iterations)

    def speed_figures(self, workload: Workload, pages: Sequence[PageIterations]) -> dict[str, Any]:
        assert isinstance(workload, DecoderWorkload)
        return timing.speed_figures(workload.prompt_len, pages)



DECODER = DecoderKind()

__all__ = ["DECODER", "DecoderKind", "DecoderWorkload"]

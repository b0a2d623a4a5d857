"""The decoder kind as the harness's own WebNN graphs (web/engines/webnn_decoder.js).

Three graphs with static shapes, built in the page from the same tensors: ``prefill`` (the
prompt's rows from position 0; the greedy id of its last row, argMax in the graph with end of
sequence suppressed, and every layer's keys and values padded to the cache's length), ``decode``
(one row at a position: the caches in, the caches with that row written out, masked beyond it)
and ``score`` (an evaluation row from position 0, every position's logits). The KV cache is
MLTensors passed from one dispatch to the next, and each new id stays an MLTensor too; the page
reads the id back after every step for the per-token timestamps.

Each linear layer's data types are chosen as for the encoder (layers.py): standard mode runs
4/2-bit layers as 8-bit and says so; experimental mode asks for int4/int2 and the browser's own
error is the answer. The bytes are prepared at the bits each layer executes, so the float64
decoder runs the model the graphs hold. RoPE's cos and sin tables go to the page as tensors.

A pass is one graph per segment of layers, chained through a hidden-state tensor. Chromium 153's
LiteRT backend crashed the tab building one int8 graph of SmolLM2-135M (15 of its layers and the
head already did; 10 layers and the head built), while the float32 graph of the whole model built,
so the quantized weights of one graph are kept under ``QUANTIZED_PER_GRAPH`` elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...architectures import ops
from ...models import rules as precision_rules
from ...run_spec import RunSpec
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from .forms import QDQ_FORM
from .layers import ModelPlan
from .loop import LoopRunner
from .lower import loop_pass

RUNNER = "webnn_decoder"
"""The page module (web/engines/webnn_decoder.js)."""
QUANTIZED_PER_GRAPH = 48_000_000
"""Weight elements of 8/4/2-bit layers one graph may hold (see above). A single layer past it is
held in float32 in standard mode (layers.plan_model): Gemma 3 270M's 8-bit head (262,144 x 640 =
167,772,160 elements) crashed Chromium 153's tab (2026-12-03), while its float32 graphs built and
ran."""


def segments(p: ops.Pass, plan: Sequence[precision_rules.LayerPrecision]) -> list[list[int]]:
    """[first, end) layer ranges of the pass, one graph each, the head in the last: from the head
    backwards, a new graph wherever the next layer's quantized weights would pass
    ``QUANTIZED_PER_GRAPH``."""
    bits = {lp.layer.name: lp for lp in plan}

    def quantized(chunk: Sequence[ops.Op]) -> int:
        return sum(bits[op.layer].layer.k * bits[op.layer].layer.n for op in chunk
                   if isinstance(op, ops.Linear) and bits[op.layer].bits <= 8)

    bounds = p.layer_bounds
    layers = len(bounds) - 1
    per_layer = [quantized(p.ops[bounds[i]:bounds[i + 1]]) for i in range(layers)]
    held = quantized(p.ops[:bounds[0]]) + quantized(p.ops[bounds[-1]:])
    out, end = [], layers
    for i in reversed(range(layers)):
        if held + per_layer[i] > QUANTIZED_PER_GRAPH and end > i + 1:
            out.append([i + 1, end])
            end, held = i + 1, 0
        held += per_layer[i]
    out.append([0, end])
    return out[::-1]


class WebnnDecoder(LoopRunner):
    """A decoder LLM as prefill, decode-step and scoring WebNN graphs."""

    runner = RUNNER

    act_bits = (32, 8)

    def prepare(self, run: RunSpec, plan: ModelPlan) -> PreparedDecoder:
        return prepare_decoder(plan.workload, run.bits, run.weight_block, run.seed, plan.layers.unsigned,
                               weight_quant=run.weight_quant, act_bits=run.act_bits, observer=run.observer,
                               out_int8=plan.form == QDQ_FORM)

    def int8_layers(self, prepared: PreparedDecoder) -> list[dict[str, Any]]:
        return prepared.linear_int8() if prepared.act_bits == 8 else []

    def quantized_per_graph(self) -> int:
        return QUANTIZED_PER_GRAPH

    def build(self, prepared: PreparedDecoder, layers: Sequence[str]) -> tuple[dict[str, Any], dict[str, bytes]]:
        workload, cfg = prepared.workload, prepared.config
        texts, eval_len = prepared.tokens.eval_ids.shape
        eos = prepared.tokens.eos
        graph = workload.architecture().graph(cfg, prompt_len=workload.prompt_len, eval_len=eval_len,
                                              context=prepared.context, eos=eos[0] if eos else -1)
        tensors = prepared.tensors() | {name: t.astype("<f4").tobytes() for name, t in graph.tensors.items()}
        cuts = [first for first, _ in segments(graph.passes["decode"], prepared.plan)[1:]]
        modes = {"prefill": {"cache": "pad"}, "decode": {"cache": "write"},
                 "score": {"cache": "", "outputs": {"logits": "logits"}}}
        return {
            "model": cfg.to_json() | {"name": workload.name},
            "passes": {name: loop_pass(graph.passes[name], layers, context=prepared.context, cuts=cuts, **mode)
                       for name, mode in modes.items()},
            "context": prepared.context,
            "prompt": {"tensor": "prompt_ids", "rows": workload.prompt_len},
            "new_tokens": workload.new_tokens,
            "score": {"tensor": "eval_ids", "texts": texts, "rows": eval_len},
        }, tensors

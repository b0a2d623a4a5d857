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

from ...architectures.llama.reference import rope_tables
from ...models import rules as precision_rules
from ...page_protocol import PageReply
from ...precision.quantizers import QUANTIZERS
from ...run_spec import RunSpec, TimingConfig
from ...workloads.decoder import DecoderWorkload
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from .forms import MODEL_FORM
from .layers import executed, plan_model

RUNNER = "webnn_decoder"
"""The page module (web/engines/webnn_decoder.js)."""
QUANTIZED_PER_GRAPH = 48_000_000
"""Weight elements of 8/4/2-bit layers one graph may hold (see above)."""


def segments(plan: Sequence[precision_rules.LayerPrecision], layers: int) -> list[list[int]]:
    """[first, end) layer ranges, one graph each, the head in the last: from the head backwards,
    a new graph wherever the next layer's quantized weights would pass ``QUANTIZED_PER_GRAPH``."""
    def quantized(p: precision_rules.LayerPrecision) -> int:
        return p.layer.k * p.layer.n if p.bits <= 8 else 0

    per_layer = [0] * layers
    for p in plan:
        if p.layer.name.startswith("model.layers."):
            per_layer[int(p.layer.name.split(".")[2])] += quantized(p)
    held = sum(quantized(p) for p in plan if not p.layer.name.startswith("model.layers."))
    out, end = [], layers
    for i in reversed(range(layers)):
        if held + per_layer[i] > QUANTIZED_PER_GRAPH and end > i + 1:
            out.append([i + 1, end])
            end, held = i + 1, 0
        held += per_layer[i]
    out.append([0, end])
    return out[::-1]


class WebnnDecoder(KindRunner):
    """A decoder LLM as prefill, decode-step and scoring WebNN graphs."""

    runner = RUNNER
    weight_quants = tuple(QUANTIZERS)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        plan = await plan_model(run, browser, MODEL_FORM)
        if isinstance(plan, Refusal):
            return plan
        workload = plan.workload
        assert isinstance(workload, DecoderWorkload)
        cfg = workload.config()
        prepared = prepare_decoder(workload, run.bits, run.weight_block, run.seed, plan.layers.unsigned,
                                   weight_quant=run.weight_quant)
        texts, eval_len = prepared.tokens.eval_ids.shape
        cos, sin = rope_tables(cfg, prepared.context)
        tensors = prepared.tensors() | {"rope.cos": cos.astype("<f4").tobytes(),
                                        "rope.sin": sin.astype("<f4").tobytes()}
        eos = prepared.tokens.eos
        options = plan.graph_options(run, prepared.plan, prepared.held.layers) | {
            "model": cfg.to_json() | {"name": workload.name},
            "segments": segments(prepared.plan, cfg.layers),
            "context": prepared.context,
            "prompt": {"tensor": "prompt_ids", "rows": workload.prompt_len},
            "new_tokens": workload.new_tokens,
            "score": {"tensor": "eval_ids", "texts": texts, "rows": eval_len},
            "suppress": eos[0] if eos else -1,
        }
        return EngineJob(spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
                         tensors=tensors, prepared=prepared, **plan.job_fields(prepared.held.layers))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        assert isinstance(job.prepared, PreparedDecoder)
        return executed(job, page, job.prepared.held.layers, engine.platform.value)

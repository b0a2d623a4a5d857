"""The decoder kind on the harness's own WGSL kernels (engine ``harness``, platform ``webgpu``).

Python writes three forward passes as step lists, and the page (web/engines/wgsl_decoder.js)
runs them as told:

- ``prefill``: the prompt's rows through every layer (their keys and values into the KV cache),
  the last row through the final norm and the LM head, the greedy argmax on the device;
- ``decode``: one row (the id the last argmax wrote) at the position the cache has reached;
- ``score``: an evaluation row's tokens from position 0, every row's logits kept (teacher-forced
  accuracy, and the kernel check against the float64 decoder).

One command submission per step (the prefill, then each decode step), and the new id read back
after each: the per-token timestamps. The KV cache, the position and the generated ids stay on
the device between steps (shaders/model/decoder/*.wgsl); only each new id comes back.

The linear layers are the matmul kernels (shaders/matmul_*.wgsl with the model's linear prelude,
as the encoder's: engines/wgsl/encoder.py), their tile chosen per pass from its rows (1 for
decode and the prefill's head), so the page compiles one module per (bits, rows).
"""

from __future__ import annotations

from typing import Any

from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.decoder import DecoderWorkload
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import WgslRunner
from . import kernels as wgsl
from .linear import MIXED_ZERO, executed_steps, held_fields, model_zero
from .lower import ZEROS, Lowering

RUNNER = "wgsl_decoder"
STATE = {"ids": "int32 ids of the pass's rows (the next step's input id after an argmax)",
         "pos": "u32 positions the KV cache holds", "count": "u32 ids generated so far"}


def _unsupported(prepared: PreparedDecoder) -> str:
    cfg = prepared.config
    if cfg.head_dim % 4:
        return f"head size {cfg.head_dim} is not a multiple of 4 (the attention kernel reads vec4s)"
    for p in prepared.plan:
        if p.layer.k % 4:
            return f"{p.layer.name}: K = {p.layer.k} is not a multiple of 4 (the linear kernels read vec4s)"
        if p.bits <= 8 and (p.block <= 0 or p.layer.k % p.block or p.block % (32 // p.bits)):
            return (f"{p.layer.name}: block size {p.block} does not divide K = {p.layer.k} into whole "
                    f"{32 // p.bits}-value words (the packed kernel's layout)")
    return "" if model_zero(prepared.held) else MIXED_ZERO


def build(prepared: PreparedDecoder) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The job's options (programs, kernels, buffers, the three passes: the architecture's graph
    lowered) and its tensors."""
    cfg, w = prepared.config, prepared.workload
    texts, eval_len = prepared.tokens.eval_ids.shape
    eos = prepared.tokens.eos
    graph = w.architecture().graph(cfg, prompt_len=w.prompt_len, eval_len=eval_len, context=prepared.context,
                                   eos=eos[0] if eos else -1)
    graph.check([p.layer.name for p in prepared.plan])
    lowering = Lowering(prepared.plan, cfg.has_bias, model_zero(prepared.held))
    steps = lowering.passes(graph)
    rows = max(w.prompt_len, eval_len)
    tensors = prepared.tensors() | {name: a.astype("<f4").tobytes() for name, a in graph.tensors.items()}
    kv_bytes = prepared.context * cfg.kv_dim * 4
    activations = {"x": rows * cfg.hidden * 4, "h": rows * cfg.hidden * 4, "y": rows * cfg.hidden * 4,
                   "q": rows * cfg.q_dim * 4, "k": rows * cfg.kv_dim * 4, "v": rows * cfg.kv_dim * 4,
                   "ctx": rows * cfg.q_dim * 4, "g": rows * cfg.intermediate * 4, "u": rows * cfg.intermediate * 4,
                   "logits": eval_len * cfg.vocab * 4, "ids": rows * 4, "pos": 4, "count": 4,
                   "generated": w.new_tokens * 4, ZEROS: max(p.layer.n for p in prepared.plan) * 4}
    if lowering.dequantized:
        activations[wgsl.DEQUANTIZED] = lowering.dequantized
    kv = {f"cache.{i}.{part}": kv_bytes for i in range(cfg.layers) for part in ("k", "v")}
    options = {
        "model": cfg.to_json() | {"name": w.name},
        "programs": lowering.sources(),
        "linear_variants": lowering.linear_variants(),
        "activations": activations | kv,
        "tensor_bytes": {name: len(data) for name, data in tensors.items()},
        "kv_cache": sorted(kv),
        "weight_tensors": sorted(prepared.held.tensors()),
        "forwards": steps,
        "prompt": {"tensor": "prompt_ids", "rows": w.prompt_len},
        "new_tokens": w.new_tokens,
        "score": {"tensor": "eval_ids", "texts": texts, "rows": eval_len, "row_bytes": eval_len * cfg.vocab * 4},
    }
    return options, tensors


class WgslDecoder(WgslRunner):
    """The decoder's passes as step lists the page executes (web/engines/wgsl_decoder.js)."""

    runner = RUNNER

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        workload = run.workload
        assert isinstance(workload, DecoderWorkload)
        prepared = prepare_decoder(workload, run.bits, run.weight_block, run.seed, weight_quant=run.weight_quant)
        why = _unsupported(prepared)
        if why:
            return Refusal(Outcome.UNSUPPORTED, f"the harness's WGSL decoder cannot run this model: {why}")
        options, tensors = build(prepared)
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, options)
        return EngineJob(spec=spec, tensors=tensors, prepared=prepared,
                         **held_fields([layer.held for layer in prepared.held.layers]))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        assert isinstance(job.prepared, PreparedDecoder)
        return executed_steps(engine, job, page, job.prepared.plan)

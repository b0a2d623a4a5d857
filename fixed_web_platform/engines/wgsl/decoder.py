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
the device between steps (shaders/ops/); only each new id comes back.

The linear layers are the matmul kernels (shaders/matmul_*.wgsl with the model's linear prelude,
as the encoder's: engines/wgsl/encoder.py), their tile chosen per pass from its rows (1 for
decode and the prefill's head), so the page compiles one module per (bits, rows).
"""

from __future__ import annotations

from typing import Any

from ...architectures import ops
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from .lower import ZEROS, Lowering
from .steps import StepListRunner

RUNNER = "wgsl_decoder"


class WgslDecoder(StepListRunner):
    """The decoder's passes as step lists the page executes (web/engines/wgsl_decoder.js)."""

    runner = RUNNER
    label = "decoder"

    prepare = staticmethod(prepare_decoder)

    def shapes(self, prepared: PreparedDecoder) -> dict[str, int]:
        eos = prepared.tokens.eos
        return {"prompt_len": prepared.workload.prompt_len, "eval_len": prepared.tokens.eval_ids.shape[1],
                "context": prepared.context, "eos": eos[0] if eos else -1}

    def loop_options(self, prepared: PreparedDecoder, graph: ops.Graph, lowering: Lowering,
                     steps: dict[str, list[dict[str, Any]]], tensors: dict[str, bytes]) -> dict[str, Any]:
        cfg, w = prepared.config, prepared.workload
        texts, eval_len = prepared.tokens.eval_ids.shape
        widths = {p.layer.name: p.layer.n for p in prepared.plan}
        values = {name: count * 4 for name, count in graph.value_sizes(widths, prepared.context).items()}
        kv = sorted({name for p in graph.passes.values() for op in p.ops if isinstance(op, ops.KvWrite)
                     for name in (op.cache_k, op.cache_v)})
        loop_state = {"ids": max(w.prompt_len, eval_len) * 4, "pos": 4, "count": 4, "generated": w.new_tokens * 4,
                      ZEROS: max(widths.values()) * 4}
        return {"activations": values | loop_state, "kv_cache": kv, "forwards": steps,
                "prompt": {"tensor": "prompt_ids", "rows": w.prompt_len}, "new_tokens": w.new_tokens,
                "score": {"tensor": "eval_ids", "texts": texts, "rows": eval_len,
                          "row_bytes": eval_len * cfg.vocab * 4}}

"""The speech kind (Whisper) as the harness's own WebNN graphs (web/engines/webnn_speech.js).

Three graphs with static shapes, built in the page from the same tensors:

- ``encoder``: Python's log-mel features [1, mels, 1, frames] -> the two convolutions as WebNN
  conv2d (kernel 1 x 3, padding 1; the second strides by 2) with GELU, the sinusoidal positions,
  the pre-norm layers, the final layer norm; then every decoder layer's cross-attention keys and
  values ([heads, positions, head_dim] MLTensors), once per clip;
- ``prompt``: the prompt's rows from position 0 (their keys and values padded to the cache's
  length), the final norm and the output projection on the last row, the greedy id (argMax in
  the graph over decoding.py's first-position suppress bias) and the logits;
- ``decode``: one row at a position: the caches in, the caches with that row written out
  (masked beyond it), the greedy id over the later positions' bias.

The KV cache, the cross keys and values and each new id stay MLTensors; the page reads the id
back after every step (the per-token timestamps). WebNN has no front end here: the page is fed
Python's features (the WGSL engine computes its own), so the row's front-end figures are blank.

Each linear layer's data types are chosen as for the encoder and decoder kinds (layers.py):
standard mode runs 4/2-bit layers as 8-bit and says so; experimental mode asks for int4/int2 and
the browser's own error is the answer. The bytes are prepared at the bits each layer executes, so
the float64 Whisper runs the model the graphs hold. The convolutions stay float32.
"""

from __future__ import annotations

import dataclasses

from ...harness.protocol import PageReply
from ...models import rules as precision_rules
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.speech import SpeechWorkload
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from . import context_limits
from .forms import MODEL_FORM, choose_form
from .layers import executed, layer_options, plan_layers

RUNNER = "webnn_speech"
"""The page module (web/engines/webnn_speech.js)."""


class WebnnSpeech(KindRunner):
    """Whisper as an encoder graph and prompt / decode-step graphs."""

    runner = RUNNER

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        limits = await context_limits(run, browser)
        if isinstance(limits, Refusal):
            return limits
        form, form_problem = choose_form(run, MODEL_FORM)
        if form_problem:
            return Refusal(Outcome.UNSUPPORTED, form_problem)
        workload = run.workload
        assert isinstance(workload, SpeechWorkload)
        cfg = workload.config()
        asked = precision_rules.assign(cfg.linear_layers(), workload.rules, run.bits, run.weight_block)
        layer_plans = plan_layers(asked, run, limits)
        if isinstance(layer_plans, Refusal):
            return layer_plans
        if layer_plans.executed_rules is not None:
            workload = dataclasses.replace(workload, rules=layer_plans.executed_rules)
        prepared = prepare_speech(workload, run.bits, run.weight_block, run.seed, layer_plans.unsigned)
        prepared = dataclasses.replace(prepared, front_end_on_device=False)
        tensors = {"features": prepared.features_tensor(), **prepared.suppress_tensors(), **prepared.held.tensors()}
        options = {
            "device_type": run.webnn_device,
            "graph_form": form,
            "model": cfg.to_json() | {"name": workload.name, "head_dim": cfg.head_dim},
            "linears": [{"name": p.layer.name, "k": p.layer.k, "n": p.layer.n, "bits": p.bits} for p in prepared.plan],
            "webnn_layers": [layer_options(lp, held.precision.block)
                             for lp, held in zip(layer_plans.per_layer, prepared.held.layers)],
            "clips": len(prepared.pcm),
            "context": len(cfg.prompt) + workload.max_tokens,  # the workload keeps it within the positions
            "prompt": {"tensor": "prompt_ids", "rows": len(cfg.prompt)},
            "max_tokens": workload.max_tokens,
            "eot": cfg.eot,
        }
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
            tensors=tensors, prepared=prepared,
            note="; ".join(layer_plans.notes()),
            refusal_is_unsupported=layer_plans.asks_unlisted,
            details={"op_support_limits": limits, "weight_plans": layer_plans.details()},
            graph_form=form, **layer_plans.job_fields(prepared.held.layers),
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        assert isinstance(job.prepared, PreparedSpeech)
        return executed(job, page, job.prepared.held.layers, engine.platform.value)

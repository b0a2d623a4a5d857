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

from ...page_protocol import PageReply
from ...precision.quantizers import QUANTIZERS
from ...run_spec import RunSpec, TimingConfig
from ...workloads.speech import SpeechWorkload
from ...workloads.speech.prepared import PreparedSpeech, prepare_speech
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from .forms import MODEL_FORM
from .layers import executed, plan_model

RUNNER = "webnn_speech"
"""The page module (web/engines/webnn_speech.js)."""


class WebnnSpeech(KindRunner):
    """Whisper as an encoder graph and prompt / decode-step graphs."""

    runner = RUNNER
    weight_quants = tuple(QUANTIZERS)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        plan = await plan_model(run, browser, MODEL_FORM)
        if isinstance(plan, Refusal):
            return plan
        workload = plan.workload
        assert isinstance(workload, SpeechWorkload)
        cfg = workload.config()
        prepared = prepare_speech(workload, run.bits, run.weight_block, run.seed, plan.layers.unsigned,
                                  run.weight_quant)
        prepared = dataclasses.replace(prepared, front_end_on_device=False)
        tensors = {"features": prepared.features_tensor(), **prepared.suppress_tensors(), **prepared.held.tensors()}
        options = plan.graph_options(run, prepared.plan, prepared.held.layers) | {
            "model": cfg.to_json() | {"name": workload.name, "head_dim": cfg.head_dim},
            "clips": len(prepared.pcm),
            "context": len(cfg.prompt) + workload.max_tokens,  # the workload keeps it within the positions
            "prompt": {"tensor": "prompt_ids", "rows": len(cfg.prompt)},
            "max_tokens": workload.max_tokens,
            "eot": cfg.eot,
        }
        return EngineJob(spec=self.spec(engine, run, timing, tensors, prepared.outputs, options),
                         tensors=tensors, prepared=prepared, **plan.job_fields(prepared.held.layers))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        assert isinstance(job.prepared, PreparedSpeech)
        return executed(job, page, job.prepared.held.layers, engine.platform.value)

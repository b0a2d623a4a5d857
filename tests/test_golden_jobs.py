"""The jobs the harness's own engines build for the three model kinds, held as golden files.

Each case builds one job, with no browser, for a tiny random-weight model of an architecture
(BERT, Llama, Gemma 3 with its sliding window in play, Whisper) on the harness's WGSL steps or WebNN graphs. The job's page part is
compared with tests/fixtures/golden_jobs/<case>.json: the runner, the bindings, the outputs, the
engine's options (the step lists, the graph descriptions) and a digest of every tensor's bytes.
A change to how a forward pass is written down (the op graph and its lowerings) must leave these
files identical (numbers compared at float32's precision, tests/golden.py); a change meant to alter
them regenerates them with ``GOLDEN_UPDATE=1 pytest tests/test_golden_jobs.py`` and the diff is
reviewed with the commit. WGSL program text and long strings are held as digests to keep the files
readable; an int8 activation's scale and zero point tensor by value."""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from golden import check_golden
from speech_models import tiny_whisper
from test_decoder import tiny_hf_config
from test_gemma3 import tiny_gemma_config
from test_transformersjs import tiny_bert
from test_webnn_precision import CHROMIUM_LIMITS

from fixed_web_platform.engines.base import EngineJob
from fixed_web_platform.engines.registry import build_job
from fixed_web_platform.engines.wgsl.encoder import ACT_QUANT_SUFFIX
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform, PrecisionMode
from fixed_web_platform.workloads import DecoderWorkload, EncoderWorkload
from fixed_web_platform.workloads.speech import SpeechWorkload

GOLDEN = Path(__file__).parent / "fixtures" / "golden_jobs"
LONG = 160
"""Strings longer than this (WGSL sources) are held as their digest."""


class Chromium:
    """A browser whose WebNN CPU context lists Chromium's data types (tests/test_webnn_precision.py)."""

    async def webnn_context(self, device: str) -> dict[str, Any]:
        return {"available": True, "limits": CHROMIUM_LIMITS}

    async def adapter_limits(self) -> dict[str, int]:
        return {"maxBufferSize": 1 << 30, "maxStorageBufferBindingSize": 1 << 30}  # SwiftShader's


def _digest(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return f"sha256:{hashlib.sha256(raw).hexdigest()[:16]}:{len(raw)}"


def _held(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _held(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_held(v) for v in value]
    if isinstance(value, str) and len(value) > LONG:
        return _digest(value)
    return value


COMPUTED = {"features"}
"""Tensors the golden files hold by length only: a speech clip's log-mel features, which
transformers' feature extractor computes with numpy's FFT, log and matmul, whose last bits follow
the CPU's SIMD paths; the end-to-end tests check what the page makes of them."""


def _tensor(name: str, data: bytes) -> Any:
    if name in COMPUTED:
        return f"computed:{len(data)}"
    if name.endswith(ACT_QUANT_SUFFIX):  # a calibrated scale (float32) and zero point (int32)
        scale, zero_point = struct.unpack("<fi", data)
        return {"scale": scale, "zero_point": zero_point}
    return _digest(data)


def page_part(job: EngineJob) -> dict[str, Any]:
    """What the page is sent, with tensors and long texts as digests (timing is the runner's)."""
    spec = job.spec.to_json()
    tensors = {name: _tensor(name, data) for name, data in sorted(job.tensors.items())}
    return _held({k: spec[k] for k in ("runner", "engine", "platform", "bits", "bindings", "outputs", "options")}
                 | {"tensors": tensors})


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("golden-models")
    bert = tiny_bert(root / "tiny-bert")
    llama = root / "tiny-llama"
    tiny_hf_config(vocab_size=30522, hidden_size=32, intermediate_size=64,
                   max_position_embeddings=64).save_pretrained(llama)
    gemma = root / "tiny-gemma3"
    tiny_gemma_config(vocab_size=30522, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, layer_types=["sliding_attention", "full_attention"]).save_pretrained(gemma)
    return {
        "root": str(root),
        "encoder": EncoderWorkload.create(str(bert), batch_size=2, seq_len=8, random_weights=True),
        "decoder": DecoderWorkload.create(str(llama), prompt_len=6, new_tokens=3, eval_len=8, random_weights=True),
        "gemma3": DecoderWorkload.create(str(gemma), prompt_len=6, new_tokens=3, eval_len=8, random_weights=True),
        "speech": SpeechWorkload.from_options(str(tiny_whisper(root / "tiny-whisper")), clips=1, max_tokens=4),
    }


CASES = {  # case -> (model: the ``models`` fixture's key, platform, bits, act_bits, precision mode)
    "encoder-webgpu-w4": ("encoder", Platform.WEBGPU, 4, 32, PrecisionMode.STANDARD),
    "encoder-webgpu-w8a8": ("encoder", Platform.WEBGPU, 8, 8, PrecisionMode.STANDARD),
    "encoder-webnn-w4": ("encoder", Platform.WEBNN, 4, 32, PrecisionMode.EXPERIMENTAL),
    "encoder-webnn-w8a8": ("encoder", Platform.WEBNN, 8, 8, PrecisionMode.STANDARD),
    "decoder-webgpu-w4": ("decoder", Platform.WEBGPU, 4, 32, PrecisionMode.STANDARD),
    "decoder-webnn-w4": ("decoder", Platform.WEBNN, 4, 32, PrecisionMode.EXPERIMENTAL),
    "gemma3-webgpu-w4": ("gemma3", Platform.WEBGPU, 4, 32, PrecisionMode.STANDARD),
    "gemma3-webnn-w8": ("gemma3", Platform.WEBNN, 8, 32, PrecisionMode.STANDARD),
    "speech-webgpu-w4": ("speech", Platform.WEBGPU, 4, 32, PrecisionMode.STANDARD),
    "speech-webnn-w4": ("speech", Platform.WEBNN, 4, 32, PrecisionMode.EXPERIMENTAL),
}


@pytest.mark.parametrize("case", list(CASES))
def test_job_is_the_golden_one(case: str, models: dict[str, Any]) -> None:
    model, platform, bits, act_bits, mode = CASES[case]
    plan = build_plan([BrowserName.CHROME], [platform], [models[model]], [bits], engines=[EngineName.HARNESS],
                      act_bits=[act_bits], precision_mode=mode)
    (run,) = [r for r in plan if r.act_bits == act_bits]
    job = asyncio.run(build_job(run, TimingConfig(), Chromium()))
    assert isinstance(job, EngineJob), job
    text = json.dumps(page_part(job), indent=1, sort_keys=True).replace(models["root"], "<models>") + "\n"
    check_golden(text, GOLDEN / f"{case}.json", f"{case}'s job")


def test_a_graph_that_skips_or_invents_a_linear_layer_is_refused() -> None:
    """Graph.check: every plan layer is in some pass and no pass names another, so an architecture's
    graph that forgets a layer fails before any engine lowers it (the page would otherwise run a
    model whose bytes are not all used)."""
    import dataclasses

    from fixed_web_platform.architectures import BERT, ops
    from fixed_web_platform.architectures.bert.config import BertConfig

    cfg = BertConfig(layers=1, hidden=32, heads=4, intermediate=64, vocab=100, max_positions=16, type_vocab=2,
                     eps=1e-12)
    graph = BERT.graph(cfg, batch=1, seq=4)
    names = [layer.name for layer in cfg.linear_layers()]
    graph.check(names)
    forward = graph.passes["forward"]
    skipped = dataclasses.replace(forward, ops=tuple(op for op in forward.ops if not (
        isinstance(op, ops.Linear) and op.layer.endswith("attention.self.key"))))
    with pytest.raises(ValueError, match="missing .*attention.self.key"):
        ops.Graph({"forward": skipped}).check(names)
    with pytest.raises(ValueError, match="unknown .*attention.self.key"):
        graph.check([n for n in names if not n.endswith("attention.self.key")])


def test_a_tensor_past_the_adapters_binding_limit_is_refused_before_the_page(models: dict[str, Any]) -> None:
    """The harness's kernels bind each tensor whole (engines/registry.py buffer_limit_refusal): a
    model whose embedding table passes maxStorageBufferBindingSize (Gemma 3 270M's float32 table is
    671,088,640 bytes; Firefox's limit is 134,217,728) is refused before any page loads, naming the
    tensor and the limit; under the limit the same job is built."""
    from fixed_web_platform.engines.base import Refusal

    class Narrow(Chromium):
        async def adapter_limits(self) -> dict[str, int]:
            return {"maxBufferSize": 1 << 30, "maxStorageBufferBindingSize": 1 << 20}

    (run,) = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [models["gemma3"]], [4], engines=[EngineName.HARNESS])
    refused = asyncio.run(build_job(run, TimingConfig(), Narrow()))
    assert isinstance(refused, Refusal), refused
    assert "model.embed_tokens.weight (3,906,816 bytes)" in refused.reason, refused.reason
    assert "maxStorageBufferBindingSize 1,048,576" in refused.reason, refused.reason
    assert isinstance(asyncio.run(build_job(run, TimingConfig(), Chromium())), EngineJob)

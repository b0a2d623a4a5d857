"""What ran where in a whole-model ONNX Runtime Web run (encoder.py, decoder.py): every linear
layer's node, as the page read ORT's placement log (``layers[i].weight_dtype`` =
'<node weights>@<provider>', e.g. 'MatMulNBits4@wasm'); the bits are the job's."""

from __future__ import annotations

from collections import Counter

from ...page_protocol import PageDataError, PageReply
from ...vocabulary import Platform
from ..base import Engine, EngineJob, Executed, LayerExecuted
from .onnx_linears import QDQ_WEIGHTS


def executed(engine: Engine, job: EngineJob, page: PageReply) -> Executed:
    """Where each layer's node ran (``job.spec.options['ort_layers']`` lists them), the provider
    most of them ran on, and notes when some ran elsewhere or the provider refused a session
    without CPU fallback."""
    providers = {p.value for p in Platform} | {"?"}
    wanted = job.spec.options.get("ort_layers") or []
    if len(page.layers) != len(wanted):
        raise PageDataError(f"the reply has {len(page.layers)} layers, the job has {len(wanted)}")
    layers: list[LayerExecuted] = []
    ran_on: list[str] = []
    for want, reply in zip(wanted, page.layers):
        if reply.name != want["name"]:
            raise PageDataError(f"layer {reply.name!r:.80} is where the job has {want['name']!r}")
        dtype, _, provider = reply.weight_dtype.partition("@")
        if dtype != want["weight_dtype"] or provider not in providers:
            raise PageDataError(f"layer {reply.name}: weight_dtype {reply.weight_dtype!r:.40} is not "
                                f"'{want['weight_dtype']}@<provider>'")
        ran_on.append(provider)
        layers.append(LayerExecuted(reply.name, int(want["bits"]), reply.weight_dtype,
                                    int(want["weight_bytes"]), reply.gpu_ms,
                                    act_dtype="int8" if want["weight_dtype"] == QDQ_WEIGHTS else ""))
    counts = Counter(ran_on)
    most = max(counts, key=lambda p: (counts[p], p == engine.platform.value))
    if page.executed_on != most:
        raise PageDataError(f"executed_on {page.executed_on!r:.40} is not where most layers ran ({most})")
    elsewhere = len(ran_on) - counts[engine.platform.value]
    notes = []
    if elsewhere:
        where = ", ".join(f"{c} on {p if p != '?' else 'an unknown provider'}"
                          for p, c in counts.items() if p != engine.platform.value)
        notes.append(f"{elsewhere} of {len(ran_on)} linear layers did not run on {engine.platform}: {where}")
    if page.fallback:
        notes.append(f"{engine.platform} refused a session without CPU fallback: {page.fallback[:300]}")
    if page.placement and (elsewhere or page.fallback):
        notes.append(f"ORT's placement: {page.placement[:400]}")
    plan = job.prepared.layers
    by_flag = [layer.bits_executed for p, layer in zip(plan, layers) if p.rule == "--bits"]
    pool = by_flag or [layer.bits_executed for layer in layers]
    bits = Counter(pool).most_common(1)[0][0] if pool else None
    compute = "f16" if any(layer.bits_executed == 16 for layer in layers) else "f32"
    return Executed(bits, compute, most, note="; ".join(notes), layers=tuple(layers))



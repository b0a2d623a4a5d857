"""The encoder kind on the harness's own WGSL kernels (engine ``harness``, platform ``webgpu``).

The encoder's forward pass is a list of steps that Python writes and the page
(web/engines/wgsl_model.js) executes as it is told, one command submission per forward pass:
embeddings + layer norm, then per layer Q/K/V linears, attention, output linear, residual +
layer norm, intermediate linear with GELU, output linear, residual + layer norm; then mean
pooling and L2 normalisation.

The linear layers are the matmul kernels' own ``accumulate(n0, m0)`` bodies (shaders/matmul_*.wgsl,
the one place for each packed weight format) composed with shaders/ops/linear_prelude.wgsl
(linear.py, shared with the decoder)
(bias and GELU epilogue); their variants per bits are ``wgsl.variants_for(bits, act_bits, tiling, rows)`` and the page
picks the first whose features its adapter has. Their tile is the matmul sweep's choice for the
model's rows and narrowest layer (``wgsl.tiling_for``), the same for every layer. The other
kernels are shaders/ops/*.wgsl (engines/wgsl/lower.py). Packed layers on the GEMM path (the model's rows span several
row tiles: ``wgsl.dequantize_once``) carry a ``prologue``: the dequantize step, which the page
dispatches in the layer's own pass right before the float32 kernel, writing the layer's weights
as float32 into the shared ``wf`` scratch buffer (sized for the largest such layer) that the
kernel reads; the layer's timestamps cover both.

Int8 activations (``--act-bits 8``: W8A8 / W4A8): before each layer with a calibrated input
(models/calibration.py) a ``quantize_act`` step writes its input as int8 words into the ``xq``
buffer (once for Q, K and V, which share an input), and the layer runs the DP4A kernel
(shaders/matmul_dp4a.wgsl) on it with that scale and zero point. Both read the scale and zero
point from an 8-byte tensor (``wgsl.act_quant_bytes``; one per distinct pair, named after the
first layer with it, ``<layer>.x_quant``) bound with the step, not from override constants, so
the layers of one shape share one pipeline (the page compiles one per source and constants). Its
timestamps cover the linear kernel; the quantize steps count in the whole pass.
What ran is read from the shaders the page names and the weight buffers it bound, never from the
page's word about its arithmetic.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...page_protocol import PageDataError, PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import INPUT_TENSORS, PreparedModel, prepare_model
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import WgslRunner
from . import kernels as wgsl
from .linear import bound_layers, held_fields, model_zero, unsupported
from .lower import INT8_INPUT, SUPPORTS, Lowering

RUNNER = "wgsl_model"
ACT_QUANT_SUFFIX = ".x_quant"
"""The tensor of a layer's input scale and zero point (wgsl.act_quant_bytes) is named after the
first layer that has that pair, with this suffix."""


def act_quant_tensors(prepared: PreparedModel) -> tuple[list[str | None], dict[str, bytes]]:
    """Per plan layer, the name of the tensor holding its input's int8 scale and zero point (None:
    a float input), and those tensors: one per distinct (scale, zero point), 8 bytes each."""
    names: list[str | None] = []
    tensors: dict[str, bytes] = {}
    named: dict[tuple[float, int], str] = {}
    for p, act in zip(prepared.plan, prepared.act_quant or (None,) * len(prepared.plan)):
        if act is None:
            names.append(None)
            continue
        key = (act.scale, act.zero_point)
        if key not in named:
            named[key] = p.layer.name + ACT_QUANT_SUFFIX
            tensors[named[key]] = wgsl.act_quant_bytes(*key)
        names.append(named[key])
    return names, tensors


def _lowered(prepared: PreparedModel, act_names: list[str | None]) -> tuple[list[dict[str, Any]], Lowering]:
    """The forward pass as the page executes it (BERT's graph lowered), and its lowering;
    ``act_names``: each plan layer's int8 input tensor (act_quant_tensors)."""
    batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
    graph = prepared.workload.architecture().graph(prepared.config, batch=batch, seq=seq)
    graph.check([p.layer.name for p in prepared.plan])
    lowering = Lowering(prepared.plan, prepared.config.has_bias, model_zero(prepared.held), per_rows=False,
                        act_quant=prepared.act_quant, act_names=act_names)
    steps = lowering.steps(graph.passes["forward"])
    if [s["linear"] for s in steps if s["op"] == "linear"] != list(range(len(prepared.plan))):
        raise ValueError("the model's linear layers are not in forward order")  # the page replies in this order
    return steps, lowering


def _activations(prepared: PreparedModel, lowering: Lowering) -> dict[str, int]:
    """The activation buffers the forward pass needs (bytes)."""
    cfg = prepared.config
    batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
    rows, hidden = batch * seq, cfg.hidden
    activations = {"hidden": rows * hidden * 4, "q": rows * hidden * 4, "k": rows * hidden * 4,
                   "v": rows * hidden * 4, "ctx": rows * hidden * 4, "y": rows * hidden * 4,
                   "inter": rows * cfg.intermediate * 4, "pooled": batch * hidden * 4}
    activations |= {f"pass.{name}": rows * 4 for name in INPUT_TENSORS}
    if any(prepared.act_quant):
        activations[INT8_INPUT] = rows * max(p.layer.k for p in prepared.plan)
    if lowering.dequantized:
        activations[wgsl.DEQUANTIZED] = lowering.dequantized
    return activations


def _rows(prepared: PreparedModel) -> int:
    batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
    return batch * seq


def _kernels(prepared: PreparedModel) -> set[tuple[int, int]]:
    """(bits, activation bits) of every linear layer's kernel."""
    acts = prepared.act_quant or (None,) * len(prepared.plan)
    return {(p.bits, 8 if a else 32) for p, a in zip(prepared.plan, acts)}


class WgslEncoder(WgslRunner):
    """The encoder's forward pass as a step list the page executes (web/engines/wgsl_model.js)."""

    runner = RUNNER
    supports = SUPPORTS
    act_bits = (32, 8)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        workload = run.workload
        assert isinstance(workload, EncoderWorkload)
        prepared = prepare_model(workload, run.bits, run.weight_block, run.seed,
                                 act_bits=run.act_bits, observer=run.observer, weight_quant=run.weight_quant)
        why = unsupported(prepared.plan, prepared.config.head_dim, prepared.held)
        if why:
            return Refusal(Outcome.UNSUPPORTED, f"the harness's WGSL encoder cannot run this model: {why}")
        act_names, act_tensors = act_quant_tensors(prepared)
        steps, lowering = _lowered(prepared, act_names)
        batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
        tensors = prepared.tensors() | act_tensors | lowering.tensors
        options = {
            "programs": lowering.sources(),
            "linear_variants": lowering.linear_variants(),
            "tiling": lowering.tiling(batch * seq).to_json(),
            "activations": _activations(prepared, lowering),
            "tensor_bytes": {name: len(data) for name, data in tensors.items()},
            "pass_inputs": [{"from": name, "to": f"pass.{name}", "bytes": batch * seq * 4}
                            for name in INPUT_TENSORS],
            "steps": steps,
            "result": {"buffer": "pooled", "bytes": batch * prepared.config.hidden * 4},
        }
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, prepared.options() | options)
        return EngineJob(spec=spec, tensors=tensors, prepared=prepared,
                         **held_fields([layer.held for layer in prepared.held.layers]))

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        prepared = job.prepared
        assert isinstance(prepared, PreparedModel)
        plan = prepared.plan
        tiling = wgsl.Tiling(**job.spec.options["tiling"])
        offered = {v.id: v for b, a in _kernels(prepared)
                   for v in wgsl.variants_for(b, a, tiling, _rows(prepared), model_zero(prepared.held))}
        used = [s for s in page.shader.split("+") if s]
        unknown = [s for s in used if s not in offered]
        if not used or unknown:
            return Executed(None, "", engine.platform.value,
                            f"the page used shader(s) {page.shader!r}, which the job did not offer")
        dtypes = {offered[s].compute_dtype for s in used}
        compute_dtype = next((d for d in ("i8dot", "f16") if d in dtypes), "f32")
        if page.weight_buffer_bytes is None:
            raise PageDataError("the reply has no weight_buffer_bytes (the bound weight buffers)")
        acts = prepared.act_quant or (None,) * len(plan)
        layers, problems = bound_layers(plan, page.layers,
                                        ["int8" if act and "i8dot" in dtypes else "" for act in acts])
        total = sum(layer.weight_bytes or 0 for layer in layers)
        if total != page.weight_buffer_bytes:
            problems.append(f"weight_buffer_bytes {page.weight_buffer_bytes} is not the layers' sum {total}")
        at_run_bits = [le.bits_executed for p, le in zip(plan, layers) if p.rule == "--bits"]
        pool = at_run_bits or [le.bits_executed for le in layers]
        bits = Counter(pool).most_common(1)[0][0]
        notes = []
        if "f16" not in dtypes and any(p.bits == 16 for p in plan):
            notes.append("16-bit layers computed in f32 (the adapter has no shader-f16)")
        int8_inputs = sum(1 for a in prepared.act_quant if a)
        if int8_inputs and "i8dot" not in dtypes:
            problems.append(f"{int8_inputs} layer(s) with int8 inputs, but the page used no int8 kernel")
        if int8_inputs and int8_inputs < len(plan):
            notes.append(f"int8 activations in {int8_inputs} of {len(plan)} linear layers (the 8- and 4-bit ones; "
                         "the others kept float inputs)")
        note = "; ".join(notes)
        problem = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
        kernel_variant = "+".join(offered[s].kernel_variant(tiling) for s in used)
        return Executed(bits, compute_dtype, engine.platform.value, problem, note, tuple(layers),
                        kernel_variant)

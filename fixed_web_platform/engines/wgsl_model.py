"""Whole models on the harness's own WGSL kernels (engine ``harness``, platform ``webgpu``).

The encoder's forward pass is a list of steps that Python writes and the page
(web/engines/wgsl_model.js) executes as it is told, one command submission per forward pass:
embeddings + layer norm, then per layer Q/K/V linears, attention, output linear, residual +
layer norm, intermediate linear with GELU, output linear, residual + layer norm; then mean
pooling and L2 normalisation.

The linear layers are the matmul kernels' own ``accumulate(n0, m0)`` bodies (shaders/matmul_*.wgsl,
the one place for each packed weight format) composed with shaders/model/linear_prelude.wgsl
(bias and GELU epilogue); their variants per bits are ``wgsl.variants_for(bits)`` and the page
picks the first whose features its adapter has. Their tile is the matmul sweep's choice for the
model's rows and narrowest layer (``wgsl.tiling_for``), the same for every layer. The other
kernels are shaders/model/*.wgsl.
What ran is read from the shaders the page names and the weight buffers it bound, never from the
page's word about its arithmetic.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import replace
from typing import Any

from ..harness.protocol import PageDataError, PageReply
from ..models.prepared import INPUT_TENSORS, PreparedModel, prepare_model
from ..paths import SHADERS_DIR
from ..plan import RunSpec, TimingConfig
from ..vocabulary import Outcome
from . import wgsl
from .base import Engine, EngineJob, Executed, LayerExecuted, Refusal

RUNNER = "wgsl_model"
MODEL_SHADERS = SHADERS_DIR / "model"
LINEAR_PRELUDE = "linear_prelude.wgsl"
ROW_WORKGROUP = 64
"""Workgroup size of the one-invocation-per-row kernels (embeddings, add + layer norm, attention)."""
POOL_WORKGROUP = 64
BIAS_BINDING = 5
PROGRAMS = ("embed_ln", "attention", "add_ln", "pool")


def weight_dtype_for(bits: int) -> str:
    """The stored format the linear-layer variants of ``bits`` read (the page reports it per layer)."""
    return {32: "float32", 16: "float16"}.get(bits, f"int{bits}")


@functools.cache
def linear_source(shader: str, tiling: wgsl.Tiling, bits: int) -> str:
    """A matmul kernel's body behind the model's linear prelude: enables first, then the
    prelude with the tile sizes filled in, then the kernel's accumulate(n0, m0)."""
    return wgsl.compose(MODEL_SHADERS / LINEAR_PRELUDE, shader, tiling, bits)


@functools.cache
def program_source(name: str, head_dim: int) -> str:
    text = (MODEL_SHADERS / f"{name}.wgsl").read_text()
    return text.replace("{HEAD_DIM}", str(head_dim)).replace("{WORKGROUP}", str(POOL_WORKGROUP))


def _groups(count: int, size: int) -> int:
    return -(-count // size)


def _unsupported_shape(prepared: PreparedModel) -> str:
    cfg = prepared.config
    if cfg.hidden % cfg.heads or cfg.head_dim % 4:
        return f"head size {cfg.hidden}/{cfg.heads} is not a multiple of 4 (the attention kernel reads vec4s)"
    for p in prepared.plan:
        layer = p.layer
        if layer.k % 4:
            return f"{layer.name}: K = {layer.k} is not a multiple of 4 (the linear kernels read vec4s)"
        if p.bits <= 8:
            per_word = 32 // p.bits
            if p.block_size <= 0 or layer.k % p.block_size or p.block_size % per_word:
                return (f"{layer.name}: block size {p.block_size} does not divide K = {layer.k} "
                        f"into whole {per_word}-value words (the packed kernel's layout)")
    return ""


def _steps(prepared: PreparedModel) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The forward pass as the page executes it, and the activation buffers it needs (bytes)."""
    cfg = prepared.config
    batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
    rows, hidden = batch * seq, cfg.hidden
    tiling = _tiling(prepared)
    activations = {"hidden": rows * hidden * 4, "q": rows * hidden * 4, "k": rows * hidden * 4,
                   "v": rows * hidden * 4, "ctx": rows * hidden * 4, "y": rows * hidden * 4,
                   "inter": rows * cfg.intermediate * 4, "pooled": batch * hidden * 4}
    activations |= {f"pass.{name}": rows * 4 for name in INPUT_TENSORS}
    eps = float(cfg.eps)
    steps: list[dict[str, Any]] = [{
        "op": "embed_ln", "program": "embed_ln",
        "bindings": ["pass.input_ids", "pass.token_type_ids", "embeddings.word_embeddings.weight",
                     "embeddings.position_embeddings.weight", "embeddings.token_type_embeddings.weight",
                     "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias", "hidden"],
        "constants": {"ROWS": rows, "SEQ": seq, "HIDDEN": hidden, "VOCAB": cfg.vocab,
                      "TYPE_VOCAB": cfg.type_vocab, "EPS": eps},
        "workgroups": [_groups(rows, ROW_WORKGROUP), 1, 1],
    }]

    def linear(index: int, x: str, out: str, gelu: bool = False) -> dict[str, Any]:
        p = prepared.plan[index]
        name, k, n = p.layer.name, p.layer.k, p.layer.n
        weights = [f"{name}.w"] + ([f"{name}.scales", f"{name}.zero_points"] if p.bits <= 8 else [])
        bindings: list[str | None] = [x, out, *weights]
        bindings += [None] * (BIAS_BINDING - len(bindings)) + [f"{name}.bias"]
        constants = {"M": rows, "K": k, "N": n} | ({"GELU": 1} if gelu else {})
        if p.bits <= 8:
            constants |= {"BITS": p.bits, "BLOCK_SIZE": p.block_size}
        return {"op": "linear", "linear": index, "name": name, "bits": p.bits, "bindings": bindings,
                "constants": constants, "workgroups": [*tiling.workgroups(rows, n), 1]}

    def add_ln(prefix: str) -> dict[str, Any]:
        return {"op": "add_ln", "program": "add_ln",
                "bindings": ["y", "hidden", f"{prefix}LayerNorm.weight", f"{prefix}LayerNorm.bias"],
                "constants": {"ROWS": rows, "HIDDEN": hidden, "EPS": eps},
                "workgroups": [_groups(rows, ROW_WORKGROUP), 1, 1]}

    names = [p.layer.name for p in prepared.plan]
    for i in range(cfg.layers):
        pre = f"encoder.layer.{i}."
        at = {suffix: names.index(pre + suffix) for suffix in
              ("attention.self.query", "attention.self.key", "attention.self.value",
               "attention.output.dense", "intermediate.dense", "output.dense")}
        steps += [
            linear(at["attention.self.query"], "hidden", "q"),
            linear(at["attention.self.key"], "hidden", "k"),
            linear(at["attention.self.value"], "hidden", "v"),
            {"op": "attention", "program": "attention",
             "bindings": ["q", "k", "v", "pass.attention_mask", "ctx"],
             "constants": {"BATCH": batch, "SEQ": seq, "HEADS": cfg.heads, "HIDDEN": hidden},
             "workgroups": [_groups(batch * cfg.heads * seq, ROW_WORKGROUP), 1, 1]},
            linear(at["attention.output.dense"], "ctx", "y"),
            add_ln(pre + "attention.output."),
            linear(at["intermediate.dense"], "hidden", "inter", gelu=True),
            linear(at["output.dense"], "inter", "y"),
            add_ln(pre + "output."),
        ]
    steps.append({"op": "pool", "program": "pool",
                  "bindings": ["hidden", "pass.attention_mask", "pooled"],
                  "constants": {"SEQ": seq, "HIDDEN": hidden},
                  "workgroups": [batch, 1, 1]})
    order = [s["linear"] for s in steps if s["op"] == "linear"]
    if order != list(range(len(prepared.plan))):
        raise ValueError("the model's linear layers are not in forward order")
    return steps, activations


def _variants(bits: int, tiling: wgsl.Tiling) -> list[dict[str, Any]]:
    return [{"shader": v.shader, "compute_dtype": v.compute_dtype, "requires": list(v.requires),
             "weight_dtype": weight_dtype_for(bits), "source": linear_source(v.shader, tiling, bits)}
            for v in wgsl.variants_for(bits)]


def _tiling(prepared: PreparedModel) -> wgsl.Tiling:
    """One tile for every linear layer (the page compiles one module per kernel): the matmul
    sweep's choice for the model's rows and its narrowest layer."""
    batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
    return wgsl.tiling_for(batch * seq, min(p.layer.n for p in prepared.plan))


def _summary(values: list[str]) -> str:
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return "mixed:" + ",".join(f"{v}x{c}" for v, c in counts.most_common())


async def model_job(engine: Engine, run: RunSpec, timing: TimingConfig) -> EngineJob | Refusal:
    prepared = prepare_model(run.workload, run.bits, run.block_size, run.seed)
    why = _unsupported_shape(prepared)
    if why:
        return Refusal(Outcome.UNSUPPORTED, f"the harness's WGSL encoder cannot run this model: {why}")
    steps, activations = _steps(prepared)
    cfg = prepared.config
    batch, seq = (int(d) for d in prepared.batches.input_ids.shape[1:])
    bits_used = sorted({p.bits for p in prepared.plan}, reverse=True)
    tensors = prepared.tensors()
    options = {
        "programs": {name: program_source(name, cfg.head_dim) for name in PROGRAMS},
        "linear_variants": {str(b): _variants(b, _tiling(prepared)) for b in bits_used},
        "tiling": _tiling(prepared).to_json(),
        "activations": activations,
        "pass_inputs": [{"from": name, "to": f"pass.{name}", "bytes": batch * seq * 4}
                        for name in INPUT_TENSORS],
        "steps": steps,
        "result": {"buffer": "pooled", "bytes": batch * cfg.hidden * 4},
    }
    spec = replace(engine.model_spec(run, prepared, timing, tensors, options), runner=RUNNER)
    held = [layer.held for layer in prepared.held.layers]
    quantized = [h for h in held if h.block_size]
    return EngineJob(
        spec=spec, tensors=tensors, prepared=prepared,
        weight_format=_summary([h.weight_format for h in held]),
        weight_dtype=_summary([h.weight_dtype for h in held]),
        scale_dtype="float32" if quantized else "",
        zero_point_dtype=_summary([h.weight_dtype for h in quantized]) if quantized else "",
    )


def model_interpret(engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
    prepared: PreparedModel = job.prepared
    plan = prepared.plan
    offered = {v.shader: v for b in {p.bits for p in plan} for v in wgsl.variants_for(b)}
    used = [s for s in page.shader.split("+") if s]
    unknown = [s for s in used if s not in offered]
    if not used or unknown:
        return Executed(None, "", engine.platform.value,
                        f"the page used shader(s) {page.shader!r}, which the job did not offer")
    compute_dtype = "f16" if any(offered[s].compute_dtype == "f16" for s in used) else "f32"
    if len(page.layers) != len(plan):
        raise PageDataError(f"the reply describes {len(page.layers)} linear layers, the model has {len(plan)}")
    if page.weight_buffer_bytes is None:
        raise PageDataError("the reply has no weight_buffer_bytes (the bound weight buffers)")
    layers, problems = [], []
    for p, reply in zip(plan, page.layers):
        if reply.name != p.layer.name:
            raise PageDataError(f"layer {reply.name!r} in the reply where {p.layer.name!r} was expected")
        if reply.weight_bytes is None:
            raise PageDataError(f"layer {p.layer.name} has no weight_bytes (its bound weight buffer)")
        elements = p.layer.n * p.layer.k
        bits = reply.weight_bytes * 8 // elements if reply.weight_bytes * 8 % elements == 0 else None
        if bits != p.bits:
            problems.append(f"{p.layer.name} bound {reply.weight_bytes} weight bytes, not {p.bits}-bit weights")
        layers.append(LayerExecuted(p.layer.name, bits, reply.weight_dtype, reply.weight_bytes, reply.gpu_ms))
    total = sum(layer.weight_bytes or 0 for layer in layers)
    if total != page.weight_buffer_bytes:
        problems.append(f"weight_buffer_bytes {page.weight_buffer_bytes} is not the layers' sum {total}")
    at_run_bits = [le.bits_executed for p, le in zip(plan, layers) if p.rule == "--bits"]
    pool = at_run_bits or [le.bits_executed for le in layers]
    bits = Counter(pool).most_common(1)[0][0]
    problem = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    note = ""
    if compute_dtype == "f32" and any(p.bits == 16 for p in plan):
        note = "16-bit layers computed in f32 (the adapter has no shader-f16)"
    tiling = wgsl.Tiling(**job.spec.options["tiling"])
    kernel_variant = "+".join(offered[s].kernel_variant(tiling) for s in used)
    return Executed(bits, compute_dtype, engine.platform.value, problem, note, tuple(layers),
                    kernel_variant)

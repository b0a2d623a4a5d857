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

from ...architectures.llama.config import HEAD
from ...architectures.llama.reference import rope_tables
from ...page_protocol import PageReply
from ...paths import SHADERS_DIR
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome
from ...workloads.decoder import DecoderWorkload
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import WgslRunner
from . import kernels as wgsl
from .linear import (
    BIAS_BINDING,
    MIXED_ZERO,
    dequantize_program,
    executed_steps,
    held_fields,
    model_zero,
    prologue,
    variants,
)

RUNNER = "wgsl_decoder"
DECODER_SHADERS = SHADERS_DIR / "model" / "decoder"
PROGRAMS = ("embed", "rmsnorm", "rope_kv", "attention_kv", "silu_mul", "argmax")
WORKGROUP = 64
"""Workgroup size of every decoder kernel but argmax (one workgroup)."""
ZEROS = "zeros"
"""A zero-filled buffer bound as the bias of layers without one (WebGPU zero-initialises buffers)."""
STATE = {"ids": "int32 ids of the pass's rows (the next step's input id after an argmax)",
         "pos": "u32 positions the KV cache holds", "count": "u32 ids generated so far"}


def _groups(count: int, size: int = WORKGROUP) -> int:
    return -(-count // size)


def program_source(name: str, head_dim: int) -> str:
    return (DECODER_SHADERS / f"{name}.wgsl").read_text().replace("{HEAD_DIM}", str(head_dim))


def kernel_key(bits: int, rows: int) -> str:
    """How a linear step names its kernel family: bits and the rows its tile was chosen for."""
    return f"{bits}r{rows}"


def _tiling(prepared: PreparedDecoder, rows: int) -> wgsl.Tiling:
    return wgsl.tiling_for(rows, min(p.layer.n for p in prepared.plan))


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


class _Forward:
    """One forward pass's steps over ``rows`` rows; ``last`` keeps only the last row's logits and
    ends with the greedy argmax."""

    def __init__(self, prepared: PreparedDecoder, rows: int, last: bool) -> None:
        self.p, self.rows, self.last = prepared, rows, last
        self.kernels: set[tuple[int, int]] = set()

    def linear(self, index: int, x: str, out: str, rows: int) -> dict[str, Any]:
        p = self.p.plan[index]
        name, k, n = p.layer.name, p.layer.k, p.layer.n
        tiling = _tiling(self.p, rows)
        weights = [f"{name}.w"] + ([f"{name}.scales", f"{name}.zero_points"] if p.bits <= 8 else [])
        dequantize_first = prologue(p.bits, 32, tiling, rows)
        bindings: list[str | None] = [x, out, *([wgsl.DEQUANTIZED] if dequantize_first else weights)]
        bias = f"{name}.bias" if self.p.config.has_bias(name) else ZEROS
        bindings += [None] * (BIAS_BINDING - len(bindings)) + [bias]
        constants: dict[str, Any] = {"M": rows, "K": k, "N": n}
        if p.bits <= 8 and not dequantize_first:
            constants |= {"BITS": p.bits, "BLOCK_SIZE": p.block}
        self.kernels.add((p.bits, rows))
        step: dict[str, Any] = {"op": "linear", "linear": index, "name": name, "bits": p.bits,
                                "kernel": kernel_key(p.bits, rows), "weights": weights[0], "bindings": bindings,
                                "constants": constants, "workgroups": [*tiling.workgroups(rows, n), 1]}
        if dequantize_first:
            step["prologue"] = {"op": "dequantize", "program": dequantize_program(p.bits),
                                "bindings": [*weights, wgsl.DEQUANTIZED],
                                **wgsl.dequantize_dispatch(k, n, p.bits, p.block)}
            step["prologue"]["workgroups"].append(1)
        return step

    def norm(self, weight: str, add: bool, row0: int = 0, rows_out: int | None = None) -> dict[str, Any]:
        rows_out = self.rows if rows_out is None else rows_out
        return {"op": "rmsnorm", "program": "rmsnorm", "bindings": ["y", "x", weight, "h"],
                "constants": {"ROWS_OUT": rows_out, "ROW0": row0, "HIDDEN": self.p.config.hidden,
                              "EPS": float(self.p.config.eps), "ADD": int(add)},
                "workgroups": [_groups(rows_out), 1, 1]}

    def steps(self) -> list[dict[str, Any]]:
        cfg, rows = self.p.config, self.rows
        at = {p.layer.name: i for i, p in enumerate(self.p.plan)}
        heads = {"ROWS": rows, "HEADS": cfg.heads, "KV_HEADS": cfg.kv_heads}
        out: list[dict[str, Any]] = [{
            "op": "embed", "program": "embed", "bindings": ["ids", "model.embed_tokens.weight", "x"],
            "constants": {"ROWS": rows, "HIDDEN": cfg.hidden, "VOCAB": cfg.vocab},
            "workgroups": [_groups(rows * cfg.hidden), 1, 1]}]
        for i in range(cfg.layers):
            pre = f"model.layers.{i}."
            lin = {s: at[pre + s] for s in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                            "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
            out += [
                self.norm(pre + "input_layernorm.weight", add=i > 0),
                self.linear(lin["self_attn.q_proj"], "h", "q", rows),
                self.linear(lin["self_attn.k_proj"], "h", "k", rows),
                self.linear(lin["self_attn.v_proj"], "h", "v", rows),
                {"op": "rope_kv", "program": "rope_kv",
                 "bindings": ["q", "k", "v", "rope.cos", "rope.sin", "pos", f"cache.{i}.k", f"cache.{i}.v"],
                 "constants": heads, "workgroups": [_groups(rows * (cfg.heads + cfg.kv_heads)), 1, 1]},
                {"op": "attention", "program": "attention_kv",
                 "bindings": ["q", f"cache.{i}.k", f"cache.{i}.v", "pos", "ctx"],
                 "constants": heads, "workgroups": [_groups(rows * cfg.heads), 1, 1]},
                self.linear(lin["self_attn.o_proj"], "ctx", "y", rows),
                self.norm(pre + "post_attention_layernorm.weight", add=True),
                self.linear(lin["mlp.gate_proj"], "h", "g", rows),
                self.linear(lin["mlp.up_proj"], "h", "u", rows),
                {"op": "silu_mul", "program": "silu_mul", "bindings": ["g", "u"],
                 "constants": {"COUNT": rows * cfg.intermediate},
                 "workgroups": [_groups(rows * cfg.intermediate), 1, 1]},
                self.linear(lin["mlp.down_proj"], "g", "y", rows),
            ]
        head_rows = 1 if self.last else rows
        out += [self.norm("model.norm.weight", add=True, row0=rows - head_rows, rows_out=head_rows),
                self.linear(at[HEAD], "h", "logits", head_rows)]
        if self.last:
            eos = self.p.tokens.eos
            out.append({"op": "argmax", "program": "argmax", "bindings": ["logits", "ids", "generated", "pos", "count"],
                        "constants": {"VOCAB": cfg.vocab, "ROWS": rows, "SUPPRESS": eos[0] if eos else -1},
                        "workgroups": [1, 1, 1]})
        order = [s["linear"] for s in out if s["op"] == "linear"]
        if order != list(range(len(self.p.plan))):
            raise ValueError("the model's linear layers are not in forward order")
        return out


def build(prepared: PreparedDecoder) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The job's options (programs, kernels, buffers, the three passes) and its tensors."""
    cfg, w, zero = prepared.config, prepared.workload, model_zero(prepared.held)
    texts, eval_len = prepared.tokens.eval_ids.shape
    forwards = {"prefill": _Forward(prepared, w.prompt_len, True), "decode": _Forward(prepared, 1, True),
                "score": _Forward(prepared, eval_len, False)}
    steps = {name: f.steps() for name, f in forwards.items()}
    kernels = set().union(*(f.kernels for f in forwards.values()))
    rows = max(w.prompt_len, eval_len)
    cos, sin = rope_tables(cfg, prepared.context)
    tensors = prepared.tensors() | {"rope.cos": cos.astype("<f4").tobytes(), "rope.sin": sin.astype("<f4").tobytes()}
    kv_bytes = prepared.context * cfg.kv_dim * 4
    activations = {"x": rows * cfg.hidden * 4, "h": rows * cfg.hidden * 4, "y": rows * cfg.hidden * 4,
                   "q": rows * cfg.q_dim * 4, "k": rows * cfg.kv_dim * 4, "v": rows * cfg.kv_dim * 4,
                   "ctx": rows * cfg.q_dim * 4, "g": rows * cfg.intermediate * 4, "u": rows * cfg.intermediate * 4,
                   "logits": eval_len * cfg.vocab * 4, "ids": rows * 4, "pos": 4, "count": 4,
                   "generated": w.new_tokens * 4, ZEROS: max(p.layer.n for p in prepared.plan) * 4}
    dequantized = [p.layer.n * p.layer.k * 4 for p in prepared.plan for b, r in kernels
                   if b == p.bits and prologue(b, 32, _tiling(prepared, r), r)]
    if dequantized:
        activations[wgsl.DEQUANTIZED] = max(dequantized)
    kv = {f"cache.{i}.{part}": kv_bytes for i in range(cfg.layers) for part in ("k", "v")}
    options = {
        "model": cfg.to_json() | {"name": w.name},
        "programs": {name: program_source(name, cfg.head_dim) for name in PROGRAMS}
        | {dequantize_program(b): wgsl.dequantize_source(b, zero) for b, r in kernels
           if prologue(b, 32, _tiling(prepared, r), r)},
        "linear_variants": {kernel_key(b, r): variants(b, 32, _tiling(prepared, r), r, zero)
                            for b, r in sorted(kernels)},
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

"""Ops (architectures/ops.py) lowered to the steps the WGSL pages execute (web/engines/wgsl_steps.js
and wgsl_model.js): one place that knows which kernel runs each op, its bindings, override
constants and workgroups, for every architecture.

A step is ``{op, program | kernel, bindings, constants, workgroups}``; linear steps also name
their layer (``linear``: its index in the plan, ``name``, ``bits``, ``weights``) and may carry a
``prologue`` (the dequantize step of the GEMM path, linear.py). Where the kernels fuse, the
lowering fuses: an embedding with the layer norm after it (``embed_ln``), RoPE with the cache
write after it (``rope_kv``), a norm's residual add and last-row selection (``add_ln``,
``layer_norm``, ``rmsnorm``), GELU in the linear epilogue. A norm written over its own input
(Gemma's) is ``rmsnorm_inplace``: WebGPU binds no buffer twice where one binding writes it. Int8 activations (the encoder's W8A8 /
W4A8): a ``quantize_act`` step writes a layer's input into ``xq`` unless ``xq`` already holds that
input at that scale and zero point (Q, K and V share theirs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...architectures import ops
from ...models.rules import LayerPrecision
from . import kernels as wgsl
from .linear import BIAS_BINDING, OPS_SHADERS, dequantize_program, prologue, variants

SUPPORTS = ops.BASE_NEEDS
"""What this lowering turns into kernel steps (architectures/ops.py ``needs``; the plan refuses a
run whose graph needs more)."""

WORKGROUP = 64
"""Workgroup size of the model kernels (one invocation per row or value) and of {WORKGROUP} reductions."""
ZEROS = "zeros"
"""A zero-filled buffer (WebGPU zero-initialises buffers): the bias of layers without one, the
positions of a convolution without them, the residual of a norm that adds none."""
ONES = "ones"
"""An int32 mask of ones: self-attention without a padding mask."""
INT8_INPUT = "xq"
"""The activation buffer int8 inputs are quantized into (the largest input's int8 words)."""
GATED_ACTS = ("silu", "gelu_tanh")
"""The gated_act kernel's activations, by its ACT constant."""
POWER = "power"
"""The log-mel front end's power spectrum (frames x bins)."""
KERNELS: dict[str, str] = {
    "embed_ln": "input_ids:i32 token_type_ids:i32 word position token_type gamma beta x!",
    "embed": "ids:i32 table x!",
    "embed_pos": "ids:i32 tokens positions pos:u32 x!",
    "add_ln": "y x! gamma beta",
    "layer_norm": "y x! gamma beta h!",
    "rmsnorm": "y x! w h!",
    "rmsnorm_inplace": "x! w",
    "attention": "q:vec4<f32> k:vec4<f32> v:vec4<f32> aux:u32 ctx:vec4<f32>!",
    "rope_kv": "q! k v cos_t sin_t pos:u32 kcache! vcache!",
    "kv_store": "k v pos:u32 kcache! vcache!",
    "gated_act": "g! u",
    "conv_gelu": "x w bias pos out!",
    "pool": "x mask:i32 out!",
    "quantize_act": "x:vec4<f32> xq:u32! x_quant::ActQuant",
    "argmax": "logits ids:i32! generated:i32! pos:u32! count:u32!",
    "stft_power": "audio clip:u32 window cos_t sin_t power!",
    "mel_log": "power filters features!",
    "mel_norm": "features!",
}
"""Each op kernel (shaders/ops/<name>.wgsl) and its bindings in order, declared here once: both its
WGSL declarations and the check of every step's bindings come from this line. ``name`` is an
array<f32> read, ``name:T`` an array<T>, ``name::T`` a T; ``!`` marks one the kernel writes."""


def declarations(bindings: str) -> str:
    """The WGSL declarations of a kernel's bindings (``KERNELS``' notation)."""
    out = []
    for i, spec in enumerate(bindings.split()):
        written = spec.endswith("!")
        name, _, kind = spec.rstrip("!").partition(":")
        kind = kind[1:] if kind.startswith(":") else f"array<{kind or 'f32'}>"
        out.append(f"@group(0) @binding({i}) var<storage, {'read_write' if written else 'read'}> {name}: {kind};\n")
    return "".join(out)


def kernel_source(name: str, head_dim: int) -> str:
    """A kernel as the page compiles it: its bindings declared after the file's opening comment,
    the head size and workgroup filled in."""
    lines = wgsl.read_shader(OPS_SHADERS / f"{name}.wgsl").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if not line.startswith("//"))
    text = "".join(lines[:at]) + declarations(KERNELS[name]) + "".join(lines[at:])
    return text.replace("{HEAD_DIM}", str(head_dim)).replace("{WORKGROUP}", str(WORKGROUP))


def _dispatch(count: int) -> list[int]:
    """One invocation per row or value: the workgroups of WORKGROUP that cover ``count``."""
    return [-(-count // WORKGROUP), 1, 1]


class Lowering:
    """One job's ops to steps. ``plan``: the model's layers with their precision; ``has_bias``:
    whether a layer has a bias tensor (``<layer>.bias``); ``zero``: how its kernels read zero
    points (linear.model_zero); ``per_rows``: kernels keyed by the rows their tile was chosen for
    (several passes of different rows) or by bits alone; ``act_quant``/``act_names``: per plan
    layer, its int8 input's quantization (``.scale``, ``.zero_point``) and the tensor holding it,
    None for float inputs."""

    def __init__(self, plan: Sequence[LayerPrecision], has_bias: Callable[[str], bool], zero: str, *,
                 per_rows: bool = True, act_quant: Sequence[Any] = (), act_names: Sequence[str | None] = ()) -> None:
        self.plan, self.has_bias, self.zero, self.per_rows = plan, has_bias, zero, per_rows
        self.at = {p.layer.name: i for i, p in enumerate(plan)}
        self.act_quant = list(act_quant) or [None] * len(plan)
        self.act_names = list(act_names) or [None] * len(plan)
        self.min_n = min(p.layer.n for p in plan)
        self.programs: set[str] = set()
        self.kernels: set[tuple[int, int, int]] = set()
        """(bits, activation bits, rows) of every linear step."""
        self.dequantized = 0
        """Bytes of the largest layer a prologue dequantizes (the ``wf`` scratch buffer)."""
        self.tensors: dict[str, bytes] = {}
        """Constant tensors the steps bind that are the lowering's own (``ones``)."""
        self.head_dims: set[int] = set()
        self._xq: tuple[str, float, int] | None = None

    # ------------------------------------------------------------------ passes and job options

    def passes(self, graph: ops.Graph) -> dict[str, list[dict[str, Any]]]:
        return {name: self.steps(p) for name, p in graph.passes.items()}

    def steps(self, p: ops.Pass) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        todo = list(p.ops)
        while todo:
            op = todo.pop(0)
            if isinstance(op, ops.Linear):
                out += self.linear(op)
                continue
            self._xq = None  # a non-linear op may have rewritten the quantized input
            fused = todo[0] if todo else None
            if isinstance(op, ops.Embed) and op.token_types:
                if not (isinstance(fused, ops.Norm) and fused.x == fused.out == op.out and not fused.residual):
                    raise ValueError("an embedding with token types is lowered with the layer norm after it")
                out.append(self.embed_ln(op, todo.pop(0)))
            elif isinstance(op, ops.Rope):
                if not (isinstance(fused, ops.KvWrite) and fused.k == op.k):
                    raise ValueError("RoPE is lowered with the cache write of its keys after it")
                out.append(self.rope_kv(op, todo.pop(0)))
            else:
                out += LOWER[type(op)](self, op)
        for step in out:  # every kernel's bindings as declared (KERNELS), before any page loads
            if step["op"] != "linear" and len(step["bindings"]) != len(KERNELS[step["program"]].split()):
                raise ValueError(f"a {step['program']} step binds {len(step['bindings'])} buffers, its kernel "
                                 f"declares {len(KERNELS[step['program']].split())}")
        return out

    def program(self, name: str) -> str:
        self.programs.add(name)
        return name

    def sources(self) -> dict[str, str]:
        """Every kernel the steps use, as the page compiles it (``kernel_source``), and the
        dequantize programs of the layers with a prologue."""
        if len(self.head_dims) > 1:
            raise ValueError(f"one job's attention kernels have one head size, not {sorted(self.head_dims)}")
        head_dim = next(iter(self.head_dims), 0)
        out = {name: kernel_source(name, head_dim) for name in sorted(self.programs)}
        return out | {dequantize_program(b): wgsl.dequantize_source(b, self.zero) for b, a, r in self.kernels
                      if prologue(b, a, self.tiling(r), r)}

    def linear_variants(self) -> dict[str, list[dict[str, Any]]]:
        return {self.kernel_key(b, a, r): variants(b, a, self.tiling(r), r, self.zero)
                for b, a, r in sorted(self.kernels)}

    def tiling(self, rows: int) -> wgsl.Tiling:
        """One tile per rows for every linear layer: the matmul sweep's choice for the rows and the
        narrowest layer (the page compiles one module per kernel)."""
        return wgsl.tiling_for(rows, self.min_n)

    def kernel_key(self, bits: int, act_bits: int, rows: int) -> str:
        """How a step names its linear kernel family in ``linear_variants``: '4', '4a8' (int8
        inputs), '4r1' (keyed by rows)."""
        return f"{bits}" + (f"a{act_bits}" if act_bits != 32 else "") + (f"r{rows}" if self.per_rows else "")

    # ------------------------------------------------------------------ ops

    def linear(self, op: ops.Linear) -> list[dict[str, Any]]:
        index = self.at[op.layer]
        p, act, rows = self.plan[index], self.act_quant[index], op.rows
        name, k, n = p.layer.name, p.layer.k, p.layer.n
        act_bits = 8 if act is not None else 32
        before: list[dict[str, Any]] = []
        if act is not None and self._xq != (op.x, act.scale, act.zero_point):
            before.append({"op": "quantize_act", "program": self.program("quantize_act"),
                           "bindings": [op.x, INT8_INPUT, self.act_names[index]], "constants": {"WORDS": rows * k // 4},
                           "workgroups": _dispatch(rows * k // 4)})
            self._xq = (op.x, act.scale, act.zero_point)
        tiling = self.tiling(rows)
        weights = [f"{name}.w"] + ([f"{name}.scales", f"{name}.zero_points"] if p.bits <= 8 else [])
        dequantize_first = prologue(p.bits, act_bits, tiling, rows)
        bindings: list[str | None] = [INT8_INPUT if act is not None else op.x, op.out,
                                      *([wgsl.DEQUANTIZED] if dequantize_first else weights)]
        bindings += [None] * (BIAS_BINDING - len(bindings)) + [f"{name}.bias" if self.has_bias(name) else ZEROS]
        if act is not None:
            bindings += [None] * (wgsl.ACT_QUANT_BINDING - len(bindings)) + [self.act_names[index]]
        constants: dict[str, Any] = {"M": rows, "K": k, "N": n} | ({"GELU": 1} if op.gelu else {})
        if p.bits <= 8 and not dequantize_first:
            constants |= {"BITS": p.bits, "BLOCK_SIZE": p.block}
        self.kernels.add((p.bits, act_bits, rows))
        step: dict[str, Any] = {"op": "linear", "linear": index, "name": name, "bits": p.bits,
                                "kernel": self.kernel_key(p.bits, act_bits, rows), "weights": weights[0],
                                "bindings": bindings, "constants": constants,
                                "workgroups": [*tiling.workgroups(rows, n), 1]}
        if dequantize_first:
            self.dequantized = max(self.dequantized, n * k * 4)
            step["prologue"] = {"op": "dequantize", "program": dequantize_program(p.bits),
                                "bindings": [*weights, wgsl.DEQUANTIZED],
                                **wgsl.dequantize_dispatch(k, n, p.bits, p.block)}
            step["prologue"]["workgroups"].append(1)
        if op.out == op.x:
            raise ValueError(f"{name} writes its own input")
        return [*before, step]

    def embed_ln(self, op: ops.Embed, norm: ops.Norm) -> dict[str, Any]:
        if op.scale != 1.0 or norm.offset:
            raise ValueError("the fused embedding and layer norm neither scale the embedding nor offset the norm")
        return {"op": "embed_ln", "program": self.program("embed_ln"),
                "bindings": [op.ids, op.token_types, op.table, op.positions, op.type_table, norm.weight, norm.bias,
                             op.out],
                "constants": {"ROWS": op.rows, "SEQ": op.seq, "HIDDEN": op.width, "VOCAB": op.vocab,
                              "TYPE_VOCAB": op.type_vocab, "EPS": norm.eps},
                "workgroups": _dispatch(op.rows)}

    def embed(self, op: ops.Embed) -> list[dict[str, Any]]:
        constants: dict[str, Any] = {"ROWS": op.rows, "HIDDEN": op.width, "VOCAB": op.vocab}
        if op.scale != 1.0:
            constants["SCALE"] = op.scale
        if op.at_pos:
            return [{"op": "embed", "program": self.program("embed_pos"),
                     "bindings": [op.ids, op.table, op.positions, "pos", op.out], "constants": constants,
                     "workgroups": _dispatch(op.rows * op.width)}]
        if op.positions:
            raise ValueError("learned positions by row are lowered with token types (embed_ln)")
        return [{"op": "embed", "program": self.program("embed"), "bindings": [op.ids, op.table, op.out],
                 "constants": constants, "workgroups": _dispatch(op.rows * op.width)}]

    def norm(self, op: ops.Norm) -> list[dict[str, Any]]:
        rows_out = 1 if op.last else op.rows
        offset = {"OFFSET": op.offset} if op.offset else {}
        if op.kind == "rms" and op.x == op.out:
            if op.residual or op.last:
                raise ValueError("an RMS norm in place adds no residual and keeps every row")
            return [{"op": "rmsnorm", "program": self.program("rmsnorm_inplace"), "bindings": [op.x, op.weight],
                     "constants": {"ROWS": op.rows, "HIDDEN": op.width, "EPS": op.eps} | offset,
                     "workgroups": _dispatch(op.rows)}]
        if op.kind == "rms":
            return [{"op": "rmsnorm", "program": self.program("rmsnorm"),
                     "bindings": [op.residual or ZEROS, op.x, op.weight, op.out],
                     "constants": {"ROWS_OUT": rows_out, "ROW0": op.rows - rows_out, "HIDDEN": op.width,
                                   "EPS": op.eps, "ADD": int(bool(op.residual))} | offset,
                     "workgroups": _dispatch(rows_out)}]
        if op.offset:
            raise ValueError("no layer norm kernel scales by (weight + offset)")
        if op.x == op.out and op.residual and not op.last:  # post-norm, in place
            return [{"op": "add_ln", "program": self.program("add_ln"),
                     "bindings": [op.residual, op.x, op.weight, op.bias],
                     "constants": {"ROWS": op.rows, "HIDDEN": op.width, "EPS": op.eps},
                     "workgroups": _dispatch(op.rows)}]
        return [{"op": "layer_norm", "program": self.program("layer_norm"),
                 "bindings": [op.residual or ZEROS, op.x, op.weight, op.bias, op.out],
                 "constants": {"ROWS": op.rows, "ROWS_OUT": rows_out, "ROW0": op.rows - rows_out, "HIDDEN": op.width,
                               "EPS": op.eps, "ADD": int(bool(op.residual))},
                 "workgroups": _dispatch(op.rows)}]

    def rope_kv(self, op: ops.Rope, write: ops.KvWrite) -> dict[str, Any]:
        return {"op": "rope_kv", "program": self.program("rope_kv"),
                "bindings": [op.q, op.k, write.v, op.cos, op.sin, "pos", write.cache_k, write.cache_v],
                "constants": {"ROWS": op.rows, "HEADS": op.heads, "KV_HEADS": op.kv_heads},
                "workgroups": _dispatch(op.rows * (op.heads + op.kv_heads))}

    def kv_write(self, op: ops.KvWrite) -> list[dict[str, Any]]:
        return [{"op": "kv_store", "program": self.program("kv_store"),
                 "bindings": [op.k, op.v, "pos", op.cache_k, op.cache_v],
                 "constants": {"ROWS": op.rows, "WIDTH": op.width}, "workgroups": _dispatch(op.rows * op.width)}]

    def attention(self, op: ops.Attention) -> list[dict[str, Any]]:
        """One kernel for the three sources; its fourth binding (aux) is the padding mask (self;
        ``ones`` for none) or the position (cache; bound but unread for cross)."""
        self.head_dims.add(op.width // op.heads)
        constants = {"ROWS": op.rows, "HEADS": op.heads, "KV_HEADS": op.kv_heads,
                     "SOURCE": ops.ATTENTION_SOURCES.index(op.source)} | ({"WINDOW": op.window} if op.window else {})
        aux = "pos"
        if op.source == "self":
            aux, constants["SEQ"] = op.mask or ONES, op.seq
            if not op.mask:
                self.tensors[ONES] = np.ones(op.rows, "<i4").tobytes()
        elif op.source == "cross":
            constants["KEYS"] = op.keys
        return [{"op": "attention", "program": self.program("attention"), "bindings": [op.q, op.k, op.v, aux, op.out],
                 "constants": constants, "workgroups": _dispatch(op.rows * op.heads)}]

    def gated_act(self, op: ops.GatedAct) -> list[dict[str, Any]]:
        act = GATED_ACTS.index(op.act)
        return [{"op": "gated_act", "program": self.program("gated_act"), "bindings": [op.gate, op.x],
                 "constants": {"COUNT": op.count} | ({"ACT": act} if act else {}), "workgroups": _dispatch(op.count)}]

    def conv1d(self, op: ops.Conv1d) -> list[dict[str, Any]]:
        return [{"op": "conv", "program": self.program("conv_gelu"),
                 "bindings": [op.x, op.weight, op.bias, op.positions or ZEROS, op.out],
                 "constants": {"FRAMES_IN": op.frames_in, "FRAMES_OUT": op.frames_out, "IN": op.channels_in,
                               "OUT": op.channels_out, "STRIDE": op.stride, "IN_TIME_MAJOR": int(op.time_major_in),
                               "ADD_POS": int(bool(op.positions))},
                 "workgroups": _dispatch(op.frames_out * op.channels_out)}]

    def pool(self, op: ops.Pool) -> list[dict[str, Any]]:
        return [{"op": "pool", "program": self.program("pool"), "bindings": [op.x, op.mask, op.out],
                 "constants": {"SEQ": op.seq, "HIDDEN": op.width}, "workgroups": [op.batch, 1, 1]}]

    def argmax(self, op: ops.Argmax) -> list[dict[str, Any]]:
        bindings = [op.logits, "ids", "generated", "pos", "count"]
        constants = {"VOCAB": op.vocab, "ROWS": op.rows}
        if op.suppress >= 0:
            constants["SUPPRESS"] = op.suppress
        if op.suppress_from >= 0:
            constants["SUPPRESS_FROM"] = op.suppress_from
        constants |= dict(zip(("BEGIN_A", "BEGIN_B"), op.begin, strict=False))
        return [{"op": "argmax", "program": self.program("argmax"), "bindings": bindings, "constants": constants,
                 "workgroups": [1, 1, 1]}]

    def log_mel(self, op: ops.LogMel) -> list[dict[str, Any]]:
        bins = op.n_fft // 2 + 1
        return [
            {"op": "stft_power", "program": self.program("stft_power"),
             "bindings": [op.audio, op.clip, "frontend.window", "frontend.cos", "frontend.sin", POWER],
             "constants": {"FRAMES": op.frames, "TOTAL": op.samples}, "workgroups": _dispatch(op.frames * bins)},
            {"op": "mel_log", "program": self.program("mel_log"), "bindings": [POWER, "frontend.mel_filters", op.out],
             "constants": {"FRAMES": op.frames, "MELS": op.mels}, "workgroups": _dispatch(op.frames * op.mels)},
            {"op": "mel_norm", "program": self.program("mel_norm"), "bindings": [op.out],
             "constants": {"COUNT": op.frames * op.mels}, "workgroups": [1, 1, 1]},
        ]


LOWER: dict[type, Callable[[Lowering, Any], list[dict[str, Any]]]] = {
    ops.Embed: Lowering.embed, ops.Norm: Lowering.norm, ops.KvWrite: Lowering.kv_write,
    ops.Attention: Lowering.attention, ops.GatedAct: Lowering.gated_act, ops.Conv1d: Lowering.conv1d,
    ops.Pool: Lowering.pool, ops.Argmax: Lowering.argmax, ops.LogMel: Lowering.log_mel,
}
"""Op type -> its lowering (Linear, and the ops fused with the next one, are in ``steps``)."""

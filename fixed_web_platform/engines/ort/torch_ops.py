"""Ops (architectures/ops.py) as PyTorch, for ONNX Runtime's exports: one pass of an
architecture's graph run op by op on the model's own torch module (its linear layers, norms,
embeddings and convolutions called by name, so the exported graph holds the module's
initializers, which onnx_linears.py then rewrites to the run's bytes).

Values are torch tensors named as the ops name them, batch first: a row stream is [batch, rows,
width], a cache [batch, heads, positions, head_dim], features [batch, channels, frames] (a
convolution's output is time-major, [batch, frames, channels], as the op says). Sizes come
from the tensors, not from the ops, so an export keeps free dimensions. What an engine adds
to a pass is named here too:

- ``position_ids`` (int [1, rows]): the rows' positions (an ``at_pos`` embedding, RoPE);
- ``attention_bias`` (float [1, 1, rows, past + rows]): added to a ``cache`` attention's scores;
- a cache ``<name>`` enters as the past rows; a ``KvWrite`` appends the new rows and leaves
  ``<name>.present``, the cache with the oldest rows dropped (the past's shape: the ORT pages'
  fixed-length, right-aligned cache);
- ``logit_rows`` (int [rows]): the rows a ``last`` norm keeps (its last row without it);
- ``suppress`` (float [vocab]): added to the last row's logits before the argmax, which leaves
  ``next_id`` (int32 [1, 1]) and ``last_logits`` ([1, vocab]): a constant for an argmax's one
  suppressed id (``pass_module``), an input where the rule moves with the position (Whisper's
  ``suppress_from`` and ``begin``: the page passes each step's).

The float64 references stay independent (architectures/<name>/reference.py), and the
transformers module itself is the fp32 reference, so a lowering error here shows as error
against both."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...architectures import ops

SUPPORTS = ops.BASE_NEEDS - {"LogMel"}
"""What ``run_pass`` runs (architectures/ops.py ``needs``; the plan refuses a run whose graph needs
more): every op but the log-mel front end, whose features ORT's speech page is given."""

Env = dict[str, Any]
HEADS = ":heads"
"""A value held as [batch, heads, rows, head_dim] (RoPE's q and k, as transformers holds them):
``<name>:heads``, while ``<name>`` itself is gone until an op writes it again."""
MODULE = "m"
"""The pass module's attribute holding the model's module: its initializers' name prefix."""


def caches(p: ops.Pass) -> list[str]:
    """The KV caches pass ``p`` writes, in order (a layer's keys, then its values)."""
    return [name for op in p.ops if isinstance(op, ops.KvWrite) for name in (op.cache_k, op.cache_v)]


def crosses(p: ops.Pass) -> list[str]:
    """The cross-attention keys and values pass ``p`` reads, in order."""
    return [name for op in p.ops if isinstance(op, ops.Attention) and op.source == "cross" for name in (op.k, op.v)]


def present(cache: str) -> str:
    """The value a ``KvWrite`` leaves: the cache with the new rows in and the oldest dropped."""
    return f"{cache}.present"


def _heads(x: Any, head_dim: int) -> Any:
    """[b, s, heads * head_dim] -> [b, heads, s, head_dim]."""
    return x.unflatten(-1, (-1, head_dim)).transpose(1, 2)


def _rows(x: Any) -> Any:
    """[b, heads, s, head_dim] -> [b, s, heads * head_dim]."""
    return x.transpose(1, 2).flatten(2)


def _attend(q: Any, k: Any, v: Any, bias: Any, head_dim: int) -> Any:
    import torch

    groups = q.shape[1] // k.shape[1]
    if groups > 1:  # grouped-query: each key/value head serves `groups` query heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) * (head_dim ** -0.5)
    if bias is not None:
        scores = scores + bias
    return _rows(torch.matmul(torch.softmax(scores, dim=-1), v))


def _windowed(bias: Any, window: int) -> Any:
    """A cache attention's ``bias`` [b, 1, rows, total] with keys more than ``window`` - 1 slots
    before their row's own masked out: the cache's slots are consecutive positions (right-aligned
    or growing, the new rows last), so a slot's distance is a position's."""
    import torch

    rows, total = bias.shape[-2], bias.shape[-1]
    near = torch.arange(total)[None, :] > torch.arange(total - rows, total)[:, None] - window
    return torch.where(near, bias, torch.finfo(torch.float32).min)


def _padding_bias(mask: Any) -> Any:
    """[b, keys] of 1/0 -> [b, 1, 1, keys] of 0 / float32's lowest (a padded key's score)."""
    import torch

    return (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min


def _rotate(x: Any, cos: Any, sin: Any) -> Any:
    """RoPE on [b, heads, s, head_dim], pairs (i, i + head_dim / 2) as transformers' rotate_half."""
    import torch

    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _norm(x: Any, op: ops.Norm, norm: Any) -> Any:
    """The model's own norm module on x; with an offset, RMS-normed here with (weight + offset)."""
    import torch

    if not op.offset:
        return norm(x)
    if op.kind != "rms":
        raise ValueError("a norm's offset is lowered for RMS norms only")
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + op.eps) * (norm.weight + op.offset)


def _gelu_tanh(x: Any) -> Any:
    import torch

    return torch.nn.functional.gelu(x, approximate="tanh")


def _silu(x: Any) -> Any:
    import torch

    return torch.nn.functional.silu(x)


_GATES: dict[str, Callable[[Any], Any]] = {"silu": _silu, "gelu_tanh": _gelu_tanh}


def run_pass(net: Any, p: ops.Pass, env: Env, head_dim: int) -> Env:
    """Run ``p``'s ops on ``env`` (see the module doc for the values an engine adds)."""
    import torch

    def module(name: str) -> Any:
        return net.get_submodule(name.removesuffix(".weight"))

    def heads(name: str) -> Any:  # a value as [b, heads, s, head_dim]; RoPE leaves q and k so
        return _heads(env[name], head_dim) if name in env else env[name + HEADS]

    for op in p.ops:
        if isinstance(op, ops.Embed):
            table = module(op.table)  # a scaled embedding's own module scales too: the table's rows
            x = table(env[op.ids]) if op.scale == 1 else torch.nn.functional.embedding(env[op.ids], table.weight) * op.scale
            if op.type_table:
                x = x + module(op.type_table)(env[op.token_types])
            if op.at_pos:
                x = x + module(op.positions).weight.index_select(0, env["position_ids"][0])[None]
            elif op.positions:
                x = x + module(op.positions).weight[: x.shape[1]][None]
            env[op.out] = x
        elif isinstance(op, ops.Norm):
            x = env[op.x] + env[op.residual] if op.residual else env[op.x]
            env[op.x] = x
            if op.last:
                x = x.index_select(1, env["logit_rows"]) if "logit_rows" in env else x[:, -1:, :]
            if op.width != x.shape[-1]:  # per head: [.., heads * width] normed as [.., heads, width]
                env[op.out] = _norm(x.unflatten(-1, (-1, op.width)), op, module(op.weight)).flatten(-2)
            else:
                env[op.out] = _norm(x, op, module(op.weight))
        elif isinstance(op, ops.Linear):
            y = module(op.layer)(env[op.x])
            env[op.out] = torch.nn.functional.gelu(y) if op.gelu else y
        elif isinstance(op, ops.Rope):
            at = env["position_ids"][0]
            cos, sin = (torch.cat((env[t], env[t]), dim=-1).index_select(0, at)[None, None] for t in (op.cos, op.sin))
            for name in (op.q, op.k):
                env[name + HEADS] = _rotate(heads(name), cos, sin)
                del env[name]
        elif isinstance(op, ops.KvWrite):
            for new, cache in ((op.k, op.cache_k), (op.v, op.cache_v)):
                rows = heads(new)
                env[cache] = torch.cat([env[cache], rows], dim=2)
                env[present(cache)] = env[cache][:, :, rows.shape[2]:, :]
        elif isinstance(op, ops.Attention):
            q = heads(op.q)
            if op.source == "cache":
                bias = _windowed(env["attention_bias"], op.window) if op.window else env["attention_bias"]
                env[op.out] = _attend(q, env[op.k], env[op.v], bias, head_dim)
            else:
                bias = _padding_bias(env[op.mask]) if op.mask else None
                env[op.out] = _attend(q, heads(op.k), heads(op.v), bias, head_dim)
        elif isinstance(op, ops.GatedAct):
            env[op.gate] = _GATES[op.act](env[op.gate]) * env[op.x]
        elif isinstance(op, ops.Conv1d):
            x = env[op.x].transpose(1, 2) if op.time_major_in else env[op.x]
            y = torch.nn.functional.gelu(module(op.weight)(x)).transpose(1, 2)
            env[op.out] = y + module(op.positions).weight[: y.shape[1]][None] if op.positions else y
        elif isinstance(op, ops.Pool):
            mask = env[op.mask].unsqueeze(-1).to(env[op.x].dtype)
            pooled = (env[op.x] * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
            env[op.out] = torch.nn.functional.normalize(pooled, p=2.0, dim=-1, eps=1e-12)
        elif isinstance(op, ops.Argmax):
            env["last_logits"] = env[op.logits][:, -1, :]
            scores = env["last_logits"] + env["suppress"] if "suppress" in env else env["last_logits"]
            env["next_id"] = torch.argmax(scores, dim=-1, keepdim=True).to(torch.int32)
        else:
            raise ValueError(f"no ORT lowering of op {type(op).__name__}")
    return env


def pass_module(net: Any, p: ops.Pass, head_dim: int, inputs: Sequence[str], outputs: Sequence[str],
                constants: Mapping[str, np.ndarray] | None = None, feed: Callable[[Env], None] | None = None) -> Any:
    """A torch module to export: ``forward(*tensors)`` names its arguments ``inputs``, adds
    ``constants`` (held as buffers; ``suppress`` too if the pass's argmax has an id it never
    picks) and what ``feed`` derives from them, runs pass ``p`` on ``net`` and returns the values
    named ``outputs``."""
    import torch

    names = dict(constants or {})
    argmax = [op for op in p.ops if isinstance(op, ops.Argmax) and op.suppress >= 0]
    if argmax:  # an id never chosen: -inf added to its logit
        names["suppress"] = np.where(np.arange(argmax[0].vocab) == argmax[0].suppress, -np.inf, 0).astype(np.float32)

    class Pass(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            setattr(self, MODULE, net)
            for i, value in enumerate(names.values()):
                self.register_buffer(f"constant{i}", torch.from_numpy(np.ascontiguousarray(value)))

        def forward(self, *tensors: Any) -> tuple[Any, ...]:
            env: Env = dict(zip(inputs, tensors))
            env.update({name: getattr(self, f"constant{i}") for i, name in enumerate(names)})
            if feed is not None:
                feed(env)
            env = run_pass(getattr(self, MODULE), p, env, head_dim)
            return tuple(env[name] for name in outputs)

    return Pass().eval()

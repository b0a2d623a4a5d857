"""Ops (architectures/ops.py) as PyTorch for ONNX Runtime's exports: one pass of an architecture's
graph run op by op on the model's own torch module (its linear layers and norms called by name,
so the exported graph holds the same nodes and initializers as the module's), with the ORT
pages' cache: fixed-length and right-aligned (``past.N.key/value`` in, ``present.N.*`` out, the
oldest rows dropped), rows masked by an ``attention_bias`` input, positions by ``position_ids``.

Today it runs Whisper's decoder step (onnx_speech.py). BERT's forward (onnx_encoder.py), Llama's
passes (onnx_decoder.py) and Whisper's encoder still export transformers' modules as they are: an
op this module lacks raises, so each moves here once its ops are written and its export checked
against the module's (the same nodes and initializer values, bitwise the same outputs in ORT)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...architectures import ops


def pass_module(net: Any, p: ops.Pass, heads: int, head_dim: int, caches: Sequence[str]) -> Any:
    """A torch module running pass ``p`` on ``net`` (the architecture's torch module, whose
    submodules are named as the graph's layers and norm weights): inputs ``input_ids``,
    ``position_ids``, ``attention_bias``, ``suppress``, the cross keys and values, the past
    caches (in the order of ``caches``); outputs the last row's logits, ``next_id`` and the
    present caches."""
    import torch

    def split(x: Any) -> Any:  # [1, s, d] -> [1, heads, s, hd]
        return x.reshape(1, x.shape[1], heads, head_dim).transpose(1, 2)

    def attend(q: Any, k: Any, v: Any, bias: Any = None) -> Any:
        scores = q @ k.transpose(-1, -2) * (head_dim ** -0.5)
        if bias is not None:
            scores = scores + bias
        ctx = torch.softmax(scores, dim=-1) @ v
        return ctx.transpose(1, 2).reshape(1, q.shape[2], heads * head_dim)

    def module_of(name: str) -> Any:
        return net.get_submodule(name.removesuffix(".weight"))

    class Pass(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = net

        def forward(self, input_ids: Any, position_ids: Any, attention_bias: Any, suppress: Any,
                    cross: tuple[Any, ...], past: tuple[Any, ...]) -> tuple[Any, ...]:
            env: dict[str, Any] = {}
            present: dict[str, Any] = {}
            rows = input_ids.shape[1]
            pasts = dict(zip(caches, past))
            cross_values = dict(zip([f"cross.{i}.{part}" for i in range(len(cross) // 2) for part in ("k", "v")],
                                    cross))
            logits = next_id = None
            for op in p.ops:
                if isinstance(op, ops.Embed):
                    table = module_of(op.positions).weight if op.positions else None
                    x = module_of(op.table)(input_ids)
                    env[op.out] = x + table.index_select(0, position_ids[0])[None] if op.at_pos else x
                elif isinstance(op, ops.Norm):
                    x = env[op.x] + env[op.residual] if op.residual else env[op.x]
                    env[op.x] = x
                    env[op.out] = module_of(op.weight)(x[:, -1:, :] if op.last else x)
                elif isinstance(op, ops.Linear):
                    y = module_of(op.layer)(env[op.x])
                    env[op.out] = torch.nn.functional.gelu(y) if op.gelu else y
                elif isinstance(op, ops.KvWrite):
                    for new, cache in ((op.k, op.cache_k), (op.v, op.cache_v)):
                        full = torch.cat([pasts[cache], split(env[new])], dim=2)
                        env[cache] = full
                        present[cache] = full[:, :, rows:, :]
                elif isinstance(op, ops.Attention):
                    if op.source == "cache":
                        env[op.out] = attend(split(env[op.q]), env[op.k], env[op.v], attention_bias)
                    else:
                        env[op.out] = attend(split(env[op.q]), split(cross_values[op.k]), split(cross_values[op.v]))
                elif isinstance(op, ops.Argmax):
                    logits = env[op.logits][:, 0, :]  # 3-d through the head: a MatMul, not a Gemm
                    next_id = torch.argmax(logits + suppress, dim=-1, keepdim=True).to(torch.int32)
                else:
                    raise ValueError(f"no ORT lowering of op {type(op).__name__} here yet")
            return (logits, next_id, *(present[c] for c in caches))

    return Pass().eval()

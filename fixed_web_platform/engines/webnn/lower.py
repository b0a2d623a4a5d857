"""Ops (architectures/ops.py) lowered for the harness's WebNN pages: a pass as the list of ops the
page's interpreter (web/engines/webnn_ops.js) turns into graph-builder calls, one place that
knows how WebNN writes each op for every architecture. An op travels as its fields plus ``op``
(its type's name); a linear layer is named by its index in the job's ``linears`` (the plan's
order), which the page's linear-layer builder (webnn_graph.js) takes.

The engine's own ops, added here:

- ``AttentionConstants``: the additive padding mask and 1 / sqrt(head size) of masked
  self-attention (an encoder), built before the pass's first linear layer;
- ``Positions``: a pass over a KV cache reads where it is: from position 0 (a causal mask
  constant, the first rows of each RoPE table) or, writing one row, at the ``position`` input
  (with the row's ``mask`` over the cache and its one-hot ``slot``, inputs too); a sliding
  window's mask is the page's, from the same position;
- ``Input`` and ``Output``: the graph's inputs and outputs by name, and the value each is;
- ``Add``: a residual add where a pass is split into graphs (the next graph's norm would have
  done it).

A loop's pass (``loop_pass``) says what happens to its cache: ``pad`` (rows from position 0, the
caches kept padded to the context), ``write`` (one row written at the position) or '' (the cache
is not kept: a scoring pass). WebNN graphs have static shapes, so the cache a row attends over is
the whole context when writing and the pass's own rows otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ...architectures import ops

SUPPORTS = ops.BASE_NEEDS - {"LogMel"}
"""What the WebNN pages build (architectures/ops.py ``needs``; the plan refuses a run whose graph
needs more): every op but the log-mel front end, whose features the speech page is given."""

CACHE_MODES = ("", "pad", "write")
CACHE = "cache."
"""Cache values are named ``cache.<slot>`` (architectures/ops.py); the graph's inputs and outputs
``past.<slot>`` and ``present.<slot>``."""


def lowered(p: ops.Pass, layers: Sequence[str]) -> list[dict[str, Any]]:
    """The pass's ops for the page; ``layers``: the job's linear layers, in the order of ``linears``."""
    index = {name: i for i, name in enumerate(layers)}
    out: list[dict[str, Any]] = []
    masked = [op for op in p.ops if isinstance(op, ops.Attention) and op.source == "self" and op.mask]
    for op in p.ops:
        doc: dict[str, Any] = {"op": type(op).__name__, **dataclasses.asdict(op)}
        if isinstance(op, ops.Linear):
            if masked and not any(d["op"] == "AttentionConstants" for d in out):
                first = masked[0]
                out.append({"op": "AttentionConstants", "mask": first.mask, "seq": first.seq,
                            "head_dim": first.width // first.heads})
            doc["layer"] = index[op.layer]
        out.append(doc)
    return out


def loop_pass(p: ops.Pass, layers: Sequence[str], *, cache: str, context: int = 0,
              outputs: Mapping[str, str] | None = None, split_heads: Mapping[str, int] | None = None,
              argmax_bias: str = "", probe: str = "", cuts: Sequence[int] = ()) -> list[list[dict[str, Any]]]:
    """A pass of a generate or transcribe loop as one op list per graph: the pass split before
    each layer ``cuts`` names (layer numbers; ``p.layer_bounds`` says where each starts), the
    graphs chained through ``hidden``.
    ``outputs``: graph output name -> value (an argmax's id is always ``id``); those in
    ``split_heads`` leave as [heads, rows, head size] with the heads given; ``argmax_bias``: the
    tensor added to the logits before the argmax (Whisper's suppress rules); ``probe``: a value
    whose first element is the output ``probe`` (one number to read back, that the pass is done)."""
    if cache not in CACHE_MODES:
        raise ValueError(f"cache mode {cache!r} is not one of {CACHE_MODES}")
    attentions = [op for op in p.ops if isinstance(op, ops.Attention)]
    readers = {op.k: op for op in attentions}
    rows = p.rows
    body: list[dict[str, Any]] = []
    made: set[str] = set()
    for op, doc in zip(p.ops, lowered(p, layers)):
        if isinstance(op, ops.Embed):
            body.append(_input("ids", op.ids, "int32", [rows]))
            doc["at_position"] = cache == "write"
        elif isinstance(op, ops.Conv1d) and op.x not in made:
            body.append(_input(op.x, op.x, "float32", [1, op.channels_in, 1, op.frames_in]))
        elif isinstance(op, ops.Rope):
            doc["head_dim"] = next(a.width // a.heads for a in attentions if a.q == op.q)
        elif isinstance(op, ops.KvWrite):
            slots = [name.removeprefix(CACHE) for name in (op.cache_k, op.cache_v)]
            doc |= {"cache": cache, "context": context, "kv_heads": readers[op.cache_k].kv_heads,
                    "past": [f"past.{s}" for s in slots], "present": [f"present.{s}" for s in slots]}
        elif isinstance(op, ops.Attention):
            if op.source == "cross":
                shape = [op.kv_heads, op.keys, op.width // op.heads]
                body += [_input(name, name, "float32", shape) for name in (op.k, op.v)]
            doc["keys"] = (context if cache == "write" else rows) if op.source == "cache" else op.keys or rows
        elif isinstance(op, ops.Argmax):
            doc["bias"] = argmax_bias
        made.add(getattr(op, "out", ""))
        body.append(doc)
    head: list[dict[str, Any]] = []
    if any(isinstance(op, ops.KvWrite) or isinstance(op, ops.Embed) and op.at_pos for op in p.ops):
        ropes = {(d["cos"], d["sin"]): d["head_dim"] // 2 for d in body if d["op"] == "Rope"}
        head.append({"op": "Positions", "cache": cache, "rows": rows, "context": context,
                     "ropes": [{"cos": cos, "sin": sin, "half": half} for (cos, sin), half in ropes.items()]})
    named = dict(outputs or {})
    if any(isinstance(op, ops.Argmax) for op in p.ops):
        named["id"] = "next_id"
    tail = [_output(name, value, (split_heads or {}).get(name, 0)) for name, value in named.items()]
    if probe:
        tail.append(_output("probe", probe, first=True))
    return [head + part for part in _split(body, p, cuts, tail)]


def _input(name: str, value: str, dtype: str, shape: list[int]) -> dict[str, Any]:
    return {"op": "Input", "name": name, "value": value, "dtype": dtype, "shape": shape}


def _output(name: str, value: str, heads: int = 0, first: bool = False) -> dict[str, Any]:
    return {"op": "Output", "name": name, "value": value, "heads": heads, "first": first}


def _split(body: list[dict[str, Any]], p: ops.Pass, cuts: Sequence[int],
           tail: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The body cut before each layer in ``cuts``: a graph ends with the cut norm's residual add
    and hands the stream on as ``hidden``; the next begins with it as an input. ``tail``: the
    last graph's outputs."""
    parts, start = [], 0
    for cut in cuts:
        first = p.ops[p.layer_bounds[cut]] if 0 < cut < len(p.layer_bounds) - 1 else None
        if not isinstance(first, ops.Norm):
            raise ValueError(f"pass {p.name} can be split only before a layer that starts with a norm")
        at = next(i for i, d in enumerate(body) if d["op"] == "Norm" and d["weight"] == first.weight)
        part = body[start:at]
        if first.residual:
            part.append({"op": "Add", "x": first.x, "residual": first.residual})
        parts.append(part + [_output("hidden", first.x)])
        body[at] = body[at] | {"residual": ""}
        body.insert(at, _input("hidden", first.x, "float32", [first.rows, first.width]))
        start = at
    parts.append(body[start:] + tail)
    return parts

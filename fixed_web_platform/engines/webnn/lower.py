"""Ops (architectures/ops.py) lowered for the harness's WebNN pages: a pass as the list of ops the
page's interpreter (web/engines/webnn_ops.js) turns into graph-builder calls, one place that
knows how WebNN writes each op for every architecture. An op travels as its fields plus ``op``
(its type's name); a linear layer is named by its index in the job's ``linears`` (the plan's
order), which the page's linear-layer builder (webnn_graph.js) takes. The order of builder calls
is the order of the ops, so a backend sees the patterns it fuses (engines/webnn/forms.py) where it
saw them before; the one op of the engine's own, ``AttentionConstants`` (the additive padding
mask and 1 / sqrt(head size)), is built before the pass's first linear layer."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...architectures import ops


def lowered(p: ops.Pass, layers: Sequence[str]) -> list[dict[str, Any]]:
    """The pass's ops for the page; ``layers``: the job's linear layers, in the order of ``linears``."""
    index = {name: i for i, name in enumerate(layers)}
    out: list[dict[str, Any]] = []
    attentions = [op for op in p.ops if isinstance(op, ops.Attention)]
    for op in p.ops:
        doc: dict[str, Any] = {"op": type(op).__name__, **dataclasses.asdict(op)}
        if isinstance(op, ops.Linear):
            if attentions and not any(d["op"] == "AttentionConstants" for d in out):
                first = attentions[0]
                out.append({"op": "AttentionConstants", "mask": first.mask, "seq": first.seq,
                            "head_dim": first.width // first.heads})
            doc["layer"] = index[op.layer]
        out.append(doc)
    return out

"""The ops a forward pass is written in: once per architecture (architectures/<name>/graph.py),
lowered by each engine (engines/wgsl/lower.py: to the WGSL kernels' steps).

A pass is a list of ops over named values, the buffers an engine holds (``hidden``, ``q``,
``cache.0.k``); an op reads and writes values by name, and some update one in place, as the
kernels do (a norm's residual is added into its input, a gated activation writes into its gate).
Shapes are resolved when the graph is built: every op carries the sizes its kernels need. A
linear layer is named as in the precision plan (``ArchConfig.linear_layers``): its shape, bits
and bytes come from there. Loop state has fixed names: ``pos`` (the position the KV cache has
reached), ``ids`` (the pass's input ids, the next id after an argmax), ``generated``, ``count``.
The float64 references (architectures/<name>/reference.py) are written by hand, independent of
these graphs, so an error here shows as kernel error.

What a graph asks of a lowering is named (``needs``): each op's name, and for each of its
``choices`` (fields naming a computation) ``Op.field=value``, for each of its ``options`` (fields
that add a computation when set) ``Op.field``. Each engine's lowering declares the names it
lowers (``SUPPORTS``), and the plan refuses a run whose graph needs one it lacks, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

NORM_KINDS = ("layer", "rms")
ATTENTION_SOURCES = ("self", "cache", "cross")


@dataclass(frozen=True)
class Embed:
    """out[r] = table[ids[r]] * scale (+ positions[r % seq], or positions[pos + r] with ``at_pos``)
    (+ type_table[token_types[r]])."""

    options: ClassVar[tuple[str, ...]] = ("positions", "at_pos", "token_types", "scale")

    ids: str
    table: str
    out: str
    rows: int
    width: int
    vocab: int
    positions: str = ""
    at_pos: bool = False
    seq: int = 0
    token_types: str = ""
    type_table: str = ""
    type_vocab: int = 0
    scale: float = 1.0


@dataclass(frozen=True)
class Norm:
    """x += residual (x keeps the sum), then out = norm(x) * (weight + offset) (+ bias), over each
    ``width`` values of x's ``rows`` rows (a value of several heads is normed per head: rows x
    heads rows of the head's width); ``last``: only the last row is written (to out's first row).
    ``out`` may be ``x`` (normed in place)."""

    choices: ClassVar[tuple[str, ...]] = ("kind",)
    options: ClassVar[tuple[str, ...]] = ("bias", "residual", "last", "offset")

    kind: str
    x: str
    out: str
    weight: str
    rows: int
    width: int
    eps: float
    bias: str = ""
    residual: str = ""
    last: bool = False
    offset: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in NORM_KINDS:
            raise ValueError(f"norm kind {self.kind!r} is not one of {NORM_KINDS}")


@dataclass(frozen=True)
class Linear:
    """out = x @ W^T + b of the plan's layer ``layer`` over ``rows`` rows; ``gelu``: exact-erf GELU
    on the result (the epilogue)."""

    options: ClassVar[tuple[str, ...]] = ("gelu",)

    layer: str
    x: str
    out: str
    rows: int
    gelu: bool = False


@dataclass(frozen=True)
class Rope:
    """q and k rotated in place at positions pos .. pos + rows - 1 (cos, sin: [positions, head_dim / 2])."""

    q: str
    k: str
    cos: str
    sin: str
    rows: int
    heads: int
    kv_heads: int


@dataclass(frozen=True)
class KvWrite:
    """The rows' keys and values stored at positions pos .. pos + rows - 1 of a layer's cache."""

    k: str
    v: str
    cache_k: str
    cache_v: str
    rows: int
    width: int


@dataclass(frozen=True)
class Attention:
    """out = softmax(q k^T / sqrt(head_dim) + mask) v per head. ``source``: ``self`` (k and v of
    the same rows, which are sequences of ``seq``; ``mask`` a padding mask, '' for none),
    ``cache`` (causal over the cache up to pos + row; with a ``window``, only its last ``window``
    positions), ``cross`` (all ``keys`` rows of k and v)."""

    choices: ClassVar[tuple[str, ...]] = ("source",)
    options: ClassVar[tuple[str, ...]] = ("mask", "window")

    source: str
    q: str
    k: str
    v: str
    out: str
    rows: int
    heads: int
    kv_heads: int
    width: int
    mask: str = ""
    seq: int = 0
    keys: int = 0
    window: int = 0

    def __post_init__(self) -> None:
        if self.source not in ATTENTION_SOURCES:
            raise ValueError(f"attention source {self.source!r} is not one of {ATTENTION_SOURCES}")


@dataclass(frozen=True)
class GatedAct:
    """gate = act(gate) * x, in place (``count`` values); act is ``silu`` or ``gelu_tanh`` (GELU's
    tanh approximation)."""

    choices: ClassVar[tuple[str, ...]] = ("act",)

    gate: str
    x: str
    count: int
    act: str = "silu"


@dataclass(frozen=True)
class Conv1d:
    """out = gelu(conv1d(x, weight, kernel 3, padding 1, ``stride``) + bias) (+ positions), time-major
    out [frames_out, channels_out]; x is channel-major unless ``time_major_in``."""

    options: ClassVar[tuple[str, ...]] = ("positions", "time_major_in")

    x: str
    weight: str
    bias: str
    out: str
    frames_in: int
    frames_out: int
    channels_in: int
    channels_out: int
    stride: int = 1
    positions: str = ""
    time_major_in: bool = False


@dataclass(frozen=True)
class Pool:
    """out[b] = L2-normalised mean of x's rows of sequence b where ``mask`` is 1."""

    x: str
    mask: str
    out: str
    batch: int
    seq: int
    width: int


@dataclass(frozen=True)
class Argmax:
    """The greedy next id from the last row's logits into ``ids``, appended to ``generated``;
    ``pos`` advances by the pass's rows. ``suppress``: one id never chosen (-1: none);
    ``suppress_from``/``begin``: Whisper's rule (no id from suppress_from on; ``begin`` ids
    never first)."""

    options: ClassVar[tuple[str, ...]] = ("suppress_from", "begin")

    logits: str
    rows: int
    vocab: int
    suppress: int = -1
    suppress_from: int = -1
    begin: tuple[int, ...] = ()


@dataclass(frozen=True)
class LogMel:
    """A clip's PCM (``audio`` at the offset ``clip`` names) to ``mels`` x ``frames`` log-mel features."""

    audio: str
    clip: str
    out: str
    frames: int
    mels: int
    samples: int
    n_fft: int


Op = Embed | Norm | Linear | Rope | KvWrite | Attention | GatedAct | Conv1d | Pool | Argmax | LogMel

BASE_NEEDS = frozenset({
    "Embed", "Embed.positions", "Embed.at_pos", "Embed.token_types", "Embed.scale",
    "Norm", "Norm.kind=layer", "Norm.kind=rms", "Norm.bias", "Norm.residual", "Norm.last", "Norm.offset",
    "Linear", "Linear.gelu",
    "Rope", "KvWrite",
    "Attention", "Attention.source=self", "Attention.source=cache", "Attention.source=cross", "Attention.mask",
    "Attention.window",
    "GatedAct", "GatedAct.act=silu", "GatedAct.act=gelu_tanh",
    "Conv1d", "Conv1d.positions", "Conv1d.time_major_in",
    "Pool",
    "Argmax", "Argmax.suppress_from", "Argmax.begin",
    "LogMel",
})
"""Every op and op parameter the built-in architectures' graphs (BERT, Llama, Gemma 3, Whisper) ask,
which every engine's lowering runs but where its ``SUPPORTS`` says otherwise (this, less what one
lacks, plus what one adds)."""


def needs(op: Op) -> list[str]:
    """What ``op`` asks of a lowering (the module doc): its name, each choice's value, each option set."""
    name = type(op).__name__
    defaults = {f.name: f.default for f in fields(op)}
    optional = [f for f in getattr(op, "options", ()) if getattr(op, f) != defaults[f]]
    return ([name] + [f"{name}.{f}={getattr(op, f)}" for f in getattr(op, "choices", ())]
            + [f"{name}.{f}" for f in optional])




@dataclass(frozen=True)
class Pass:
    """One forward pass of a loop (``forward``; ``prefill``, ``decode``, ``score``; ``frontend``,
    ``encoder``, ``prompt``, ``decode``): its rows and its ops in order."""

    name: str
    rows: int
    ops: tuple[Op, ...]
    layer_bounds: tuple[int, ...] = ()
    """Where the repeated layers are, if given: layer i is ``ops[layer_bounds[i]:layer_bounds[i + 1]]``
    (an engine may split the pass between layers)."""

    def linears(self) -> list[str]:
        return [op.layer for op in self.ops if isinstance(op, Linear)]


def _writes(op: Op, widths: Mapping[str, int], context: int) -> list[tuple[str, int]]:
    """The values ``op`` writes (in place ones included) and their elements."""
    if isinstance(op, Norm):
        return [(op.x, op.rows * op.width), (op.out, (1 if op.last else op.rows) * op.width)]
    if isinstance(op, Linear):
        return [(op.out, op.rows * widths[op.layer])]
    if isinstance(op, KvWrite):
        return [(op.cache_k, context * op.width), (op.cache_v, context * op.width)]
    if isinstance(op, Embed | Attention):
        return [(op.out, op.rows * op.width)]
    if isinstance(op, Conv1d):
        return [(op.out, op.frames_out * op.channels_out)]
    if isinstance(op, Pool):
        return [(op.out, op.batch * op.width)]
    if isinstance(op, LogMel):
        return [(op.out, op.mels * op.frames)]
    return []  # Rope and GatedAct write in place what an op before them wrote; Argmax writes loop state


@dataclass(frozen=True)
class Graph:
    """An architecture's passes for one loop, and the constant tensors they read that are not
    weights (Llama's RoPE tables)."""

    passes: Mapping[str, Pass]
    tensors: Mapping[str, np.ndarray] = field(default_factory=dict)

    def needs(self, passes: tuple[str, ...] | None = None) -> frozenset[str]:
        """What its passes (``passes``' only, if given) ask of a lowering (``needs`` of every op)."""
        return frozenset(need for name, p in self.passes.items() if passes is None or name in passes
                         for op in p.ops for need in needs(op))

    def value_sizes(self, widths: Mapping[str, int], context: int) -> dict[str, int]:
        """Elements of every value an op writes, the most any pass writes (a linear layer's output
        width from ``widths``, a KV cache's ``context`` positions): the buffers an engine holds for
        the graph. Loop state (``ids``, ``pos``, ``generated``, ``count``) is the engine's."""
        sizes: dict[str, int] = {}
        for p in self.passes.values():
            for op in p.ops:
                for name, count in _writes(op, widths, context):
                    sizes[name] = max(sizes.get(name, 0), count)
        return sizes

    def check(self, layers: list[str]) -> None:
        """Every linear layer of the plan is in some pass, and no pass names another."""
        used = {name for p in self.passes.values() for name in p.linears()}
        if used != set(layers):
            missing, extra = sorted(set(layers) - used), sorted(used - set(layers))
            raise ValueError(f"the graph's linear layers are not the model's (missing {missing[:3]}, "
                             f"unknown {extra[:3]})")

"""The fp32 graphs of a transformers.js folder, exported from the architecture's own passes (the
ops, engines/ort/torch_ops.py) by ``torch.onnx.export`` (dynamo, opset 18: the exporter of every
ORT graph here, engines/ort/onnx_export.py), with the inputs and outputs optimum's exports have,
which is what transformers.js feeds and reads. optimum-onnx, which made the folders on the Hub,
requires transformers < 4.58 and does not install beside the pinned transformers 5.23.

- encoder (``feature-extraction``): ``onnx/model.onnx``, ``input_ids``, ``attention_mask``,
  ``token_type_ids`` int64 [batch_size, sequence_length] -> ``last_hidden_state`` [batch_size,
  sequence_length, hidden]; the pipeline pools it.
- decoder (``text-generation``): ``onnx/model.onnx`` with a growing KV cache: ``input_ids``,
  ``attention_mask`` [1, total_sequence_length], ``position_ids`` int64 and per layer
  ``past_key_values.N.key`` / ``.value`` float32 [1, kv_heads, past_sequence_length, head_dim]
  -> ``logits`` [1, sequence_length, vocab] (every row: the graph has no ``num_logits_to_keep``)
  and ``present.N.key`` / ``.value``, the past with the new rows appended. The architecture's ``score`` pass
  (every row's logits) over the cache: the KvWrite op appends, the attention reads the appended
  cache under ``attention_mask`` and causality (onnx_decoder.causal_bias). transformers.js starts
  a generation with a past of length 0.
- speech (``automatic-speech-recognition``, Whisper): ``onnx/encoder_model.onnx``
  (``input_features`` [1, mels, frames] -> ``last_hidden_state``) and
  ``onnx/decoder_model_merged.onnx``: ``input_ids``, ``encoder_hidden_states``, per layer
  ``past_key_values.N.decoder.*`` (growing) and ``past_key_values.N.encoder.*`` (the cross keys and
  values), ``use_cache_branch`` -> ``logits`` (of the last row) and ``present.N.decoder.*`` /
  ``present.N.encoder.*``. The cross keys and values come from an ``If`` on ``use_cache_branch``,
  as in optimum's merged decoders: the projections of ``encoder_hidden_states`` on the first step,
  the past ones after (``merge_cross``); positions and the causal bias come from the cache's length.

Exports are cached by content (onnx_export.cached_export).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from ..ort import onnx_export
from ..ort.onnx_decoder import causal_bias
from ..ort.torch_ops import caches, crosses, pass_module

FORMAT = 1
"""Bumped when an exported graph changes for the same model (names, inputs, options)."""
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ENCODER_OUTPUT = "last_hidden_state"
DECODER_INPUTS = ("input_ids", "attention_mask", "position_ids")
LOGITS = "logits"
SPEECH_INPUT = "input_features"


def _head(kind: str) -> dict[str, Any]:
    return {"tag": f"tjs-{kind}", "format": FORMAT, "opset": onnx_export.OPSET}


def _encoder(model: Any) -> bytes:
    """BERT's ``forward`` pass up to the last hidden state (the pipeline pools)."""
    import torch

    from ...architectures.ops import Pool

    cfg = model.config
    p = model.architecture.graph(cfg, batch=1, seq=1).passes["forward"]
    p = dataclasses.replace(p, ops=tuple(op for op in p.ops if not isinstance(op, Pool)))
    module = pass_module(model.module(), p, cfg.hidden // cfg.heads, [f"pass.{n}" for n in ENCODER_INPUTS], ["hidden"])
    batch = torch.export.Dim("batch_size", min=1, max=4096)
    seq = torch.export.Dim("sequence_length", min=2, max=cfg.max_positions)
    example = [torch.ones(2, 16, dtype=torch.long) for _ in ENCODER_INPUTS]
    return onnx_export.export(module, example, ENCODER_INPUTS, [ENCODER_OUTPUT],
                              [{0: batch, 1: seq} for _ in ENCODER_INPUTS])


def past_names(layers: int) -> list[str]:
    return onnx_export.layer_names("past_key_values", layers)


def present_names(layers: int) -> list[str]:
    return onnx_export.layer_names("present", layers)


def _decoder(model: Any) -> bytes:
    """The architecture's ``score`` pass over a growing cache (the module doc)."""
    import torch

    cfg = model.config
    graph = model.architecture.graph(cfg, prompt_len=1, eval_len=1, context=cfg.max_positions)
    p = graph.passes["score"]
    cache = caches(p)
    module = pass_module(model.module(), p, cfg.head_dim, ["ids", "attention_mask", "position_ids", *cache],
                         [LOGITS, *cache], graph.tensors, causal_bias)
    rows, past = 3, 4
    example = [torch.arange(rows)[None] % cfg.vocab, torch.ones(1, past + rows, dtype=torch.long),
               torch.arange(past, past + rows)[None],
               *(torch.zeros(1, cfg.kv_heads, past, cfg.head_dim) for _ in cache)]
    free = torch.export.Dim.DYNAMIC  # named Dims cannot express total = past + sequence
    shapes = [{1: free}, {1: free}, {1: free}, *({2: free} for _ in cache)]
    dims = {"input_ids": [None, "sequence_length"], "position_ids": [None, "sequence_length"],
            "attention_mask": [None, "total_sequence_length"], LOGITS: [None, "sequence_length", None]}
    dims |= {n: [None, None, "past_sequence_length", None] for n in past_names(cfg.layers)}
    dims |= {n: [None, None, "total_sequence_length", None] for n in present_names(cfg.layers)}
    return onnx_export.export(module, example, [*DECODER_INPUTS, *past_names(cfg.layers)],
                              [LOGITS, *present_names(cfg.layers)], shapes, dims,
                              ("sequence_length", "total_sequence_length", "past_sequence_length"))


def _speech_encoder(model: Any) -> bytes:
    """Whisper's ``encoder`` pass without the cross-attention projections (the merged decoder makes
    them): ``input_features`` [1, mels, frames] -> ``last_hidden_state`` [1, positions, d_model]."""
    import torch

    from ...architectures.ops import Linear

    cfg = model.config
    graph = model.architecture.graph(cfg)
    crossed = set(crosses(graph.passes["decode"]))
    p = graph.passes["encoder"]
    p = dataclasses.replace(p, ops=tuple(op for op in p.ops if not (isinstance(op, Linear) and op.out in crossed)))
    module = pass_module(model.module(), p, cfg.head_dim, ["features"], ["enc"])
    return onnx_export.export(module, [torch.zeros(1, cfg.mels, cfg.frames)], [SPEECH_INPUT], [ENCODER_OUTPUT])


def _step_feed(env: dict[str, Any]) -> None:
    """A decoder step's positions and causal bias from the self-attention cache's length."""
    import torch

    past, rows = env["cache.0.k"].shape[2], env["ids"].shape[1]
    env["position_ids"] = torch.arange(past, past + rows)[None]
    allowed = torch.arange(past + rows)[None, :] <= torch.arange(past, past + rows)[:, None]
    env["attention_bias"] = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)[None, None]


def speech_names(layers: int) -> dict[str, list[str]]:
    """The merged decoder's per-layer names, as optimum's (transformers.js reads them so)."""
    return {part: [f"{prefix}.{i}.{side}.{kv}" for i in range(layers) for kv in ("key", "value")]
            for part, (prefix, side) in {"past": ("past_key_values", "decoder"), "present": ("present", "decoder"),
                                         "past_cross": ("past_key_values", "encoder"),
                                         "present_cross": ("present", "encoder")}.items()}


def _speech_decoder(model: Any) -> bytes:
    """Whisper's ``decode`` pass over a growing self-attention cache, merged as optimum merges
    its decoders: an ``If`` on ``use_cache_branch`` either makes every layer's cross-attention keys
    and values from ``encoder_hidden_states`` (the first step) or passes the past ones on."""
    import torch

    from ...architectures.ops import Argmax, Linear
    from ..ort.torch_ops import HEADS, run_pass

    cfg = model.config
    graph = model.architecture.graph(cfg)
    p = graph.passes["decode"]
    p = dataclasses.replace(p, ops=tuple(op for op in p.ops if not isinstance(op, Argmax)))
    cache, crossed, names = caches(p), crosses(p), speech_names(cfg.decoder_layers)
    body = pass_module(model.module(), p, cfg.head_dim, ["ids", *cache, *(c + HEADS for c in crossed)],
                       [LOGITS, *cache], feed=_step_feed)
    heads = lambda x: x.unflatten(-1, (-1, cfg.head_dim)).transpose(1, 2)  # noqa: E731
    made = dataclasses.replace(graph.passes["encoder"], ops=tuple(
        op for op in graph.passes["encoder"].ops if isinstance(op, Linear) and op.out in crossed))

    class Cross(torch.nn.Module):
        def __init__(self, net: Any) -> None:
            super().__init__()
            self.m = net

        def forward(self, enc: Any) -> tuple[Any, ...]:
            env = run_pass(self.m, made, {"enc": enc}, cfg.head_dim)
            return tuple(heads(env[c]) for c in crossed)

    rows, past = 3, 4
    free = torch.export.Dim.DYNAMIC
    steps = onnx_export.export(
        body, [torch.zeros(1, rows, dtype=torch.long),
               *(torch.zeros(1, cfg.heads, past, cfg.head_dim) for _ in cache),
               *(torch.zeros(1, cfg.heads, cfg.source_positions, cfg.head_dim) for _ in crossed)],
        ["input_ids", *names["past"], *names["present_cross"]], [LOGITS, *names["present"]],
        [{1: free}, *({2: free} for _ in cache), *(None for _ in crossed)],
        {"input_ids": [None, "decoder_sequence_length"]}
        | {n: [None, None, "past_decoder_sequence_length", None] for n in names["past"]}, ())
    projections = onnx_export.export(Cross(model.module()).eval(),
                                     [torch.zeros(1, cfg.source_positions, cfg.d_model)], ["encoder_hidden_states"],
                                     names["present_cross"])
    return merge_cross(steps, projections, names, cfg)


def merge_cross(steps: bytes, projections: bytes, names: dict[str, list[str]], cfg: Any) -> bytes:
    """The decoder step (taking the cross keys and values as ``present.N.encoder.*``) and the
    projections making them, as one graph: inputs ``input_ids``, ``encoder_hidden_states``,
    ``past_key_values.N.decoder.*``, ``past_key_values.N.encoder.*``, ``use_cache_branch``; an
    ``If`` gives ``present.N.encoder.*`` (its else branch the projections, its then branch the
    past ones)."""
    import onnx
    from onnx import TensorProto, compose, helper

    body, cross = onnx.load_from_string(steps), compose.add_prefix(onnx.load_from_string(projections), "cross/")
    source = cross.graph.input[0].name
    for node in cross.graph.node:
        node.input[:] = ["encoder_hidden_states" if i == source else i for i in node.input]
    kv = [1, cfg.heads, None, cfg.head_dim]
    made = helper.make_graph(list(cross.graph.node), "cross_from_encoder", [], list(cross.graph.output),
                             list(cross.graph.initializer))
    kept = helper.make_graph(
        [helper.make_node("Identity", [p], [f"reuse/{p}"]) for p in names["past_cross"]], "cross_from_past", [],
        [helper.make_tensor_value_info(f"reuse/{p}", TensorProto.FLOAT, kv) for p in names["past_cross"]])
    branch = helper.make_node("If", ["use_cache_branch"], names["present_cross"], then_branch=kept, else_branch=made,
                              name="use_cache_branch_if")
    g = body.graph
    inputs = [i for i in g.input if i.name not in names["present_cross"]]
    extra = [helper.make_tensor_value_info("encoder_hidden_states", TensorProto.FLOAT,
                                           [1, cfg.source_positions, cfg.d_model]),
             *(helper.make_tensor_value_info(p, TensorProto.FLOAT, [1, cfg.heads, "encoder_sequence_length_out",
                                                                    cfg.head_dim]) for p in names["past_cross"]),
             helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])]
    outputs = [*g.output, *(helper.make_tensor_value_info(p, TensorProto.FLOAT, kv) for p in names["present_cross"])]
    merged = helper.make_graph([branch, *g.node], g.name, [*inputs, *extra], outputs, list(g.initializer),
                               value_info=list(g.value_info))
    model = helper.make_model(merged, opset_imports=list(body.opset_import), ir_version=body.ir_version)
    model.functions.extend([*body.functions, *cross.functions])
    onnx.checker.check_model(model)
    return model.SerializeToString()


EXPORTERS = {"encoder": {"model": _encoder}, "decoder": {"model": _decoder},
             "speech": {"encoder_model": _speech_encoder, "decoder_model_merged": _speech_decoder}}
"""Workload kind -> the graphs its folder holds and how each is exported."""


@functools.lru_cache(maxsize=4)
def export_fp32(model: Any, kind: str) -> dict[str, Path]:
    """The fp32 graphs of ``model``'s folder for a workload ``kind``, by graph name, cached by
    content; ValueError for a kind transformers.js's folders are not made for here."""
    if kind not in EXPORTERS:
        raise ValueError(f"no transformers.js folder is made for {kind} workloads here")
    out = {}
    for graph, export in EXPORTERS[kind].items():
        head = _head(f"{kind}-{graph}")
        onnx_export.cached_export(model, head, functools.partial(export, model))
        out[graph] = onnx_export.cache_path(model, head)
    return out

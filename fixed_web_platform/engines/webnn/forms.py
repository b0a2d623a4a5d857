"""How the harness's WebNN graphs write a linear layer y = x @ W^T (+ b), W stored [N, K]: the graph
forms (web/engines/webnn_graph.js builds them) and which one a run builds.

Layout forms (the same numbers, written differently): ``transpose`` matmul(x, transpose(W)),
``gemm`` gemm(x, W, {bTranspose: true}), ``pretransposed`` / ``pretransposed_gemm`` (W re-packed
[K, N] in the page), ``blockrows`` / ``blockrows_gemm`` (blockwise scales given per row of blocks).

``gemm_qdq``: the form Chromium's TFLite backend (services/webnn/tflite/graph_builder_tflite.cc,
``GraphBuilderTflite::CanFuseQuantizeAndGetOutput(const mojom::Gemm&)``, feature
``kApplyQDQFusion``, on by default) turns into an int8 FULLY_CONNECTED instead of dequantizing
the weights on every dispatch. Its conditions, read there, and how this form meets them:

- a and b of gemm are both dequantizeLinear outputs, alpha = beta = 1: the int8 activations'
  quantizeLinear -> dequantizeLinear in front, the weights' dequantizeLinear;
- a's input is int8 or uint8 with a scalar (per-tensor) scale: the calibrated activation scale;
- b's input has a's data type; a per-channel b (more than one scale) must be int8 and needs
  ``bTranspose: true``: per-channel int8 weights stored [N, K], scale [N, 1] (axis 0, TFLite's
  output-channel axis). Blockwise scales ([N, K / block]) do not qualify, nor does int4
  ("TODO(crbug.com/425746878): Support int4 quantization for b operand");
- c absent, or the dequantizeLinear of an int32 tensor: the float bias is added after the
  output's dequantizeLinear instead (an int32 bias would need the scale a * b per channel);
- gemm's output goes straight into a quantizeLinear of a's type with a scalar scale: the
  calibrated output quantizeLinear -> dequantizeLinear of this form.

Weights are symmetric per channel (zero point 0): TFLite's int8 specification requires it of
per-axis weights, and ``--granularity per-channel`` always makes them so (vocabulary.GRANULARITIES).
``gemm_scale``: per-channel symmetric weights with float activations (weight-only), written as
gemm(x, cast(q, float32), bTranspose) * scale. The same numbers as dequantizeLinear -> gemm (W =
scale * q row by row, zero point 0), but the backend has no weight-only int8 kernel: it emulates
a constant's dequantizeLinear by CAST, SUB and MUL over all of W on every dispatch
(``SerializeDequantizeLinear``: DEQUANTIZE only for non-constant inputs, crbug.com/375614289),
and no float-input FULLY_CONNECTED with an int8 filter is ever emitted, so XNNPACK's
dynamic-range kernel is out of reach. Casting the int8 constant leaves one pass over W per
dispatch instead of three, and the scales touch only the [M, N] output.

The control, a form known not to fuse, is ``gemm`` with the same int8 inputs and weights and no
output quantizeLinear: the backend then dequantizes and runs a float FULLY_CONNECTED.
"""

from __future__ import annotations

import os

from ...run_spec import RunSpec

LAYOUT_FORMS = ("pretransposed", "pretransposed_gemm", "transpose", "gemm", "blockrows", "blockrows_gemm")
SCALE_AFTER_FORM = "gemm_scale"
QDQ_FORM = "gemm_qdq"
GRAPH_FORMS = (*LAYOUT_FORMS, SCALE_AFTER_FORM, QDQ_FORM)
GRAPH_FORM_ENV = "FWP_WEBNN_GRAPH_FORM"
"""A default form for every WebNN run of a sweep (--graph-form wins)."""
MODEL_FORM = "pretransposed_gemm"
"""Whole models' default where no int8 kernel applies (the fastest float form measured:
docs/history/webnn-integer-path.md; current figures: docs/findings/integer-path.md)."""
MATMUL_FORM = "transpose"
"""The matmul sweep's default where no int8 kernel applies."""
PER_CHANNEL_WEIGHT_ONLY_FORM = SCALE_AFTER_FORM
"""Per-channel 8-bit weights with float activations: gemm(x, cast(q), {bTranspose: true}) * scale,
measured faster than gemm(x, dequantizeLinear(q), {bTranspose: true}) here
(docs/history/webnn-integer-path.md; current figures: docs/findings/integer-path.md)."""


def check_form(form: str) -> None:
    if form and form not in GRAPH_FORMS:
        raise ValueError(f"graph form {form!r} is not one of {', '.join(GRAPH_FORMS)}")


def choose_form(run: RunSpec, default: str) -> tuple[str, str]:
    """(the form this run builds, why it cannot: '' when it can). Asked for (--graph-form, then
    FWP_WEBNN_GRAPH_FORM) wins; else int8 activations with per-channel 8-bit weights build the
    fused form, per-channel weight-only 8-bit the gemm form, the rest ``default``."""
    asked = run.graph_form or os.environ.get(GRAPH_FORM_ENV, "").strip()
    check_form(asked)
    per_channel8 = run.granularity == "per-channel" and run.bits == 8
    form = asked or (QDQ_FORM if per_channel8 and run.act_bits == 8
                     else PER_CHANNEL_WEIGHT_ONLY_FORM if per_channel8 else default)
    if form == SCALE_AFTER_FORM and not per_channel8:
        return form, (f"graph form {SCALE_AFTER_FORM} applies per-channel scales after gemm: it needs --bits 8 "
                      "--granularity per-channel")
    if form == QDQ_FORM and run.act_bits != 8:
        return form, (f"graph form {QDQ_FORM} quantizes a layer's input and output to int8: it needs "
                      "--act-bits 8")
    return form, ""

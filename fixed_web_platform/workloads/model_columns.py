"""Row columns every kind that runs a whole model shares (encoder now; decoder and speech next):
which model, which weights, which inputs, and the precision plan of its linear layers."""

from __future__ import annotations

from .base import Column

MODEL_COLUMNS = (
    Column("model", str, "Whole models: the model as named; blank on other kinds' rows."),
    Column("weights", str, "'pretrained', 'random' (seeded random weights; accuracy is then against "
                           "PyTorch on them) or 'onnx' (a transformers.js folder without weights: accuracy is "
                           "against its own fp32 graph on onnxruntime's CPU)."),
    Column("inputs", str, "'builtin' (the project's evaluation set) or the --inputs file."),
    Column("precision_plan", str, "Bits per linear layer as planned: 'uniform:4' or 'mixed:8x24,4x12' "
                                  "(bits x layers)."),
    Column("precision_rules", str, "The rule set that gave the layers their bits: '' (uniform --bits), "
                                   "'mixed-precision', a rules file, or a sensitivity probe."),
    Column("onnx_inventory", str, "Rows that ran an ONNX file as given (an ONNX file's variant, a transformers.js "
                                  "dtype file): its weight nodes by kind and what they hold, read from the graph "
                                  "('MatMulNBits/int4 x36, Gather/float32 x3'; formats/onnx_inventory.py; bytes "
                                  "by precision in samples.jsonl)."),
    Column("precision_promise", str, "Rows that ran an ONNX file as given: '' when the file holds what its name "
                                     "promises (the user's file by its name, a variant by its own: model_q4.onnx, "
                                     "q4); else what it promises and what its weight matmuls hold (flagged in "
                                     "the report)."),
)
MODEL_IDENTITY = ("model", "weights", "inputs")
"""What tells two models' settings apart (with the kind's own shape columns)."""
MODEL_PRECISION_IDENTITY = ("precision_plan", "precision_rules")
"""What tells two precisions of one model apart besides --bits."""


DECODE_TOKENS_PER_S = Column("decode_tokens_per_s", float, "Ids generated per second after the first: a decoder's "
                             "(new_tokens - 1) / (t_last - t_first) per generation, a speech model's per clip; "
                             "median.", performance=True)
DECODE_STEADY_CLASS = Column(
    "decode_steady_class", str, "Did the decode steps settle: every generation's (a speech model's every clip's) "
    "steps after the floor end to end, their growth with context divided out (one line over all of them; "
    "series/steps.py), classed flat, warm-up, slowdown, no steady state or too short (fewer than 10 steps); "
    "decode_tokens_per_s and the token_ms figures come from the generations of its steady segment. The worst over "
    "page loads.")
LOAD_WEIGHTS_MS = Column("load_weights_ms", float, "Load phase: the weights to the device (upload).", performance=True)
DEVICE_MEMORY = (
    Column("device_weight_bytes", int, "Device memory: the weights as the engine holds them."),
    Column("kv_cache_bytes", int, "Device memory: the KV cache (and a speech model's cross-attention keys and "
                                  "values)."),
    Column("scratch_bytes", int, "Device memory: activations, logits and other scratch."),
)
"""Columns the kinds that generate token by token (decoder, speech) share, one meaning each."""

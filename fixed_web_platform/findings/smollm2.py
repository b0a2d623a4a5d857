"""Findings: SmolLM2-135M on every decoder engine: the harness's WGSL kernels and WebNN graphs,
llama.cpp (wllama) and ONNX Runtime Web, in Chrome and Firefox, at every width, at two prompt
lengths (time to first token, decode tokens/s, token-by-token accuracy against PyTorch fp32)."""

from __future__ import annotations

from .decoders import engines, plots
from .page import Page

ENGINES = ("smollm2-harness-webgpu", "smollm2-harness-webnn", "smollm2-webnn-int4-experimental", "smollm2-wllama",
           "smollm2-wllama-firefox", "smollm2-wllama-webgpu", "smollm2-ort", "smollm2-ort-webgpu")

PAGE = Page("smollm2", "SmolLM2-135M on every engine", ENGINES, engines, plots("SmolLM2-135M", ENGINES))

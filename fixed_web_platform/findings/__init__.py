"""Findings pages: the project's published figures, each page generated from result folders
committed under ``results/findings/`` (trimmed to what a page reads: results.csv,
environment.json, samples.jsonl), stamped with the date, machine, browsers, engines, command and
commit of its data, and written to ``docs/findings/<name>.md`` by
``run_real_webgpu_webnn.py findings`` (a test regenerates every page and compares).

A page is a module of this package (its tables and a short "what it says" written from the
figures), registered in ``PAGES``; ``page.py`` holds what every page shares.
"""

from __future__ import annotations

from .gemma3 import PAGE as GEMMA3
from .integer import PAGE as INTEGER_PATH
from .matmuls import PAGE as MATMULS
from .memory import PAGE as MEMORY
from .minilm import PAGE as MINILM
from .ocr import PAGE as OCR
from .onnx_quantizers import PAGE as ONNX_QUANTIZERS
from .page import DATA_CAP_BYTES, DATA_DIR, PAGES_DIR, Page, render
from .quantizers import PAGE as QUANTIZERS
from .sensitivity import PAGE as SENSITIVITY
from .smollm2 import PAGE as SMOLLM2
from .transformersjs import PAGE as TRANSFORMERSJS
from .versions import PAGE as VERSIONS
from .whisper import PAGE as WHISPER

PAGES: tuple[Page, ...] = (MATMULS, MINILM, SMOLLM2, GEMMA3, WHISPER, INTEGER_PATH, OCR, SENSITIVITY, QUANTIZERS,
                           TRANSFORMERSJS, MEMORY, ONNX_QUANTIZERS, VERSIONS)

__all__ = ["DATA_CAP_BYTES", "DATA_DIR", "PAGES", "PAGES_DIR", "Page", "render"]

"""ONNX Runtime Web (onnxruntime-web, from npm) as a peer engine, one per execution provider,
and one module per workload kind it runs: matmul.py (a one-node model, onnx_matmul.py) and
encoder.py (the exported encoder, onnx_encoder.py). Every model holds THE SAME quantized values
the harness's kernels get. ORT silently moves nodes a provider cannot take to its CPU (wasm)
provider; the page first asks for a session with that fallback disabled, so a fallback is seen,
and the row says where the node ran and why.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...paths import ENGINES_DIR
from ...run_spec import RunSpec
from ...vocabulary import EngineName, Platform
from ..base import Engine

ORT_WEB_VERSION = "1.30.0"
ORT_WEB_DIR = ENGINES_DIR / f"onnxruntime-web-{ORT_WEB_VERSION}"
"""Installed by scripts/setup.sh from the npm registry; served at ``ORT_ASSETS_URL``."""
ORT_ASSETS_URL = "/engines/ort/"
ORT_BUNDLE = "ort.webgpu.min.mjs"
"""The bundle with the webgpu, webnn and wasm providers."""
ORT_THREADS = max(1, min(4, os.cpu_count() or 1))
"""wasm threads asked for (pages are cross-origin isolated, so threads are possible); the
number in effect is what the page reports."""


class OrtWebEngine(Engine):
    """ONNX Runtime Web on one execution provider (the subclasses below fix which)."""

    name = EngineName.ORT
    refusal_stages = ("session",)

    def assets(self) -> dict[str, Path]:
        return {ORT_ASSETS_URL: ORT_WEB_DIR}

    def session_options(self, run: RunSpec) -> dict[str, object]:
        """What every ORT page needs to load the bundle and open a session on this provider."""
        return {"provider": self.platform.value, "device_type": run.webnn_device, "threads": ORT_THREADS,
                "assets": ORT_ASSETS_URL, "bundle": ORT_BUNDLE}


class OrtWebGpu(OrtWebEngine):
    platform = Platform.WEBGPU


class OrtWebNN(OrtWebEngine):
    platform = Platform.WEBNN


class OrtWasm(OrtWebEngine):
    platform = Platform.WASM

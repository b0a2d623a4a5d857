"""wllama (npm ``@wllama/wllama``): llama.cpp compiled to WebAssembly, with its WebGPU backend, as
a peer engine for decoder LLMs. It runs GGUF files: the model's own file as shipped, and the same
weights written by the harness at llama.cpp's formats (gguf_files.py). Its formats are llama.cpp's
own, so its rows name the format (``RunSpec.weight_format``) and are judged by the same accuracy
figures as every engine, not by the harness's bytes.

Two platforms: ``wasm`` (llama.cpp's CPU backend, no GPU layers) and ``webgpu`` (every layer
offered to its WebGPU backend). llama.cpp falls back to its CPU backend when it finds no WebGPU
device it can use; the page sends llama.cpp's own buffer log and the row says where the weights
were (``executed_on``).
"""

from __future__ import annotations

from pathlib import Path

from ...paths import PROJECT_ROOT
from ...vocabulary import EngineName, Platform
from ...workloads import Workload
from ...workloads.decoder import DecoderWorkload
from ..base import Engine
from ..builds import EngineBuild, Pack
from . import gguf_files

def wllama_build(version: str) -> EngineBuild:
    """A wllama release: its esm/ bundle (index.js and the wasm it checks its version against)."""
    return EngineBuild(EngineName.WLLAMA, version, f"wllama-{version}",
                       packs=(Pack(f"@wllama/wllama@{version}", ("package/esm",)),),
                       present=("index.js", "wasm/wllama.wasm"), served="esm")


WLLAMA_BUILDS = (wllama_build("3.13.0"), wllama_build("3.8.1"))
"""Installed side by side by scripts/setup.sh (``--engine wllama@VERSION``), the default first:
3.13.0 (llama.cpp b12211) and 3.8.1 (b11364, which the findings before 2026-12-04 ran)."""
GGUF_DIR = PROJECT_ROOT / ".cache" / "gguf"
"""GGUF files written for wllama runs (git-ignored), served at ``GGUF_URL``."""
GGUF_URL = "/gguf/"
SHIPPED, HELD = gguf_files.SHIPPED, gguf_files.HELD
BITS_FORMATS: dict[int, tuple[str, ...]] = {32: ("F32",), 16: ("F16",), 8: ("Q8_0",), 4: ("Q4_0", "Q4_1", HELD)}
"""The formats a sweep's --bits runs: llama.cpp's (the harness writes each from the model's
weights by llama.cpp's rounding) and, at 4 bits, ``held``: the harness's own codes as Q4_1, one
run per --weight-quant (gguf_files.py)."""
NO_FORMAT = {2: "llama.cpp's 2-bit formats are not written here: its k-quant Q2_K needs llama.cpp's "
                "importance search (the gguf package only reads it) and TQ2_0 is ternary, for models "
                "trained ternary"}


class WllamaEngine(Engine):
    name = EngineName.WLLAMA
    gpu_layers: int = 0
    """llama.cpp's n_gpu_layers: 0 keeps every layer on its CPU backend."""

    builds = WLLAMA_BUILDS

    def assets(self) -> dict[str, Path]:
        GGUF_DIR.mkdir(parents=True, exist_ok=True)
        return super().assets() | {GGUF_URL: GGUF_DIR}

    def weight_formats(self, workload: Workload, bits: int, act_bits: int = 32) -> tuple[str, ...]:
        """One run per llama.cpp format at ``bits``, and the model's own file at the bits its
        main type stands for; ('',) when there is none (the run is then refused, with why)."""
        if not isinstance(workload, DecoderWorkload):
            return ("",)
        formats = BITS_FORMATS.get(bits, ())
        shipped = gguf_files.shipped_format(workload.model, workload.random_weights)
        if shipped and gguf_files.format_bits(shipped) == bits:
            formats = (*formats, SHIPPED)
        return formats or ("",)


class WllamaWasm(WllamaEngine):
    platform = Platform.WASM
    gpu_layers = 0


class WllamaWebGpu(WllamaEngine):
    platform = Platform.WEBGPU
    gpu_layers = 999

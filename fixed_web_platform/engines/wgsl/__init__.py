"""The harness's own WGSL kernels on WebGPU (engine ``harness``, platform ``webgpu``): the
kernels (kernels.py), and one module per workload kind it runs: matmul.py, encoder.py."""

from __future__ import annotations

from ...vocabulary import EngineName, Platform
from ..base import Engine


class WgslEngine(Engine):
    name = EngineName.HARNESS
    platform = Platform.WEBGPU

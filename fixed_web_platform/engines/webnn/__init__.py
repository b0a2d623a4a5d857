"""The harness's own WebNN graphs (engine ``harness``, platform ``webnn``), one module per workload
kind it runs: matmul.py, encoder.py. Data types are chosen in Python from the context's
opSupportLimits() and the precision mode (precision/webnn_precision.py)."""

from __future__ import annotations

from ...vocabulary import EngineName, Platform
from ..base import Engine


class WebnnEngine(Engine):
    name = EngineName.HARNESS
    platform = Platform.WEBNN
    refusal_stages = ("graph building", "build")

"""The harness's own WebNN graphs (engine ``harness``, platform ``webnn``), one module per workload
kind it runs: matmul.py, encoder.py. Data types are chosen in Python from the context's
opSupportLimits() and the precision mode (precision/webnn_precision.py)."""

from __future__ import annotations

from typing import Any

from ...run_spec import RunSpec
from ...vocabulary import EngineName, Outcome, Platform
from ..base import BrowserFacts, Engine, Refusal


class WebnnEngine(Engine):
    name = EngineName.HARNESS
    platform = Platform.WEBNN
    refusal_stages = ("graph building", "build")

    def graph_forms(self, asked: tuple[str, ...], act_bits: int) -> tuple[str, ...]:
        """Every form asked for, but the int8-output form only with int8 activations."""
        from .forms import QDQ_FORM

        return tuple(f for f in asked if f != QDQ_FORM or act_bits == 8)


async def context_limits(run: RunSpec, browser: BrowserFacts) -> dict[str, Any] | Refusal:
    """The opSupportLimits() of the run's WebNN context, or the browser's refusal to make one."""
    context = await browser.webnn_context(run.webnn_device)
    if not context.get("available"):
        return Refusal(Outcome.UNSUPPORTED, f"WebNN {run.webnn_device}: {context.get('error', '')}")
    return context.get("limits") or {}

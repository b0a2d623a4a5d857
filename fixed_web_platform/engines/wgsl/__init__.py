"""The harness's own WGSL kernels on WebGPU (engine ``harness``, platform ``webgpu``): the
kernels (kernels.py), the linear layers of whole models (linear.py), the ops of an architecture's
graph lowered to steps (lower.py), the runners of step-list pages (steps.py), and one module per
workload kind it runs: matmul.py, encoder.py (the forward loop), decoder.py (generate), speech.py
(transcribe)."""

from __future__ import annotations

from ...precision.quantizers import QUANTIZERS
from ...run_spec import RunSpec
from ...vocabulary import EngineName, Platform
from ..base import Engine, KindRunner


class WgslEngine(Engine):
    name = EngineName.HARNESS
    platform = Platform.WEBGPU


class WgslRunner(KindRunner):
    """What every kind on the WGSL kernels shares: the packed-weight kernels read integer or float
    zero points (kernels.ZERO_FORMS), so every weight quantizer's bytes run, except through the
    int8-activation kernel."""

    weight_quants = tuple(QUANTIZERS)

    def refusal(self, engine: Engine, run: RunSpec) -> str:
        if run.act_bits == 8 and QUANTIZERS[run.weight_quant].float_zero:
            return (f"the int8-activation kernel (DP4A) subtracts integer zero points in i32; the "
                    f"{run.weight_quant} quantizer keeps a float zero per block")
        return super().refusal(engine, run)

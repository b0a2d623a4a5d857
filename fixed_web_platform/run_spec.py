"""What one planned run is (RunSpec) and the timing protocol every run follows (TimingConfig).

The lowest layer of the sweep's data: engines, rows and the page protocol read these; the plan
(plan.py) builds them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .vocabulary import DEFAULT_GRANULARITY, BrowserName, EngineName, Platform, PrecisionMode, block_for, parse_bits
from .workloads import Workload, workload_from_json

MAX_ITERATIONS_LIMIT = 2048
"""WebGPU query sets hold at most 4096 timestamps: two per timed iteration."""


@dataclass(frozen=True)
class TimingConfig:
    """The timing protocol of every run (see web/timing.js for the page's half)."""

    warmup: int = 3
    min_iterations: int = 10
    min_time_s: float = 1.0
    max_iterations: int = 200
    repeat: int = 1
    """Page loads per run; their samples are pooled (pyperf's processes idea)."""
    timeout_s: float = 120.0
    warmup_min_s: float = 0.0
    """Warm-ups also continue until this much time has passed (0: the count alone). A JIT that
    tiers code up after a budget of work (Chromium's V8 moves WebAssembly from Liftoff to TurboFan
    after seconds of running; ORT Web's wasm kernels ran 5x faster after about 2 s) needs time,
    not a count."""

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError(f"warm-up count must not be negative, got {self.warmup}")
        if not 1 <= self.min_iterations <= self.max_iterations <= MAX_ITERATIONS_LIMIT:
            raise ValueError(
                f"need 1 <= min iterations ({self.min_iterations}) <= max iterations "
                f"({self.max_iterations}) <= {MAX_ITERATIONS_LIMIT}"
            )
        if not (0 <= self.min_time_s < float("inf")):
            raise ValueError(f"min time must be a non-negative number of seconds, got {self.min_time_s}")
        if self.repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {self.repeat}")
        if not (0 <= self.warmup_min_s < float("inf")):
            raise ValueError(f"warm-up time must be a non-negative number of seconds, got {self.warmup_min_s}")
        if not (0 < self.timeout_s < float("inf")):
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout_s}")

    @property
    def page_budget_ms(self) -> float:
        """Time one page may spend on timed iterations: half its share of the run's timeout."""
        return 1000.0 * self.timeout_s * 0.5 / self.repeat


MODEL_TIMING = TimingConfig(warmup=1, min_iterations=5, min_time_s=0.0, max_iterations=200, timeout_s=600.0)
"""Defaults for whole-model sweeps: a forward pass takes seconds on a software adapter, so fewer
warm-ups and samples per page load (still a cold pass apart, a warm-up, several timed passes)
and a longer time limit. Any timing flag given on the command line wins."""


@dataclass(frozen=True)
class RunSpec:
    """One planned run: everything the harness needs to execute and label it."""

    run_id: int
    browser: BrowserName
    platform: Platform
    workload: Workload
    bits: int
    block_size: int
    repetition: int
    precision_mode: PrecisionMode
    seed: int
    webnn_device: str = "cpu"
    """MLContext deviceType for WebNN runs (cpu, gpu or npu); unused elsewhere."""
    engine: EngineName = EngineName.HARNESS
    """Who builds the work: the harness's kernels/graphs or ONNX Runtime Web."""
    act_bits: int = 32
    """Activation precision: 32 (float) or 8 (int8, statically calibrated: W8A8 / W4A8)."""
    observer: str = ""
    """The calibration observer that gave the activations their scale and zero point ('' at 32)."""
    weight_format: str = ""
    """The weight format asked for, for engines that hold several at one bit width (wllama: a
    GGUF type such as Q4_0, or 'shipped' for the model's own file); '' where the bits name it."""
    granularity: str = DEFAULT_GRANULARITY
    """How 8/4/2-bit weights are grouped: 'block' (block_size along K) or 'per-channel'."""
    graph_form: str = ""
    """The graph form asked for, for engines that build one computation several ways (the
    harness's WebNN graphs: engines/webnn/forms.py); '' for the engine's default."""
    refused: str = ""
    """Why this run will not be attempted, decided when the plan was built (no module runs its
    engine, platform and workload kind, or its activation precision); '' for a run to attempt."""

    @property
    def weight_block(self) -> int:
        """The block the weights are prepared with: block_size, or PER_CHANNEL_BLOCK."""
        return block_for(self.granularity, self.block_size)

    @property
    def label(self) -> str:
        acts = f" a{self.act_bits} {self.observer}" if self.act_bits != 32 else ""
        fmt = f" {self.weight_format}" if self.weight_format else ""
        group = " per-channel" if self.granularity == "per-channel" and self.bits <= 8 else ""
        form = f" [{self.graph_form}]" if self.graph_form else ""
        return (f"{self.browser}/{self.engine}/{self.platform} {self.bits}-bit{fmt}{group}{acts}{form} "
                f"{self.workload.label} rep{self.repetition}")

    def to_json(self) -> dict[str, Any]:
        doc = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return doc | {"workload": self.workload.to_json()}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunSpec:
        return cls(**{
            **doc,
            "browser": BrowserName(doc["browser"]),
            "engine": EngineName(doc.get("engine", EngineName.HARNESS)),  # v2 plans: harness only
            "platform": Platform(doc["platform"]),
            "precision_mode": PrecisionMode(doc["precision_mode"]),
            "workload": workload_from_json(doc["workload"]),
            "bits": parse_bits(doc["bits"]),
        })

"""The vocabulary of a sweep: closed sets (enums) and frozen specs shared by every module."""

from __future__ import annotations

import enum
from dataclasses import dataclass

SCHEMA_VERSION = 2
"""Version of the result files (results.csv, samples.jsonl, environment.json); bump on any change."""


class Platform(enum.StrEnum):
    WEBGPU = "webgpu"
    WEBNN = "webnn"


class BrowserName(enum.StrEnum):
    CHROME = "chrome"
    EDGE = "edge"
    FIREFOX = "firefox"
    SAFARI = "safari"


class Outcome(enum.StrEnum):
    """What happened to one planned run. Only ``ok`` rows carry measured figures."""

    OK = "ok"
    UNSUPPORTED = "unsupported"  # the browser lacks a feature the run needs; reason names it
    FAILED = "failed"  # the browser raised an error; reason is its message
    TIMEOUT = "timeout"  # no result within the run's time limit; the browser was restarted
    CRASH = "crash"  # the browser process died during the run
    INVALID = "invalid"  # it ran, but the kernel's output is wrong beyond tolerance
    UNAVAILABLE = "unavailable"  # the browser (or its driver) is not installed here

    @property
    def is_failure(self) -> bool:
        """Outcomes that make the sweep exit 1: something broke, as opposed to 'cannot run here'."""
        return self in (Outcome.FAILED, Outcome.TIMEOUT, Outcome.CRASH, Outcome.INVALID)


WEBNN_DEVICES = ("cpu", "gpu", "npu")


class PrecisionMode(enum.StrEnum):
    STANDARD = "standard"
    EXPERIMENTAL = "experimental"


SUPPORTED_BITS = (32, 16, 8, 4, 2)
"""32 is the float32 baseline; 16 is float16 weights; 8/4/2 are packed integer weights."""
DEFAULT_BITS = (32, 16, 8, 4, 2)
DEFAULT_BLOCK_SIZE = 32


@dataclass(frozen=True)
class Workload:
    """One matmul shape: out[M, N] = x[M, K] @ W[N, K]^T (W stored row per output channel)."""

    name: str
    m: int
    k: int
    n: int

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"


DEFAULT_WORKLOADS = (
    # BERT-base FFN up-projection for one token (decode-like GEMV) and an attention projection
    # over a 128-token sequence (prefill-like GEMM).
    Workload("bert-base-ffn-gemv", 1, 768, 3072),
    Workload("bert-base-attn-gemm", 128, 768, 768),
)


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
        if not (0 < self.timeout_s < float("inf")):
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout_s}")

    @property
    def page_budget_ms(self) -> float:
        """Time one page may spend on timed iterations: half its share of the run's timeout."""
        return 1000.0 * self.timeout_s * 0.5 / self.repeat


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
    """MLContext deviceType for WebNN runs (cpu, gpu or npu); unused by WebGPU runs."""

    @property
    def label(self) -> str:
        return (
            f"{self.browser}/{self.platform} {self.bits}-bit {self.workload.shape}"
            f" rep{self.repetition}"
        )

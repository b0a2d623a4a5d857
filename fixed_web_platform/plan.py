"""The run matrix, built, validated and saved before anything launches.

rounds (repetitions) x browsers x workloads x bits x engines x platforms, with engines and
platforms innermost so the rows of one configuration (harness WebGPU, harness WebNN, ORT on each
provider) sit side by side in one browser session. Repetitions are rounds, outermost: each round
runs the whole matrix in fresh browser sessions, so the repetitions of a configuration are spread
over the sweep's time and over browser sessions (asv's rounds), the independent units compare
judges on. Every user-facing check of a run happens here or in
the vocabulary, so the CLI, the Python API and ``--resume`` share one path.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .vocabulary import (
    ACT8_WEIGHT_BITS,
    ACT_BITS,
    DEFAULT_BLOCK_SIZE,
    SCHEMA_VERSION,
    WEBNN_DEVICES,
    BrowserName,
    EngineName,
    Platform,
    PrecisionMode,
    parse_bits,
)
from .workloads import Workload, workload_from_json

DEFAULT_OBSERVER = "minmax"
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

    @property
    def label(self) -> str:
        acts = f" a{self.act_bits} {self.observer}" if self.act_bits != 32 else ""
        return (f"{self.browser}/{self.engine}/{self.platform} {self.bits}-bit{acts} "
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


def build_plan(
    browsers: Sequence[BrowserName],
    platforms: Sequence[Platform],
    workloads: Sequence[Workload],
    bits: Sequence[int],
    *,
    engines: Sequence[EngineName] = (EngineName.HARNESS,),
    repetitions: int = 1,
    block_size: int = DEFAULT_BLOCK_SIZE,
    precision_mode: PrecisionMode = PrecisionMode.STANDARD,
    seed: int = 0,
    webnn_device: str = "cpu",
    act_bits: Sequence[int] = (32,),
    observer: str | Sequence[str] = DEFAULT_OBSERVER,
) -> list[RunSpec]:
    """Validate everything up front (bad bits, shapes, block sizes, engine/platform pairs no
    engine can run fail before any launch). ``act_bits`` 8 adds int8-activation runs for the
    8- and 4-bit weights (W8A8, W4A8), one per ``observer`` (a name or several), side by side."""
    from .engines import engine_for, engines_for_platform

    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, got {repetitions}")
    if webnn_device not in WEBNN_DEVICES:
        raise ValueError(f"WebNN device {webnn_device!r} is not one of {', '.join(WEBNN_DEVICES)}")
    if block_size <= 0:
        raise ValueError(f"block size must be positive, got {block_size}")
    bits = [parse_bits(b) for b in bits]
    act_bits = list(dict.fromkeys(int(a) for a in act_bits))
    observers = list(dict.fromkeys([observer] if isinstance(observer, str) else observer))
    unknown = [a for a in act_bits if a not in ACT_BITS]
    if unknown or not act_bits:
        raise ValueError(f"activation bits {unknown[0] if unknown else 'none'}: use 32 (float) or 8 (int8)")
    if 8 in act_bits:
        if not any(b in ACT8_WEIGHT_BITS for b in bits):
            raise ValueError("--act-bits 8 runs int8 activations with 8- or 4-bit weights (W8A8, W4A8): "
                             "add --bits 8 or 4")
        from .precision.observers import OBSERVERS

        unknown_observers = [o for o in observers if o not in OBSERVERS]
        if unknown_observers or not observers:
            raise ValueError(f"observer {unknown_observers[0] if unknown_observers else 'none'!r} is "
                             f"not one of {', '.join(OBSERVERS)}")
    for workload in workloads:
        for b in bits:
            workload.validate(b, block_size)
    pairs = [(e, p) for e in dict.fromkeys(engines) for p in dict.fromkeys(platforms)
             if engine_for(e, p) is not None]
    for platform in dict.fromkeys(platforms):
        if not any(p == platform for _, p in pairs):
            runs_it = ", ".join(str(e) for e in engines_for_platform(platform)) or "none"
            raise ValueError(f"no chosen engine runs platform {platform} (engines that do: {runs_it})")
    runs: list[RunSpec] = []
    for rep in range(repetitions):
        for browser in dict.fromkeys(browsers):
            for workload in dict.fromkeys(workloads):
                for b in dict.fromkeys(bits):
                    activations = [(a, o) for a in act_bits for o in (observers if a != 32 else [""])
                                   if a == 32 or b in ACT8_WEIGHT_BITS]  # int8: 8/4-bit weights only
                    for acts, obs in activations:
                        for engine, platform in pairs:
                            runs.append(RunSpec(
                                run_id=len(runs), browser=browser, engine=engine, platform=platform,
                                workload=workload, bits=b, block_size=block_size, repetition=rep,
                                precision_mode=precision_mode, seed=seed, webnn_device=webnn_device,
                                act_bits=acts, observer=obs,
                            ))
    return runs


PLAN_FILE = "plan.json"


def save_plan(directory: Path, runs: Sequence[RunSpec], timing: TimingConfig) -> Path:
    """Write the plan beside the results so an interrupted sweep can be resumed exactly."""
    path = directory / PLAN_FILE
    doc = {
        "schema_version": SCHEMA_VERSION,
        "timing": dataclasses.asdict(timing),
        "runs": [r.to_json() for r in runs],
    }
    from .results.writer import write_atomically

    write_atomically(path, json.dumps(doc, indent=1) + "\n")  # never an empty plan.json
    return path


def load_plan(directory: Path) -> tuple[list[RunSpec], TimingConfig]:
    path = directory / PLAN_FILE
    if not path.is_file():
        raise ValueError(f"{directory} has no {PLAN_FILE}: not a results folder that can be resumed")
    try:
        doc = json.loads(path.read_text())
        if int(doc.get("schema_version", 0)) > SCHEMA_VERSION:
            raise ValueError(f"{path}: schema version {doc['schema_version']} is newer than this "
                             f"tool understands ({SCHEMA_VERSION})")
        return [RunSpec.from_json(r) for r in doc["runs"]], TimingConfig(**doc["timing"])
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a readable plan ({type(exc).__name__}: {exc})") from None

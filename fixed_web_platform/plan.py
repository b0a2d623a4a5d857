"""The whole sweep is listed before any browser starts: browsers x shapes x bits x reps x platforms
(platforms innermost, so WebGPU and WebNN runs of one configuration sit side by side)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

from .specs import (
    DEFAULT_BLOCK_SIZE,
    SCHEMA_VERSION,
    SUPPORTED_BITS,
    WEBNN_DEVICES,
    BrowserName,
    Platform,
    PrecisionMode,
    RunSpec,
    TimingConfig,
    Workload,
)
from .workloads import validate_shape

_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def parse_shape(text: str) -> Workload:
    """'MxKxN' -> Workload; ValueError with one clear line otherwise."""
    match = _SHAPE.match(text.strip().lower())
    if not match:
        raise ValueError(f"shape {text!r} is not MxKxN (three positive integers, e.g. 1x768x3072)")
    m, k, n = (int(g) for g in match.groups())
    if min(m, k, n) <= 0:
        raise ValueError(f"shape {text!r}: every dimension must be a positive integer")
    return Workload(f"custom-{m}x{k}x{n}", m, k, n)


def build_plan(
    browsers: Sequence[BrowserName],
    platforms: Sequence[Platform],
    workloads: Sequence[Workload],
    bits: Sequence[int],
    *,
    repetitions: int = 1,
    block_size: int = DEFAULT_BLOCK_SIZE,
    precision_mode: PrecisionMode = PrecisionMode.STANDARD,
    seed: int = 0,
    webnn_device: str = "cpu",
) -> list[RunSpec]:
    """Validate everything up front (bad bits, shapes, block sizes fail before any launch)."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, got {repetitions}")
    if webnn_device not in WEBNN_DEVICES:
        raise ValueError(f"WebNN device {webnn_device!r} is not one of {', '.join(WEBNN_DEVICES)}")
    if block_size <= 0:
        raise ValueError(f"block size must be positive, got {block_size}")
    for b in bits:
        if b not in SUPPORTED_BITS:
            raise ValueError(f"bits {b} is not supported; choose from {' '.join(map(str, SUPPORTED_BITS))}")
    for workload in workloads:
        for b in bits:
            validate_shape(workload, b, block_size)
    runs: list[RunSpec] = []
    for browser in dict.fromkeys(browsers):
        for workload in dict.fromkeys(workloads):
            for b in dict.fromkeys(bits):
                for rep in range(repetitions):
                    for platform in dict.fromkeys(platforms):
                        runs.append(
                            RunSpec(
                                run_id=len(runs),
                                browser=browser,
                                platform=platform,
                                workload=workload,
                                bits=b,
                                block_size=block_size,
                                repetition=rep,
                                precision_mode=precision_mode,
                                seed=seed,
                                webnn_device=webnn_device,
                            )
                        )
    return runs


PLAN_FILE = "plan.json"


def save_plan(directory: Path, runs: Sequence[RunSpec], timing: TimingConfig) -> Path:
    """Write the plan beside the results so an interrupted sweep can be resumed exactly."""
    path = directory / PLAN_FILE
    doc = {
        "schema_version": SCHEMA_VERSION,
        "timing": dataclasses.asdict(timing),
        "runs": [dataclasses.asdict(r) for r in runs],
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")
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
        return _runs_from(doc["runs"]), TimingConfig(**doc["timing"])
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a readable plan ({type(exc).__name__}: {exc})") from None


def _runs_from(items: list[dict]) -> list[RunSpec]:
    return [
        RunSpec(
            **{
                **r,
                "browser": BrowserName(r["browser"]),
                "platform": Platform(r["platform"]),
                "precision_mode": PrecisionMode(r["precision_mode"]),
                "workload": Workload(**r["workload"]),
            }
        )
        for r in items
    ]

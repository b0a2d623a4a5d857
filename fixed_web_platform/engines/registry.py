"""The explicit registry of engines: one line per (engine, platform) the harness can run."""

from __future__ import annotations

from .base import Engine
from .ort_web import OrtWasm, OrtWebGpu, OrtWebNN
from .webnn import WebnnEngine
from .wgsl import WgslEngine
from ..vocabulary import EngineName, Platform

ENGINES: tuple[Engine, ...] = (
    WgslEngine(),
    WebnnEngine(),
    OrtWebGpu(),
    OrtWebNN(),
    OrtWasm(),
)


def engine_for(name: EngineName, platform: Platform) -> Engine | None:
    return next((e for e in ENGINES if e.name is name and e.platform is platform), None)


def engines_for_platform(platform: Platform) -> list[EngineName]:
    return [e.name for e in ENGINES if e.platform is platform]

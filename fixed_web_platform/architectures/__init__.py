"""Model architectures (plug-ins, see base.py), registered here by name. A model's transformers
``model_type`` picks its architecture; the architecture names the workload kind that runs it."""

from __future__ import annotations

from .base import ActQuant, ArchConfig, Architecture, DecoderArchitecture, DecoderConfig, LinearLayer
from .bert import BERT
from .gemma3 import GEMMA3
from .llama import LLAMA
from .whisper import WHISPER

ARCHITECTURES: tuple[Architecture, ...] = (
    BERT,
    LLAMA,
    GEMMA3,
    WHISPER,
)


def architecture_for(model_type: str, where: str) -> Architecture:
    """The architecture that reads transformers' ``model_type``; ValueError (one line) otherwise."""
    for arch in ARCHITECTURES:
        if model_type in arch.model_types:
            return arch
    known = ", ".join(t for a in ARCHITECTURES for t in a.model_types)
    raise ValueError(f"{where}: architecture {model_type!r} is not supported (supported: {known})")


__all__ = ["ARCHITECTURES", "ActQuant", "ArchConfig", "Architecture", "DecoderArchitecture", "DecoderConfig", "LinearLayer",
           "architecture_for"]

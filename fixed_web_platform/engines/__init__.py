"""Engines: who builds the work for the page (see base.py), listed in registry.py."""

from .registry import ENGINES, engine_for, engines_for_platform

__all__ = ["ENGINES", "engine_for", "engines_for_platform"]

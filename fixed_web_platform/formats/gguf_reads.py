"""One parse of a GGUF file per process, shared by every reader of it.

gguf's ``GGUFReader`` parses every metadata field in Python: about 4 s for SmolLM2-135M's file
(its tokenizer's 49,152 tokens and merges), on every construction. transformers constructs one
for a GGUF model's configuration, another for its weights and another for its tokenizer, and the
wllama engine one per file it inspects or re-writes: seven parses of the same four files in one
wllama sweep. ``shared_reader`` keeps one reader per file (read-only memory maps; the key holds
the file's size and modification time, so a file re-written in place is parsed again), and
``readers_shared`` lets transformers' own calls use it.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_depth = 0
_original: Any = None


def shared_reader(path: str | Path) -> Any:
    """gguf.GGUFReader(path), parsed once per (file, size, modification time)."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    return _parsed(resolved, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, size: int, mtime_ns: int) -> Any:  # noqa: ARG001 - size and time are the key
    import gguf

    return (_original or gguf.GGUFReader)(str(path))


def _reader_for(path: str | Path, mode: str = "r") -> Any:
    return shared_reader(path) if mode == "r" else _original(path, mode)


@contextlib.contextmanager
def readers_shared() -> Iterator[None]:
    """While inside, ``gguf.GGUFReader(path)`` (what transformers calls) answers with
    ``shared_reader(path)``. Safe across threads: the first to enter installs it, the last to
    leave restores gguf's own."""
    global _depth, _original
    import gguf

    with _lock:
        if _depth == 0:
            _original = gguf.GGUFReader
            gguf.GGUFReader = _reader_for
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gguf.GGUFReader = _original

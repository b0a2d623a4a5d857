"""Files replaced whole or not at all: the one rule for every file the harness writes that a
reader may open at any moment (results, plans, the caches of exports, GGUF files and clips).

Each write goes to a partial file of its own beside the target (a unique name: two sweeps, or
two test workers, filling the same cache entry at once never write into one file) and is renamed
onto the target when complete; a failed write leaves the target as it was and no partial file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A fresh partial path to write ``path``'s new content to; renamed onto ``path`` when the
    block ends without an error, removed otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    os.close(fd)
    partial = Path(name)
    try:
        os.chmod(partial, 0o644)
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole, or is left as it was."""
    with replacing(path) as partial, partial.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


CACHE_LIMIT_ENV = "FWP_CACHE_GB"
"""The most gigabytes of ONNX files the export and variant caches keep (default ``CACHE_LIMIT_GB``)."""
CACHE_LIMIT_GB = 12.0


def used(path: Path) -> Path:
    """Mark a cache entry as just used (its modification time), so ``prune`` keeps recent ones."""
    with contextlib.suppress(OSError):
        os.utime(path)
    return path


def prune(directory: Path, keep: Path, limit_bytes: int | None = None) -> list[Path]:
    """Delete the least recently used ``.onnx`` files under ``directory`` (each with its ``.json``
    and its external data ``.onnx.data`` beside) until the rest fit ``limit_bytes`` (default: ``FWP_CACHE_GB``, else CACHE_LIMIT_GB);
    ``keep`` (the entry just made) stays. The files deleted, oldest first."""
    if limit_bytes is None:
        limit_bytes = int(float(os.environ.get(CACHE_LIMIT_ENV) or CACHE_LIMIT_GB) * 2**30)
    entries = []
    for path in directory.rglob("*.onnx"):
        with contextlib.suppress(OSError):  # gone meanwhile (another process pruning)
            st = path.stat()
            data = path.with_name(f"{path.name}.data")
            entries.append((st.st_mtime, st.st_size + (data.stat().st_size if data.is_file() else 0), path))
    total = sum(size for _, size, _ in entries)
    gone = []
    for _, size, path in sorted(entries):
        if total <= limit_bytes:
            break
        if path == keep:
            continue
        path.unlink(missing_ok=True)
        path.with_suffix(".json").unlink(missing_ok=True)
        path.with_name(f"{path.name}.data").unlink(missing_ok=True)
        total -= size
        gone.append(path)
    return gone

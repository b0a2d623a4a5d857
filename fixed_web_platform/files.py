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

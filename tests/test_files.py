"""Files replaced whole or not at all (fixed_web_platform/files.py), by two writers at once too:
two sweeps or two test workers filling one cache entry; the ONNX cache kept within its limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixed_web_platform.files import prune, replacing, used, write_bytes_atomically


def test_two_writers_of_one_file_at_once_each_write_their_own_partial(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "entry.onnx"
    with replacing(target) as first, replacing(target) as second:
        assert first != second and first.parent == second.parent == target.parent
        first.write_bytes(b"a" * 1000)
        second.write_bytes(b"b" * 10)
        assert not target.exists()  # nothing is seen before a write is complete
    assert target.read_bytes() == b"a" * 1000  # the last to finish wins, whole
    assert [p.name for p in target.parent.iterdir()] == ["entry.onnx"]


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path: Path) -> None:
    target = tmp_path / "clip00.wav"
    write_bytes_atomically(target, b"old")
    with pytest.raises(RuntimeError), replacing(target) as partial:
        partial.write_bytes(b"half")
        raise RuntimeError("espeak-ng died")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["clip00.wav"]


def test_the_onnx_cache_keeps_the_recently_used_within_its_limit(tmp_path: Path) -> None:
    """The least recently used files go first (a hit counts as use), each with its .json; the
    entry just made stays even when it is the oldest; an entry's external data counts and goes with it."""
    names = ["a", "b", "c", "d"]
    for i, name in enumerate(names):  # a is the oldest, d the newest
        path = tmp_path / "sub" / f"{name}.onnx" if name == "b" else tmp_path / f"{name}.onnx"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * 1000)
        path.with_suffix(".json").write_text("{}")
        os.utime(path, (1000 + i, 1000 + i))
    (tmp_path / "d.onnx.data").write_bytes(b"x" * 1000)  # d's external data: counted, and goes with it
    used(tmp_path / "c.onnx")  # a hit: now the most recent
    assert prune(tmp_path, keep=tmp_path / "a.onnx", limit_bytes=4500) == [tmp_path / "sub" / "b.onnx"]
    gone = prune(tmp_path, keep=tmp_path / "a.onnx", limit_bytes=2500)
    assert [p.name for p in gone] == ["d.onnx"]
    assert sorted(p.name for p in tmp_path.rglob("*.*")) == ["a.json", "a.onnx", "c.json", "c.onnx"]
    assert prune(tmp_path, keep=tmp_path / "c.onnx", limit_bytes=10**6) == []

"""Files replaced whole or not at all (fixed_web_platform/files.py), by two writers at once too:
two sweeps or two test workers filling one cache entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixed_web_platform.files import replacing, write_bytes_atomically


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

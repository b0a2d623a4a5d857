"""formats/gguf_reads.py: a GGUF file is parsed once per process, by the harness and by
transformers' calls alike, and again when the file changes."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

from fixed_web_platform.formats.gguf_reads import readers_shared, shared_reader


def _write(path: Path, value: float) -> Path:
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tensor("w", np.full((4, 32), value, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_one_parse_per_file_shared_with_transformers_calls_and_a_new_one_when_it_changes(tmp_path):
    path = _write(tmp_path / "a.gguf", 1.0)
    first = shared_reader(path)
    assert shared_reader(str(path)) is first
    original = gguf.GGUFReader
    with readers_shared(), readers_shared():  # nested, as a configuration read inside a weights read
        assert gguf.GGUFReader(str(path)) is first
    assert gguf.GGUFReader is original  # restored once the last one leaves
    _write(path, 2.0)
    os.utime(path, ns=(1, 1))  # a new modification time, whatever the clock's resolution
    again = shared_reader(path)
    assert again is not first and float(again.tensors[0].data[0, 0]) == 2.0

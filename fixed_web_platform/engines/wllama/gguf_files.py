"""GGUF files for llama.cpp (wllama): a model's own GGUF re-written at one of llama.cpp's weight
formats (Q8_0, Q4_0, Q4_1, F16, F32) with the PyPI package ``gguf`` (its numpy quantizers), every
other field (architecture, tokenizer, chat template) copied as it was.

Two-dimensional weight tensors are dequantized from their stored format and quantized to the
target; one-dimensional tensors (norms) stay float32, as llama.cpp's own converter leaves them.
These are llama.cpp's formats, not the harness's bytes: rows name the format, and are judged by
the same accuracy figures against PyTorch fp32.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ...files import replacing
from ...models import source
from ...models.gguf_reads import shared_reader

FORMATS = {"Q8_0": 8, "Q4_0": 4, "Q4_1": 4, "F16": 16, "F32": 32}
"""llama.cpp weight format -> the bits it stands for in a sweep's --bits."""
SHIPPED = "shipped"
"""The format name of the model's own GGUF file, as its package ships it."""
FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7}
"""``general.file_type`` (llama.cpp's LlamaFileType) of each format."""


class GgufError(ValueError):
    """A GGUF file that cannot be read or re-written (one line for the user)."""


def tensor_types(path: Path) -> dict[str, str]:
    """Tensor name -> its stored format ('Q4_1', 'F32', ...), from the file's one parse
    (models/gguf_reads.py)."""
    return {t.name: t.tensor_type.name for t in _reader(path).tensors}


def requantize(source: Path, target: Path, fmt: str) -> Path:
    """``source``'s model written to ``target`` with its weight matrices in ``fmt``."""
    if fmt not in FORMATS:
        raise GgufError(f"format {fmt} is not one of {', '.join(FORMATS)}")
    reader = _reader(source)
    with replacing(target) as partial:
        _write_requantized(reader, fmt, partial)
    return target


def _write_requantized(reader: Any, fmt: str, partial: Path) -> None:
    import gguf

    qtype = gguf.GGMLQuantizationType[fmt]
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(partial), arch=arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value = FILE_TYPES[fmt] if field.name == gguf.Keys.General.FILE_TYPE else field.contents()
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, field.types[0], sub_type=sub)
    block, _ = gguf.GGML_QUANT_SIZES[qtype]
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if values.ndim == 2 and values.shape[-1] % block == 0 and fmt != "F32":
            data = values.astype(np.float16) if fmt == "F16" else gguf.quants.quantize(values, qtype)
            writer.add_tensor(tensor.name, data, raw_dtype=qtype)
        else:
            writer.add_tensor(tensor.name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _reader(path: Path):  # noqa: ANN202 - gguf.GGUFReader, imported lazily
    try:
        return shared_reader(path)
    except Exception as exc:  # noqa: BLE001 - whatever the reader says, one line
        raise GgufError(f"GGUF file {path.name} does not parse ({str(exc).strip().splitlines()[0][:160]})") from None


def model_file(model: str, random_weights: bool) -> Path | None:
    """The model's own GGUF file, or None (not a GGUF model, or random weights)."""
    if random_weights:
        return None
    resolved = source.resolve(model, False)
    if not resolved.gguf_file or resolved.folder is None:
        return None
    return resolved.folder / resolved.gguf_file


@functools.lru_cache(maxsize=8)
def shipped_format(model: str, random_weights: bool) -> str:
    """The llama.cpp format the model's own GGUF file is stored in ('Q4_1'), '' for a model that
    is not a GGUF file or whose file type is not one of ``FORMATS``."""
    import gguf

    path = model_file(model, random_weights)
    if path is None:
        return ""
    field = _reader(path).fields.get(gguf.Keys.General.FILE_TYPE)
    if field is None:
        return ""
    names = {v: k for k, v in FILE_TYPES.items()}
    return names.get(int(field.contents()), "")


def weight_bytes(path: Path) -> tuple[int, int]:
    """(bytes the file's tensors hold, bytes they would hold in float32)."""
    tensors = _reader(path).tensors
    return sum(int(t.n_bytes) for t in tensors), sum(int(t.n_elements) * 4 for t in tensors)


def file_for(source_file: Path, fmt: str, folder: Path) -> Path:
    """The GGUF a run loads: ``source_file`` as shipped (``fmt == shipped``) or re-written at
    ``fmt``, in ``folder`` (written once; the name carries the source's size and time)."""
    stat = source_file.stat()
    key = hashlib.sha256(f"{source_file.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = folder / f"{source_file.stem}-{key}-{fmt}.gguf"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == SHIPPED:
        with replacing(target) as partial:
            shutil.copyfile(source_file, partial)
        return target
    return requantize(source_file, target, fmt)

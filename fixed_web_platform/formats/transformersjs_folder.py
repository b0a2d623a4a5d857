"""Model folders in transformers.js's layout: what a folder holds, and whether transformers.js
would load it (a user's own, ``--model DIR``; the harness makes its own in
engines/transformersjs/folders.py).

transformers.js loads, from ``<localModelPath>/<model id>/``: ``config.json`` (required), the
tokenizer (``tokenizer.json`` with ``tokenizer_config.json``) and what the pipeline reads besides
(``generation_config.json``, ``preprocessor_config.json``), and ``onnx/<graph><suffix>.onnx``, the
suffix naming the dtype (``DTYPE_SUFFIX``, from its ``src/utils/dtypes.js``) and the graphs the
model's kind (``GRAPHS``). A graph over 2 GB keeps its weights beside it in external data
chunks ``onnx/<graph><suffix>.onnx_data``, ``..._data_1``, ... (``data_chunk``), which the library
loads when told how many (its ``use_external_data_format`` option, a file name -> chunk count).
A folder with an ``onnx/`` subfolder of ``.onnx`` files is such a folder, whether or not it holds
weights too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

DTYPE_SUFFIX = {"fp32": "", "fp16": "_fp16", "q8": "_quantized", "int8": "_int8", "uint8": "_uint8",
                "q4": "_q4", "q4f16": "_q4f16", "bnb4": "_bnb4"}
"""transformers.js's dtypes (the ones it makes files for at 32, 16, 8 and 4 bits) -> file suffix."""
DTYPES = tuple(DTYPE_SUFFIX)
CONFIG = "config.json"
ONNX_DIR = "onnx"
GRAPHS = {"encoder": ("model",), "decoder": ("model",), "speech": ("encoder_model", "decoder_model_merged")}
"""The graphs a model of each workload kind loads (transformers.js's encoder-only and decoder-only
models: ``model``; Whisper: its encoder and the merged decoder)."""
SUPPORT_SUFFIXES = (".json", ".txt", ".model", ".jinja")
"""Files beside the graphs a page may fetch (config, tokenizer, generation and preprocessor
settings); weights are never served."""


class FolderError(ValueError):
    """A folder transformers.js would not load (one line for the user)."""


def file_name(graph: str, dtype: str) -> str:
    return f"{ONNX_DIR}/{graph}{DTYPE_SUFFIX[dtype]}.onnx"


def data_chunk(graph_file: str, index: int) -> str:
    """The ``index``-th external data chunk of ``graph_file`` as transformers.js names it
    ('onnx/model.onnx_data', 'onnx/model.onnx_data_1')."""
    return f"{graph_file}_data{'' if index == 0 else f'_{index}'}"


def is_folder(path: str | Path) -> bool:
    """A folder in transformers.js's layout: an ``onnx/`` subfolder holding ``.onnx`` files."""
    folder = Path(path).expanduser()
    return bool(str(path)) and folder.is_dir() and any((folder / ONNX_DIR).glob("*.onnx"))


@dataclass(frozen=True)
class ModelFolder:
    """A model in transformers.js's layout: relative name -> file."""

    files: dict[str, Path]
    graphs: tuple[str, ...]
    """The ONNX graphs a model of its kind loads (``GRAPHS``)."""
    made_by: str
    """'the harness (<how>)' or 'the user's folder <path>'."""

    def dtype_files(self, dtype: str) -> list[str]:
        return [file_name(g, dtype) for g in self.graphs]

    def graph_files(self, dtype: str) -> dict[str, Path]:
        """The dtype's graphs by name ('onnx/model_q4.onnx'); KeyError for one the folder lacks."""
        return {f: self.files[f] for f in self.dtype_files(dtype)}

    def lacks(self, dtype: str) -> list[str]:
        return [f for f in self.dtype_files(dtype) if f not in self.files]

    def dtypes(self) -> tuple[str, ...]:
        """The dtypes whose every graph the folder holds."""
        return tuple(d for d in DTYPES if not self.lacks(d))

    def support_files(self) -> dict[str, Path]:
        """What every dtype loads beside its graphs (config and tokenizer)."""
        return {n: p for n, p in self.files.items() if not n.startswith(f"{ONNX_DIR}/")}

    def data_chunks(self, dtype: str) -> dict[str, int]:
        """The dtype's graphs with external data, by file name ('model_q4.onnx') -> how many chunks
        the folder holds (transformers.js's ``use_external_data_format``)."""
        counts = {}
        for graph_file in self.dtype_files(dtype):
            n = 0
            while data_chunk(graph_file, n) in self.files:
                n += 1
            if n:
                counts[graph_file.removeprefix(f"{ONNX_DIR}/")] = n
        return counts

    def for_dtype(self, dtype: str) -> dict[str, Path]:
        """The files a page loading ``dtype`` fetches (its graphs' external data chunks too)."""
        chunks = [data_chunk(f"{ONNX_DIR}/{name}", i) for name, n in self.data_chunks(dtype).items() for i in range(n)]
        return self.support_files() | {f: self.files[f] for f in (*self.dtype_files(dtype), *chunks)
                                       if f in self.files}


def read(path: str | Path, kind: str) -> ModelFolder:
    """A user's folder as transformers.js would load it for a model of workload ``kind``;
    FolderError (one line) when it would not: no ``config.json``, or an ``onnx/`` holding no
    file of the kind's graphs at any dtype, or a float graph (``model.onnx``) that does not parse."""
    folder = Path(path).expanduser().resolve()
    if not (folder / CONFIG).is_file():
        raise FolderError(f"model folder {path} is in transformers.js's layout (onnx/*.onnx) but has no {CONFIG}, "
                          "which transformers.js loads first")
    graphs = GRAPHS.get(kind)
    if graphs is None:
        raise FolderError(f"model folder {path}: transformers.js folders of {kind} models are not run here "
                          f"(kinds: {', '.join(GRAPHS)})")
    files = {p.name: p for p in sorted(folder.iterdir()) if p.is_file() and p.suffix in SUPPORT_SUFFIXES}
    known = {file_name(g, d) for g in graphs for d in DTYPES}
    files |= {f"{ONNX_DIR}/{p.name}": p for p in sorted((folder / ONNX_DIR).glob("*.onnx"))
              if f"{ONNX_DIR}/{p.name}" in known}
    files |= {f"{ONNX_DIR}/{p.name}": p for p in sorted((folder / ONNX_DIR).glob("*.onnx_data*"))
              if f"{ONNX_DIR}/{p.name}".partition(".onnx_data")[0] + ".onnx" in known}
    made = ModelFolder(files, graphs, f"the user's folder {folder}")
    for name in (file_name(g, "fp32") for g in graphs):  # the float graphs the harness reads itself
        file = files.get(name)
        stat = file.stat() if file is not None else None
        why = _unparsable(str(file), stat.st_size, stat.st_mtime_ns) if stat is not None else ""
        if why:
            raise FolderError(f"model folder {path}: {name} is not an ONNX model ({why}); the harness reads it "
                              "as the folder's float graph")
    if not made.dtypes():
        present = ", ".join(sorted(p.name for p in (folder / ONNX_DIR).glob("*.onnx")))
        raise FolderError(f"model folder {path}: onnx/ holds no file transformers.js would load for a model of "
                          f"the {kind} kind (it loads {' and '.join(file_name(g, 'fp32') for g in graphs)} or "
                          f"their dtype variants such as {file_name(graphs[0], 'q4')}; found: {present})")
    return made


@functools.lru_cache(maxsize=64)
def _unparsable(path: str, size: int, mtime_ns: int) -> str:
    """Why onnx cannot parse the file ('' when it can), once per file content on disk (``size``
    and ``mtime_ns`` key the cache): a corrupt float graph is refused before any browser starts (a
    corrupt file of another dtype is the library's to fail on, in that dtype's row)."""
    import onnx

    try:
        onnx.load(path, load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf's and onnx's errors alike
        first = str(exc).splitlines()[0][:200] if str(exc) else "unreadable"
        return f"{type(exc).__name__}: {first}"
    return ""

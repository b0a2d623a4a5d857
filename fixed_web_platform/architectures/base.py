"""What a model architecture is to the harness: a plug-in that knows where its weights come from
offline, its configuration, the names and shapes of its linear layers (what precision rules,
sensitivity probes and calibration address), its PyTorch module (the fp32 reference and the ONNX
export) and its float64 numpy forward (the kernel-correctness reference).

An architecture is run by one workload kind (``kind``: BERT by ``encoder``); the kind asks the
architecture for the parts of a forward pass it needs. Adding one: a package
``architectures/<name>/`` with an ``Architecture`` subclass, and one line in
``architectures/__init__.py``'s ``ARCHITECTURES``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

ActQuant = dict[str, Any]
"""Layer name -> how its input is held in int8: (scale, zero point[, per token]) calibrated
ahead, or a function x -> x as the engine's kernels hold it (a dynamic rule of the engine's own,
e.g. engines/ort/dp4a.held_activations); layers not named keep float inputs."""
DECODER_ATTENTION_LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")
DECODER_FFN_LINEARS = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
DECODER_HEAD = "lm_head"
"""A Hugging Face causal LM's linear layers by role (each layer's name after ``model.layers.<i>.``)."""

OUTPUT_QUANT = ":output"
"""An ActQuant key ``<layer>:output`` -> (scale, zero point, output channels kept in float)
quantizes that layer's x @ W^T (before its bias) to int8 too: the WebNN form whose output goes
through quantizeLinear -> dequantizeLinear (models/calibration.OutputQuant)."""


@dataclass(frozen=True)
class SmoothingGroup:
    """Linear layers that read one activation, and the weight that writes it, for SmoothQuant's
    migration (models/smoothing.py): the activation's channel j divided by s_j (``producer``: a
    norm's weight [K], and its bias ``producer_bias`` if it has one, or a linear layer's weight
    rows [K, ...] when ``producer_rows``), each ``consumers`` layer's weight column j multiplied by
    s_j. The float model computes the same; the activation's outlier channels are smaller where
    int8 holds it."""

    producer: str
    consumers: tuple[str, ...]
    producer_rows: bool = False
    producer_bias: str = ""
    producer_offset: float = 0.0
    """A norm that scales by (offset + weight) (Gemma's 1 + weight): its weight becomes
    (offset + weight) / s - offset."""


@dataclass(frozen=True)
class LinearLayer:
    """y = x @ W^T + b with W [n, k] (Hugging Face's Linear layout, the harness's W[N, K])."""

    name: str
    kind: str
    """The layer's role ('attention', 'ffn', ...): what sensitivity probes group by."""
    k: int
    n: int


class ArchConfig(Protocol):
    """An architecture's configuration, as the rest of the harness reads it."""

    @property
    def max_positions(self) -> int: ...

    def linear_layers(self) -> list[LinearLayer]:
        """Every weight matrix that precision applies to, in forward order."""

    def to_json(self) -> dict[str, Any]: ...

    @property
    def parameters(self) -> int: ...


class DecoderConfig(ArchConfig, Protocol):
    """A decoder LLM's configuration, as the decoder kind and its engines read it (an
    architecture's config adds what only its own graph and reference read)."""

    @property
    def layers(self) -> int: ...

    @property
    def hidden(self) -> int: ...

    @property
    def heads(self) -> int: ...

    @property
    def kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def q_dim(self) -> int: ...

    @property
    def kv_dim(self) -> int: ...

    @property
    def intermediate(self) -> int: ...

    @property
    def vocab(self) -> int: ...

    @property
    def tied(self) -> bool:
        """The head's weights are the embedding table's (checkpoints store them once)."""


class Architecture(ABC):
    name: ClassVar[str]
    """The registry key ('bert')."""
    kind: ClassVar[str]
    """The workload kind that runs it (workloads/<kind>): 'encoder' for BERT."""
    model_types: ClassVar[tuple[str, ...]]
    """transformers' ``model_type`` values this architecture reads."""
    packaged: ClassVar[Mapping[str, tuple[str, str]]] = {}
    """Models with real weights inside an installed Python package: name -> (package, folder)."""
    substitutes: ClassVar[Mapping[str, str]] = {}
    """Names whose weights are not on these machines -> the packaged model run in their place
    (same architecture and size), with a notice, unless random weights are asked for."""
    config_only: ClassVar[tuple[str, ...]] = ()
    """Names known without files (transformers' config defaults): usable with random weights only."""
    layer_kinds: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    """Layer role -> the layer-name suffixes of that role (sensitivity probes group by role)."""
    layer_labels: ClassVar[Mapping[str, str]] = {}
    """Layer-name suffix -> what a reader calls all of them ('query projections')."""
    role_labels: ClassVar[Mapping[str, str]] = {}
    """Layer role -> its label in a block probe ('layer 3 FFN')."""
    ctranslate2_spec: ClassVar[str] = ""
    """The CTranslate2 spec name ('WhisperSpec') whose model.bin files this architecture reads
    (formats/ctranslate2.py); '' for none."""
    weight_prefix: ClassVar[str] = ""
    """Prefix that checkpoints put before the names the harness uses (stripped on load)."""

    @abstractmethod
    def config(self, hf_config: Any, where: str) -> ArchConfig:
        """From a transformers config object; ValueError (one line) for what the harness cannot run."""

    @abstractmethod
    def default_hf_config(self, name: str) -> Any:
        """The transformers config of a ``config_only`` name."""

    def ctranslate2_config(self, model: Any) -> Any:
        """The transformers config of a CTranslate2 model of ``ctranslate2_spec``."""
        raise NotImplementedError(f"the {self.name} architecture reads no CTranslate2 files")

    def ctranslate2_weights(self, model: Any) -> dict[str, np.ndarray]:
        """A CTranslate2 model's tensors under the harness's names, float32."""
        raise NotImplementedError(f"the {self.name} architecture reads no CTranslate2 files")

    @abstractmethod
    def graph(self, cfg: Any, **shapes: int) -> Any:
        """The forward passes of the architecture's loop as ops (``ops.Graph``, written once in
        ``<name>/graph.py``), at the loop's shapes (BERT: batch, seq; Llama: prompt_len, eval_len,
        context, eos; Whisper: none), for the engines to lower."""

    @abstractmethod
    def required_weights(self, cfg: Any) -> list[str]:
        """Every tensor name the forward pass reads (the harness's names, prefix stripped)."""

    @abstractmethod
    def random_weights(self, cfg: Any, seed: int) -> dict[str, np.ndarray]:
        """Seeded float32 weights in the architecture's own initialisation scheme."""

    def complete_weights(self, cfg: Any, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Weights a checkpoint leaves out because they are another's (a tied head); as given here."""
        return weights

    @abstractmethod
    def torch_module(self, cfg: Any, weights: Mapping[str, np.ndarray]) -> Any:
        """The transformers module holding exactly ``weights`` (eval mode, CPU)."""

    @abstractmethod
    def reference_forward(self, cfg: Any, weights: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray],
                          act_quant: ActQuant | None = None) -> np.ndarray:
        """The float64 numpy forward on named inputs (the kernel-correctness reference): with the
        weights an engine holds and, for int8 activations, each named layer's input quantized."""

    @abstractmethod
    def linear_modules(self, module: Any) -> dict[str, Any]:
        """Layer name -> the torch.nn.Linear of ``module`` (what calibration hooks observe)."""

    def smoothing_groups(self, cfg: Any) -> tuple[SmoothingGroup, ...]:
        """The layers whose int8 inputs SmoothQuant may smooth, by the weight their input's scale
        folds into; none here (int8 inputs as they come)."""
        return ()


class DecoderArchitecture(Architecture):
    """A decoder LLM architecture (run by the ``decoder`` kind): what the kind and its engines ask
    of it beyond an architecture's graph and reference, so none of them reads one architecture's
    modules directly. Tensor names are Hugging Face's causal LMs' (``embedding``, ``head``); a tied
    head is a layer of its own for precision purposes (its own copy of the embeddings)."""

    kind = "decoder"
    embedding: ClassVar[str] = "model.embed_tokens.weight"
    head: ClassVar[str] = DECODER_HEAD
    layer_kinds: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "attention": DECODER_ATTENTION_LINEARS, "ffn": DECODER_FFN_LINEARS, "head": (DECODER_HEAD,)}
    layer_labels: ClassVar[Mapping[str, str]] = {
        "self_attn.q_proj": "query projections (q_proj)",
        "self_attn.k_proj": "key projections (k_proj)",
        "self_attn.v_proj": "value projections (v_proj)",
        "self_attn.o_proj": "attention outputs (o_proj)",
        "mlp.gate_proj": "FFN gates (gate_proj)",
        "mlp.up_proj": "FFN up (up_proj)",
        "mlp.down_proj": "FFN down (down_proj)",
        "lm_head": "LM head (lm_head)",
    }
    role_labels: ClassVar[Mapping[str, str]] = {"attention": "attention", "ffn": "FFN", "head": "LM head"}

    @abstractmethod
    def config(self, hf_config: Any, where: str) -> DecoderConfig: ...

    @abstractmethod
    def reference_step(self, cfg: Any, weights: Mapping[str, np.ndarray], ids: Any, cache: Any = None,
                       act_quant: ActQuant | None = None) -> Any:
        """The float64 decoder (architectures/<name>/reference.py): the logits [len(ids), vocab] of
        ``ids`` after ``cache``'s positions, and the cache grown by them (kv_cache.KVCache); int8
        activations where ``act_quant`` names layers (architectures/int8.py)."""

    def reference_forward(self, cfg: Any, weights: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray],
                          act_quant: ActQuant | None = None) -> np.ndarray:
        """Logits [tokens, vocab] in float64 of one sequence (inputs: input_ids [tokens])."""
        return self.reference_step(cfg, weights, inputs["input_ids"], None, act_quant)[0]

    def reference_greedy(self, cfg: Any, weights: Mapping[str, np.ndarray], prompt: np.ndarray, new_tokens: int,
                         suppress: tuple[int, ...] = (), act_quant: ActQuant | None = None) -> list[int]:
        """The float64 decoder's ``new_tokens`` greedy ids after ``prompt`` through its KV cache
        (ids in ``suppress`` never chosen), as the engines generate."""
        from .kv_cache import greedy

        return greedy(lambda ids, cache: self.reference_step(cfg, weights, ids, cache, act_quant), prompt, new_tokens,
                      suppress)

    def complete_weights(self, cfg: Any, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A tied head's weights are the embeddings' (checkpoints store them once)."""
        if cfg.tied and f"{self.head}.weight" not in weights and self.embedding in weights:
            return weights | {f"{self.head}.weight": weights[self.embedding]}
        return weights

    def linear_modules(self, module: Any) -> dict[str, Any]:
        suffixes = tuple(s for kind, names in self.layer_kinds.items() if kind != "head" for s in names)
        return {name: m for name, m in module.named_modules() if name == self.head or name.endswith(suffixes)}

    def gguf_rows(self, cfg: Any, layer: str, rows: np.ndarray) -> np.ndarray:
        """Layer ``layer``'s weight rows (one per output, in any per-row encoding) in the order
        llama.cpp's converter stores them in a GGUF file (Llama permutes its query and key rows);
        as given here."""
        return rows

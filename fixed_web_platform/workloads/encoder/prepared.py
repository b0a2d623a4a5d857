"""A whole-model run prepared in Python: the bytes the page gets, the token ids, and the two
references its output is judged against.

- ``ref_float``: PyTorch fp32 (transformers) sentence embeddings with the model's original
  weights: what precision costs the user.
- ``ref_dequantized``: the harness's float64 numpy forward with the weights this run holds (and,
  with int8 activations, each quantized layer's input quantized with its calibrated scale and
  zero point): is the engine right.

The page's output is float32 [passes * batch, hidden]: the sentence embeddings (mean-pooled over
the attention mask, L2-normalised) of every forward pass, in order. Only the first ``count``
rows are texts; the rest fill the last batch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...architectures import ActQuant
from ...models import calibration, rules, source
from ...models.inputs import Batches, tokenize
from ...models.quantized import HeldModel, hold_model
from ...precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ..base import HeldModelFacts, TensorSpec
from ..int8_activations import Int8Check, int8_check
from . import accuracy
from .workload import EncoderConfig, EncoderWorkload

KERNEL_TOLERANCE_F32 = 1e-4
KERNEL_TOLERANCE_F16 = 2e-2
"""Relative RMS error of the output embeddings vs the float64 reference with the held weights,
beyond which the engine is wrong (f32 or f16 arithmetic through every layer)."""

INPUT_TENSORS = ("input_ids", "attention_mask", "token_type_ids")
"""int32 [passes, batch, seq] each."""
OUTPUT = "embeddings"
"""The page's one output tensor: float32 [passes * batch, hidden]."""


def mean_pool_normalize(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Sentence embeddings: mean over unmasked tokens, then unit L2 norm (sentence-transformers)."""
    mask = attention_mask[..., None].astype(np.float64)
    pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)


def embed(model: source.LoadedModel, weights: dict[str, np.ndarray], input_ids: np.ndarray,
          attention_mask: np.ndarray, token_type_ids: np.ndarray, act_quant: ActQuant | None = None) -> np.ndarray:
    """Sentence embeddings [B, H] in float64: the architecture's float64 forward, pooled."""
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    hidden = model.architecture.reference_forward(model.config, weights, inputs, act_quant)
    return mean_pool_normalize(hidden, attention_mask)


@dataclass(frozen=True, eq=False)
class PreparedModel(HeldModelFacts):
    workload: EncoderWorkload
    bits: int
    block_size: int
    held: HeldModel
    plan: tuple[rules.LayerPrecision, ...]
    batches: Batches
    ref_float: np.ndarray
    ref_dequantized: np.ndarray
    act_bits: int = 32
    observer: str = ""
    act_quant: tuple[calibration.ActivationQuant | None, ...] = ()
    """int8 activations: each plan layer's input scale and zero point (None: float input)."""
    int8: Int8Check | None = None
    """int8 activations: what they change in the kernel check (workloads/int8_activations.py)."""
    out_quant: tuple[calibration.OutputQuant | None, ...] = ()
    """int8 outputs (WebNN's fused form): each plan layer's x @ W^T scale and zero point (None:
    float output)."""

    @property
    def config(self) -> EncoderConfig:
        config = self.held.model.config
        assert isinstance(config, EncoderConfig)
        return config

    @property
    def output_shape(self) -> tuple[int, int]:
        b = self.batches
        return b.passes * b.input_ids.shape[1], self.config.hidden

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return (TensorSpec(OUTPUT, "float32", self.output_shape),)

    def input_tensors(self) -> dict[str, bytes]:
        """The token ids, int32 [passes, batch, seq] each."""
        return {name: np.ascontiguousarray(getattr(self.batches, name), dtype="<i4").tobytes()
                for name in INPUT_TENSORS}

    def tensors(self) -> dict[str, bytes]:
        """Inputs first, then every parameter tensor (page names: see models/quantized.py)."""
        return self.input_tensors() | self.held.tensors()

    def options(self) -> dict[str, Any]:
        """The part of every model job's options that all engines share."""
        b = self.batches
        return {
            "model": self.config.to_json() | {"name": self.workload.name, "batch": int(b.input_ids.shape[1]),
                                              "seq": int(b.input_ids.shape[2]), "passes": b.passes},
            "inputs": list(INPUT_TENSORS),
            "linears": [{"name": p.layer.name, "kind": p.layer.kind, "k": p.layer.k, "n": p.layer.n,
                         "bits": p.bits, "block_size": p.block if p.bits <= 8 else 0} | int8
                        for p, int8 in zip(self.plan, calibration.linear_int8(self.plan, self.act_quant,
                                                                              self.out_quant))],
            "output_rows": self.output_shape[0],
        }

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The output rows of the real texts (the batch filler dropped)."""
        return outputs[OUTPUT][: self.batches.count]

    def forward(self, weights: Mapping[str, np.ndarray], act_quant: ActQuant | None = None) -> np.ndarray:
        """The float64 reference of the judged output (the texts' embeddings) with these weights
        and int8 inputs (an int8_activations.Forward)."""
        ids, mask, tt = self.batches.flat()
        return embed(self.held.model, dict(weights), ids, mask, tt, act_quant)

    def tolerance(self, compute_dtype: str) -> float:
        base = KERNEL_TOLERANCE_F16 if compute_dtype == "f16" else KERNEL_TOLERANCE_F32
        return self.int8.tolerance(base) if self.int8 else base

    @property
    def tolerance_basis(self) -> str:
        return self.int8.basis if self.int8 else ""

    def kernel_problem(self, judged: np.ndarray) -> str:
        """A fault the tolerance alone cannot see in the judged rows (int8_activations.Int8Check)."""
        return self.int8.problem(judged, self.ref_dequantized) if self.int8 else ""

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        """Accuracy vs PyTorch fp32 and throughput: the encoder's columns of the row."""
        acc = accuracy.compare(self.judged(outputs), self.ref_float)
        b = self.batches
        per_s = 1000.0 / median_ms if median_ms else None
        return {
            "cosine_min": acc.cosine_min,
            "cosine_mean": acc.cosine_mean,
            "spearman": acc.spearman,
            "top1_agreement": acc.top1_agreement,
            "sequences_per_s": b.input_ids.shape[1] * per_s if per_s else None,
            "tokens_per_s": b.tokens * per_s if per_s else None,
        }

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """What outputs/<run_id>.npz holds: enough to recompute every accuracy figure."""
        ids, mask, tt = self.batches.flat()
        return {"embeddings": self.judged(outputs).astype(np.float32), "input_ids": ids,
                "attention_mask": mask, "token_type_ids": tt,
                "reference_pytorch_fp32": self.ref_float, "reference_dequantized_f64": self.ref_dequantized}


@functools.lru_cache(maxsize=2)
def _torch_fp32(model: source.LoadedModel, ids: bytes, mask: bytes, tt: bytes, shape: tuple[int, int]) -> np.ndarray:
    """PyTorch fp32 sentence embeddings (the architecture's transformers module with these weights)."""
    import torch

    net = model.module()
    arrays = [np.frombuffer(a, dtype=np.int32).reshape(shape) for a in (ids, mask, tt)]
    with torch.no_grad():
        hidden = net(input_ids=torch.from_numpy(arrays[0].astype(np.int64)),
                     attention_mask=torch.from_numpy(arrays[1].astype(np.int64)),
                     token_type_ids=torch.from_numpy(arrays[2].astype(np.int64))).last_hidden_state
    return mean_pool_normalize(hidden.double().numpy(), arrays[1])


def pytorch_reference(model: source.LoadedModel, ids: np.ndarray, mask: np.ndarray, tt: np.ndarray) -> np.ndarray:
    return _torch_fp32(model, ids.astype(np.int32).tobytes(), mask.astype(np.int32).tobytes(),
                       tt.astype(np.int32).tobytes(), ids.shape)


@functools.lru_cache(maxsize=4)
def prepare_model(workload: EncoderWorkload, bits: int, block_size: int, seed: int, unsigned: bool = False,
                  act_bits: int = 32, observer: str = "", out_int8: bool = False,
                  weight_quant: str = DEFAULT_QUANTIZER) -> PreparedModel:
    """Everything a model run needs in Python (cached: engines of one configuration share it).
    ``act_bits`` 8: the inputs of the 8- and 4-bit layers are int8, calibrated by ``observer``;
    ``out_int8`` too: the 8-bit layers' x @ W^T as well (WebNN's fused form). ``weight_quant``
    makes the 8/4/2-bit layers' codes (precision/quantizers.py)."""
    resolved = source.resolve(workload.model, workload.random_weights)
    loaded = source.load(resolved, workload.random_weights, seed)
    plan = tuple(rules.assign(loaded.config.linear_layers(), workload.rules, bits, block_size))
    texts = workload.calibration_texts or calibration.builtin_calibration_texts()  # never scored
    calibration_inputs = calibration.EncoderBatches(texts, workload.batch_size, workload.seq_len)
    moments = functools.partial(calibration.input_moments, loaded, calibration_inputs)
    held = hold_model(loaded, plan, unsigned, weight_quant, moments if QUANTIZERS[weight_quant].calibrated else None)
    batches = tokenize(source.tokenizer(resolved), workload.texts, workload.batch_size, workload.seq_len)
    ids, mask, tt = batches.flat()
    ref_float = pytorch_reference(loaded, ids, mask, tt)
    act_quant, out_quant, by_name = calibration.int8_parameters(loaded, calibration_inputs, plan, act_bits, observer,
                                                               out_int8)
    weights = held.exec_weights()
    ref_deq = embed(loaded, weights, ids, mask, tt, by_name or None)
    check = None
    if by_name:
        check = int8_check(lambda w, act: embed(loaded, dict(w), ids, mask, tt, act), weights, by_name, ref_deq)
    return PreparedModel(workload, bits, block_size, held, plan, batches, ref_float, ref_deq,
                         act_bits, observer if act_bits == 8 else "", act_quant, check, out_quant)

"""A decoder run prepared in Python: the bytes the page gets, the token ids, and the references
its logits are judged against.

- ``ref_float``: PyTorch fp32 (transformers) logits of every evaluation row, teacher-forced,
  with the model's float weights (for a GGUF model, its tensors dequantized): what precision costs.
- ``ref_dequantized``: the harness's float64 numpy decoder (the architecture's
  ``reference_forward``: architectures/<name>/reference.py) with the weights this run holds (and,
  with int8 activations, each quantized layer's input, and in WebNN's fused form its output,
  quantized with the scale and zero point calibrated on the calibration texts): is the engine
  right.

The page returns ``logits`` float32 [texts, eval_len, vocab] (the evaluation rows, each one
forward pass from position 0) and ``generated_ids`` int32 [new_tokens] (the last timed
generation's greedy ids after the prompt, end of sequence suppressed).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...architectures import ActQuant, DecoderArchitecture, DecoderConfig
from ...models import calibration, rules, smoothing, source
from ...models.quantized import HeldModel, hold_model
from ...prepared_caches import per_configuration
from ...precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ..base import HeldModelFacts, TensorSpec
from ..int8_activations import Int8Check, int8_check
from . import accuracy
from .int8 import int8_model
from .tokens import TokenPlan
from .workload import DecoderWorkload

FLOAT16_MAX = 65504.0
"""float16's largest finite value: an activation beyond it overflows to infinity."""

KERNEL_TOLERANCE_F32 = 1e-3
KERNEL_TOLERANCE_F16 = 3e-2
"""Relative RMS error of the logits vs the float64 decoder with the held weights beyond which
the engine is wrong (f32 or f16 arithmetic through every layer)."""

LOGITS = "logits"
GENERATED = "generated_ids"


@dataclass(frozen=True)
class ActivationPeak:
    """The largest |value| PyTorch fp32 computes over the evaluation rows, and where: any module's
    output (a decoder layer's is the residual stream) or a linear layer's input (what a float16
    matmul converts)."""

    value: float
    where: str

    def overflow(self, judged: np.ndarray, compute_dtype: str) -> str:
        """Did a float16 engine's activations overflow: '' when it did not compute in float16;
        otherwise 'none' or what shows it (non-finite outputs, the fp32 peak past 65,504)."""
        if compute_dtype != "f16":
            return ""
        signs = []
        nonfinite = int(np.size(judged) - np.count_nonzero(np.isfinite(judged)))
        if nonfinite:
            signs.append(f"{nonfinite} non-finite logits")
        if self.value > FLOAT16_MAX:
            signs.append(f"fp32 reaches {self.value:.3g} at {self.where}, past float16's {FLOAT16_MAX:,.0f}")
        return "; ".join(signs) or f"none (fp32 peak {self.value:.3g} at {self.where})"


@dataclass(frozen=True, eq=False)
class PreparedDecoder(HeldModelFacts):
    workload: DecoderWorkload
    bits: int
    block_size: int
    held: HeldModel
    plan: tuple[rules.LayerPrecision, ...]
    tokens: TokenPlan
    ref_float: np.ndarray
    ref_dequantized: np.ndarray
    generated_fp32: np.ndarray
    """PyTorch fp32's greedy ids after the prompt (end of sequence suppressed)."""
    generated_reference: np.ndarray
    """The float64 decoder's greedy ids with the held weights."""
    peak: ActivationPeak
    act_bits: int = 32
    observer: str = ""
    act_quant: tuple[calibration.ActivationQuant | None, ...] = ()
    """int8 activations: each plan layer's input scale and zero point (None: float input)."""
    out_quant: tuple[calibration.OutputQuant | None, ...] = ()
    """int8 outputs (WebNN's fused form): each plan layer's x @ W^T scale and zero point."""
    int8: Int8Check | None = None
    """int8 activations: what they change in the kernel check (workloads/int8_activations.py)."""

    @property
    def config(self) -> DecoderConfig:
        return self.workload.config()

    @property
    def context(self) -> int:
        """Positions the KV cache holds: the longest of a generation and an evaluation row."""
        w = self.workload
        return max(w.prompt_len + w.new_tokens, w.eval_len)

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        texts, length = self.tokens.eval_ids.shape
        return (TensorSpec(LOGITS, "float32", (texts, length, self.config.vocab)),
                TensorSpec(GENERATED, "int32", (self.workload.new_tokens,)))

    def input_tensors(self) -> dict[str, bytes]:
        return {"eval_ids": np.ascontiguousarray(self.tokens.eval_ids, dtype="<i4").tobytes(),
                "prompt_ids": np.ascontiguousarray(self.tokens.prompt, dtype="<i4").tobytes()}

    def tensors(self) -> dict[str, bytes]:
        """Inputs first, then every parameter tensor (page names: see models/quantized.py)."""
        return self.input_tensors() | self.held.tensors()

    @property
    def tolerance_basis(self) -> str:
        return self.int8.basis if self.int8 else ""

    @property
    def precision_note(self) -> str:
        if self.act_bits != 8:
            return ""
        held = calibration.held_note(self.plan, calibration.DecoderRows) if self.out_quant else ""
        notes = (calibration.scale_note(self.act_quant), held,
                 smoothing.note(self.held.model.architecture, self.config))
        return "; ".join(filter(None, notes))

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return outputs[LOGITS]

    def forward(self, weights: Mapping[str, np.ndarray], act_quant: ActQuant | None = None) -> np.ndarray:
        """The float64 reference of the judged output (the evaluation rows' logits) with these
        weights and int8 inputs (an int8_activations.Forward)."""
        return reference_logits(self.workload.architecture(), self.config, weights, self.tokens.eval_ids, act_quant)

    def tolerance(self, compute_dtype: str) -> float:
        base = KERNEL_TOLERANCE_F16 if compute_dtype == "f16" else KERNEL_TOLERANCE_F32
        return self.int8.tolerance(base) if self.int8 else base

    def kernel_problem(self, judged: np.ndarray) -> str:
        return self.int8.problem(judged, self.ref_dequantized) if self.int8 else ""

    def linear_int8(self) -> list[dict[str, Any]]:
        """Each plan layer's int8 input and output parameters for the page (``act``, ``out``: None
        where float), in the plan's order."""
        return calibration.linear_int8(self.plan, self.act_quant, self.out_quant)

    def precision_figures(self, judged: np.ndarray, compute_dtype: str) -> dict[str, Any]:
        return {"fp32_activation_peak": self.peak.value, "fp16_overflow": self.peak.overflow(judged, compute_dtype)}

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        """Accuracy vs PyTorch fp32: teacher-forced and greedy (speed comes from the page's timestamps)."""
        acc = accuracy.compare(self.judged(outputs), self.ref_float, self.tokens.eval_ids)
        generated = outputs[GENERATED]
        return {"next_token_top1": acc.top1_agreement, "kl_mean": acc.kl_mean, "perplexity": acc.perplexity,
                "perplexity_fp32": acc.perplexity_fp32,
                "leading_tokens_equal": accuracy.leading_equal(generated, self.generated_fp32),
                "generated_text": self.tokens.decode(generated)}

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Enough to recompute every accuracy figure without the browser."""
        logits = self.judged(outputs)
        ids = self.tokens.eval_ids
        return {"input_ids": ids, "top1": np.argmax(logits, axis=-1).astype(np.int32),
                "ref_logprob": accuracy.next_token_logprob(logits, ids),
                "fp32_top1": np.argmax(self.ref_float, axis=-1).astype(np.int32),
                "fp32_logprob": accuracy.next_token_logprob(self.ref_float, ids),
                "kl_fp32_engine": _kl(self.ref_float, logits),
                "prompt_ids": self.tokens.prompt, "generated_ids": outputs[GENERATED],
                "generated_ids_fp32": self.generated_fp32, "generated_ids_reference": self.generated_reference,
                "generated_text": np.array(self.tokens.decode(outputs[GENERATED]))}


def _kl(ref_logits: np.ndarray, logits: np.ndarray) -> np.ndarray:
    ref, logp = accuracy.log_softmax(ref_logits), accuracy.log_softmax(logits)
    return (np.exp(ref) * (ref - logp)).sum(axis=-1)


def pytorch_logits(model: source.LoadedModel, eval_ids: np.ndarray) -> tuple[np.ndarray, ActivationPeak]:
    """PyTorch fp32 logits [texts, eval_len, vocab] (float64), each row from position 0, and the
    largest activation of that forward (forward hooks on every module)."""
    import torch

    net = model.module()
    peaks: dict[str, float] = {}

    def record(where: str, value: Any) -> None:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            peaks[where] = max(peaks.get(where, 0.0), float(value.detach().abs().max()))

    def hook(name: str) -> Any:
        def seen(module: Any, args: tuple[Any, ...], out: Any) -> None:
            record(f"{name} output", out[0] if isinstance(out, tuple) else out)
            if isinstance(module, torch.nn.Linear) and args:
                record(f"{name} input", args[0])
        return seen

    handles = [m.register_forward_hook(hook(name)) for name, m in net.named_modules() if name]
    try:
        with torch.no_grad():
            out = net(input_ids=torch.from_numpy(eval_ids.astype(np.int64))).logits
    finally:
        for handle in handles:
            handle.remove()
    where = max(peaks, key=peaks.__getitem__)
    return out.double().numpy(), ActivationPeak(peaks[where], where)


def pytorch_greedy(model: source.LoadedModel, prompt: np.ndarray, new_tokens: int, eos: tuple[int, ...]) -> np.ndarray:
    """PyTorch fp32's greedy continuation (transformers' generate, end of sequence suppressed)."""
    import torch

    net = model.module()
    with torch.no_grad():
        out = net.generate(torch.from_numpy(prompt.astype(np.int64))[None], max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=False, suppress_tokens=list(eos) or None,
                           eos_token_id=None, pad_token_id=eos[0] if eos else 0)
    return out[0, len(prompt):].numpy().astype(np.int32)


def reference_logits(arch: DecoderArchitecture, cfg: DecoderConfig, weights: Mapping[str, np.ndarray],
                     eval_ids: np.ndarray, act_quant: ActQuant | None = None) -> np.ndarray:
    """The float64 decoder's logits [texts, eval_len, vocab] of each evaluation row from position 0."""
    return np.stack([arch.reference_forward(cfg, weights, {"input_ids": row}, act_quant) for row in eval_ids])


@functools.lru_cache(maxsize=2)
def fp32_references(model: source.LoadedModel, workload: DecoderWorkload
                    ) -> tuple[np.ndarray, np.ndarray, ActivationPeak]:
    """PyTorch fp32's teacher-forced logits of the evaluation rows, its greedy continuation of
    the prompt and its largest activation (cached: every engine and precision of a workload is
    judged against the same)."""
    tokens = workload.tokens()
    logits, peak = pytorch_logits(model, tokens.eval_ids)
    return logits, pytorch_greedy(model, tokens.prompt, workload.new_tokens, tokens.eos), peak


def held_decoder(workload: DecoderWorkload, bits: int, block_size: int, seed: int, unsigned: bool = False,
                 weight_quant: str = DEFAULT_QUANTIZER, act_bits: int = 32) -> HeldModel:
    """The decoder's linear layers held at the workload's plan for ``bits``, their codes made by
    ``weight_quant`` (calibrated ones on the built-in calibration texts): the bytes every engine
    holds, the harness's and those written into a GGUF file for wllama alike. With int8
    activations (``act_bits`` 8) the model held is the smoothed one (models/smoothing.py: the
    same float model, its int8 inputs' outliers migrated into the weights)."""
    if act_bits == 8:
        loaded, texts = int8_model(workload, seed)
    else:
        loaded = source.load(source.resolve(workload.model, workload.random_weights), workload.random_weights, seed)
        texts = calibration.DecoderRows(calibration.builtin_calibration_texts())
    plan = tuple(rules.assign(loaded.config.linear_layers(), workload.rules, bits, block_size))
    moments = functools.partial(calibration.input_moments, loaded, texts)
    return hold_model(loaded, plan, unsigned, weight_quant, moments if QUANTIZERS[weight_quant].calibrated else None)


@per_configuration(maxsize=4)
def prepare_decoder(workload: DecoderWorkload, bits: int, block_size: int, seed: int,
                    unsigned: bool = False, weight_quant: str = DEFAULT_QUANTIZER, act_bits: int = 32,
                    observer: str = "", out_int8: bool = False) -> PreparedDecoder:
    """Everything a decoder run needs in Python (cached: engines of one configuration share it).
    ``unsigned`` holds 8/4/2-bit layers as unsigned integers (the same values); ``weight_quant``
    makes their codes (precision/quantizers.py). ``act_bits`` 8: the inputs of the 8- and 4-bit
    layers are int8, calibrated by ``observer`` on the calibration texts (every position of their
    rows: a prefill's and a scoring pass's, which the kernel check judges); ``out_int8`` too: the
    8-bit layers' x @ W^T as well (WebNN's fused form); their inputs smoothed where the architecture
    says how (held_decoder)."""
    held = held_decoder(workload, bits, block_size, seed, unsigned, weight_quant, act_bits)
    loaded, plan = held.model, tuple(layer.precision for layer in held.layers)
    tokens = workload.tokens()
    original = source.load(source.resolve(workload.model, workload.random_weights), workload.random_weights, seed)
    ref_float, generated_fp32, peak = fp32_references(original, workload)
    weights = held.exec_weights()
    arch, cfg = workload.architecture(), workload.config()
    inputs = calibration.DecoderRows(calibration.builtin_calibration_texts())
    act_quant, out_quant, by_name = calibration.int8_parameters(loaded, inputs, plan, act_bits, observer, out_int8)
    ref_deq = reference_logits(arch, cfg, weights, tokens.eval_ids, by_name or None)
    generated = np.array(arch.reference_greedy(cfg, weights, tokens.prompt, workload.new_tokens, tokens.eos,
                                               by_name or None), np.int32)
    check = None
    if by_name:
        check = int8_check(lambda w, act: reference_logits(arch, cfg, w, tokens.eval_ids, act), weights, by_name,
                           ref_deq)
    return PreparedDecoder(workload, bits, block_size, held, plan, tokens, ref_float, ref_deq,
                           generated_fp32, generated, peak, act_bits, observer if act_bits == 8 else "",
                           act_quant, out_quant, check)


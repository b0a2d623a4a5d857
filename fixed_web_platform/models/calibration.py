"""Static int8 activations of a whole model (W8A8 / W4A8): the input of each linear layer gets one
calibrated scale and zero point, per tensor, from an observer that watched it over calibration texts;
or, where a kind's calibration inputs say ``per_token`` (a decoder's), each position's input is
divided by its own peak |x| before int8 at a constant scale (ActivationQuant.per_token), and only
the outputs are calibrated.

- Calibration runs the float model (the transformers module with the original fp32 weights, as
  PyTorch's static quantization calibrates) over the calibration inputs, with a forward pre-hook on
  every linear layer that shows the observer the layer's input at the positions that count: an
  encoder's real tokens (``EncoderBatches``: padding never reaches an output), every token of a
  decoder's rows of joined tokens (``DecoderRows``), every row Whisper's encoder and decoder see
  transcribing the spoken calibration sentences (workloads/speech/calibration.SpeechClips).
- The texts are the built-in calibration set (data/calibration_sentences.txt: none of them is in
  the evaluation set) or the user's ``--calibration FILE``.
- Scale and zero point come from ``Observer.qparams`` (``quant.qparams_from_range``, the rule the
  weights use), signed int8, and the scale is rounded to float32 once here: the page, the WGSL
  kernel and the float64 reference all use that float32 value.
- Which layers: those whose weights are 8- or 4-bit (``ACT8_WEIGHT_BITS``, the same pairing the
  matmul sweep has); layers at other bits keep float activations.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from ..architectures.int8 import token_peaks
from ..precision.observers import MINMAX, make_observer
from ..prepared_caches import per_configuration
from ..vocabulary import ACT8_WEIGHT_BITS
from .inputs import read_texts, tokenize
from .rules import LayerPrecision
from .source import LoadedModel, tokenizer

OUT_INT8_MIN_SQNR_DB = 25.0
"""A layer's output goes through int8 (WebNN's fused form) only where the calibration says int8
holds it this well: signal-to-quantization-noise ratio at least this many dB (a kind's calibration
inputs may ask for more: ``out_min_sqnr_db``). Measured on all-MiniLM-L6-v2: the FFN
down-projections (output.dense, outliers of +-100) sit at 20-23 dB and alone take the mean cosine
from 0.994 to 0.949; every other layer is at 28-40 dB. Without their 1-8 largest output channels
(computed in float apart) they reach 37-39 dB."""
DECODER_OUT_INT8_MIN_SQNR_DB = 35.0
"""A decoder's floor: errors compound over its blocks and every generated token. The layers that
miss it are held in float32 (``output_misses``), the others' outliers
split off (up to MAX_FLOAT_CHANNELS). SmolLM2-135M smoothed W8A8 on Chromium's WebNN, decode speed
over float32 of the same sweep, next-token top-1 / KL / perplexity against fp32 (40.12):
- per-tensor inputs (2026-12-03, commits df915ad, ea58d64, c717232; a layer missing the floor
  took int8 inputs into an unfused product): 25 dB 3.80x, 0.777 / 0.175 / 49.0; 30 dB 2.45x,
  0.797 / 0.110 / 43.9; 35 dB 1.10x, 0.820 / 0.084 / 41.2;
- per-token inputs (2026-12-04, at 30 dB commit 6f0721e: 3.03x, 0.828 / 0.076 / 42.5, every
  output in int8, 34 split; at 35 dB, commit b9911fe with the floor set so, the 15 layers missing it in float32:
  2.17x, 0.883 / 0.028 / 42.4, 151 split).
In PyTorch fake quantization on the evaluation rows (benchmarks/w8a8_decoder_accuracy.py
--per-token --min-sqnr 33 35 38), per-token inputs, the missing layers in float: top-1 / KL 0.824 /
0.062 at 30 dB, 0.867 / 0.035 at 33, 0.902 / 0.017 at 35, 0.941 / 0.010 at 38 (where 111 of 211
layers miss it: float32's speed)."""
PER_TOKEN_SCALE = float(np.float32(1 / 127))
"""A per-token int8 input's constant scale (zero point 0): the input divided by its position's
peak |x| lies in [-1, 1] (``ActivationQuant.per_token``)."""
MAX_FLOAT_CHANNELS = 16
"""At most this many output channels of a layer are kept out of its int8 output."""

CALIBRATION_SET = Path(__file__).parent / "data" / "calibration_sentences.txt"
CALIBRATION_NAME = "builtin-calibration"


def builtin_calibration_texts() -> tuple[str, ...]:
    return read_texts(CALIBRATION_SET)


@dataclass(frozen=True)
class ActivationQuant:
    """x = (q - zero_point) * scale, q int8, for the whole input tensor of one linear layer; or,
    ``per_token``, x / p = (q - zero_point) * scale with p each position's peak |x| (a float
    reduction in the graph), the layer's x @ W^T multiplied by p after it: the fused int8 form's
    constant scale with a scale per token around it."""

    scale: float
    """float32-representable (rounded once, here)."""
    zero_point: int
    per_token: bool = False

    def to_json(self) -> dict[str, float | int | bool]:
        return {"scale": self.scale, "zero_point": self.zero_point} | ({"per_token": True} if self.per_token else {})

    def act_quant(self) -> tuple:
        """Its entry in architectures.ActQuant."""
        return (self.scale, self.zero_point, self.per_token)


PER_TOKEN = ActivationQuant(PER_TOKEN_SCALE, 0, True)


def quantized_inputs(plan: tuple[LayerPrecision, ...]) -> tuple[str, ...]:
    """The layers whose inputs int8 activations quantize: 8- and 4-bit weights."""
    return tuple(p.layer.name for p in plan if p.bits in ACT8_WEIGHT_BITS)


@dataclass(frozen=True)
class EncoderBatches:
    """An encoder's calibration inputs: the texts as batches of the run's shape; the real tokens
    count (padding never reaches an output: attention masks it as keys and pooling skips it)."""

    texts: tuple[str, ...]
    batch_size: int
    seq_len: int
    out_min_sqnr_db: ClassVar[float] = OUT_INT8_MIN_SQNR_DB
    per_token: ClassVar[bool] = False

    def run(self, model: LoadedModel, net: Any, counted: list[np.ndarray], before: Any = None) -> None:
        import torch

        batches = tokenize(tokenizer(model.resolved), self.texts, self.batch_size, self.seq_len)
        for p in range(batches.passes):
            mask = batches.attention_mask[p].astype(bool)
            texts_here = np.arange(p * self.batch_size, (p + 1) * self.batch_size) < batches.count
            counted.append(mask & texts_here[:, None])  # the last batch's filler is not seen twice
            if before:
                before()
            net(input_ids=torch.from_numpy(batches.input_ids[p].astype(np.int64)),
                attention_mask=torch.from_numpy(batches.attention_mask[p].astype(np.int64)),
                token_type_ids=torch.from_numpy(batches.token_type_ids[p].astype(np.int64)))


CALIBRATION_ROW = 64
"""A decoder's calibration texts go through the float model as rows of this many tokens (their
tokens joined, every token real: no padding to leave out)."""


@dataclass(frozen=True)
class DecoderRows:
    """A decoder's calibration inputs: the texts' tokens joined and cut into rows of
    CALIBRATION_ROW, one call; every position counts."""

    texts: tuple[str, ...]
    out_min_sqnr_db: ClassVar[float] = DECODER_OUT_INT8_MIN_SQNR_DB
    per_token: ClassVar[bool] = True

    def run(self, model: LoadedModel, net: Any, counted: list[np.ndarray], before: Any = None) -> None:
        import torch

        tok = tokenizer(model.resolved)
        ids = [i for text in self.texts for i in tok(text, add_special_tokens=False)["input_ids"]]
        rows = np.array(ids[: len(ids) // CALIBRATION_ROW * CALIBRATION_ROW], dtype=np.int64)
        if not len(rows):
            raise ValueError(f"the calibration texts have {len(ids)} tokens, fewer than one row of {CALIBRATION_ROW}")
        rows = rows.reshape(-1, CALIBRATION_ROW)
        counted.append(np.ones(rows.shape, dtype=bool))
        if before:
            before()
        net(input_ids=torch.from_numpy(rows))


class CalibrationInputs(Protocol):
    """What calibration runs the float model on (PyTorch, the original weights): EncoderBatches,
    DecoderRows, or a kind's own (workloads/speech/calibration.SpeechClips); hashable (the
    calibrations are cached by it)."""

    out_min_sqnr_db: ClassVar[float]
    """How well int8 must hold a layer's output on these inputs for it to go through int8."""
    per_token: ClassVar[bool]
    """Whether int8 inputs get a scale per token (ActivationQuant.per_token) rather than one
    calibrated per tensor; the outputs are then calibrated divided by their token's peak."""

    def run(self, model: LoadedModel, net: Any, counted: list[np.ndarray | None], before: Any = None) -> None:
        """Call ``net`` on each input in turn: first append to ``counted`` the [rows, positions]
        mask of the positions whose activations count (None: every row of every call until the
        next entry), and call ``before``."""


def act_scale(inputs: Any) -> str:
    """The result row's ``act_scale`` of int8 inputs calibrated on ``inputs`` (a CalibrationInputs
    or its class): 'per-token' or 'per-tensor'."""
    return "per-token" if inputs.per_token else "per-tensor"


def scale_note(act_quant: tuple[ActivationQuant | None, ...]) -> str:
    """What a run says of its per-token int8 inputs ('' where there are none)."""
    per_token = sum(1 for a in act_quant if a and a.per_token)
    return (f"int8 inputs scaled per token in {per_token} layers (each position divided by its peak |x| before "
            "int8, the product multiplied back)") if per_token else ""


def output_misses(model: LoadedModel, inputs: CalibrationInputs, plan: Sequence[LayerPrecision],
                  observer: str) -> tuple[str, ...]:
    """The 8-bit layers of ``plan`` whose x @ W^T int8 cannot hold at ``inputs``' floor
    (``out_min_sqnr_db``), even with MAX_FLOAT_CHANNELS channels apart. In the fused form such a
    layer would take int8 inputs into an unfused product, its int8 weight dequantized at every
    call, slower than float32 and less accurate: a generating workload holds them in float32
    (``int8_outputs_held``, by exact-name rules ahead of the run's own)."""
    outs = calibrate_outputs(model, inputs, observer, tuple(p.layer.name for p in plan))
    return tuple(p.layer.name for p in plan if p.bits == 8 and outs[p.layer.name] is None)


def held_note(plan: Sequence[LayerPrecision], inputs: type[CalibrationInputs]) -> str:
    """What a fused-form run says of its layers held in float32 by exact-name rules ('' for none)."""
    floats = sum(1 for p in plan if p.bits == 32 and p.rule == p.layer.name)
    return (f"{floats} layers held in float32 by exact-name rules (those whose int8 outputs miss the "
            f"{inputs.out_min_sqnr_db:g} dB floor, by the workload's int8_outputs_held, and any the run's own "
            "rules or the engine's plan name)") if floats else ""


def _counted(x: np.ndarray, counted: list[np.ndarray | None]) -> np.ndarray:
    """The rows of one call's [..., K] tensor whose positions count (``counted[-1]``), [rows, K]."""
    mask = counted[-1]
    return x.reshape(-1, x.shape[-1]) if mask is None else x[mask]


def _run(model: LoadedModel, inputs: CalibrationInputs, layers: tuple[str, ...], hooks: Any,
         before: Any = None) -> None:
    """``inputs`` through the float model with ``hooks(modules, counted)``'s handles (forward
    hooks on the named layers' modules), removed after; ValueError for a layer it lacks."""
    import torch

    net = model.module()
    modules = model.architecture.linear_modules(net)
    missing = [name for name in layers if name not in modules]
    if missing:
        raise ValueError(f"layer {missing[0]} is not a module of the model")
    counted: list[np.ndarray] = []
    handles = hooks(modules, counted)
    try:
        with torch.no_grad():
            inputs.run(model, net, counted, before)
    finally:
        for handle in handles:
            handle.remove()


class _InputObservers:
    """Each named layer's input seen by an observer over the calls of ``_run`` (``hooks``; call
    ``seen.clear`` before each call); layers fed one tensor (Q, K and V) share the first's."""

    def __init__(self, observer: str, layers: tuple[str, ...]) -> None:
        self.layers = layers
        self.observers = {name: make_observer(observer) for name in layers}
        self.shares: dict[str, str] = {}  # layer -> the layer whose input it receives
        self.seen: list[tuple[object, str]] = []  # the current call's inputs (kept alive: identity is safe)

    def hooks(self, modules: dict[str, Any], counted: list[np.ndarray]) -> list[Any]:
        def watch(name: str):
            def hook(_module, args):
                first = next((owner for tensor, owner in self.seen if tensor is args[0]), None)
                if first is not None:
                    self.shares[name] = first
                    return
                self.seen.append((args[0], name))
                self.observers[name].observe(_counted(args[0].detach().double().numpy(), counted))
            return hook
        return [modules[name].register_forward_pre_hook(watch(name)) for name in self.layers]

    def params(self) -> dict[str, ActivationQuant]:
        out = {}
        for name, obs in self.observers.items():
            if name not in self.shares:
                scale, zero_point = obs.qparams(8)
                out[name] = ActivationQuant(float(np.float32(scale.reshape(-1)[0])), int(zero_point.reshape(-1)[0]))
        return {name: out[self.shares.get(name, name)] for name in self.layers}


@functools.lru_cache(maxsize=8)
def calibrate(model: LoadedModel, inputs: CalibrationInputs, observer: str,
              layers: tuple[str, ...]) -> dict[str, ActivationQuant]:
    """Scale and zero point of each named layer's input, from ``observer`` over ``inputs``."""
    observed = _InputObservers(observer, layers)
    _run(model, inputs, layers, observed.hooks, observed.seen.clear)
    return observed.params()


@functools.lru_cache(maxsize=2)
def input_peaks(model: LoadedModel, inputs: CalibrationInputs, layers: tuple[str, ...]) -> dict[str, np.ndarray]:
    """max |x_j| (float64 [K]) of each named layer's input channel over ``inputs``' counted
    positions: what SmoothQuant's factors are made of (models/smoothing.py)."""
    peaks: dict[str, np.ndarray] = {}

    def hooks(modules: dict[str, Any], counted: list[np.ndarray]) -> list[Any]:
        def watch(name: str):
            def hook(_module, args):
                x = np.abs(_counted(args[0].detach().double().numpy(), counted)).max(axis=0)
                peaks[name] = np.maximum(peaks[name], x) if name in peaks else x
            return hook
        return [modules[name].register_forward_pre_hook(watch(name)) for name in layers]

    _run(model, inputs, layers, hooks)
    unseen = [name for name in layers if name not in peaks]
    if unseen:
        raise ValueError(f"the calibration set never reached layer {unseen[0]}")
    return peaks


@functools.lru_cache(maxsize=2)
def input_moments(model: LoadedModel, inputs: CalibrationInputs, layers: tuple[str, ...]) -> dict[str, np.ndarray]:
    """E[x x^T] (float64 [K, K]) of each named layer's input over ``inputs``' counted positions:
    what a calibrated weight quantizer (gptq) spreads its rounding errors by."""
    moments: list[MomentSums] = []

    def hooks(modules: dict[str, Any], counted: list[np.ndarray]) -> list[Any]:
        moments.append(MomentSums(modules, layers, lambda x: _counted(x, counted)))
        return moments[0].handles

    _run(model, inputs, layers, hooks)
    return moments[0].means()


class MomentSums:
    """Sums x^T x of the inputs of the named modules, every row of every call, from the moment it
    is made (forward pre-hooks: ``handles``) until ``means()`` removes them and gives E[x x^T]
    (float64 [K, K]) per layer. ``rows`` picks the rows that count from a call's input (default:
    all of them)."""

    def __init__(self, modules: dict[str, Any], layers: tuple[str, ...], rows=None) -> None:
        self.sums: dict[str, np.ndarray] = {}
        self.counts = dict.fromkeys(layers, 0)
        self.rows = rows

        def watch(name: str):
            def hook(_module, args):
                x = args[0].detach().double().numpy()
                x = self.rows(x) if self.rows else x.reshape(-1, x.shape[-1])
                self.sums[name] = self.sums.get(name, 0) + x.T @ x
                self.counts[name] += len(x)
            return hook

        missing = [name for name in layers if name not in modules]
        if missing:
            raise ValueError(f"layer {missing[0]} is not a module of the model")
        self.handles = [modules[name].register_forward_pre_hook(watch(name)) for name in layers]

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()

    def means(self) -> dict[str, np.ndarray]:
        self.close()
        unseen = [name for name, n in self.counts.items() if not n]
        if unseen:
            raise ValueError(f"the calibration set never reached layer {unseen[0]}")
        return {name: self.sums[name] / n for name, n in self.counts.items()}


@dataclass(frozen=True)
class OutputQuant:
    """x @ W^T of one linear layer through int8 (WebNN's fused form), per tensor, except its
    ``float_channels``: the few output channels whose outliers int8 cannot hold beside the rest
    (BERT's FFN down-projections), computed apart in float and put back in place."""

    scale: float
    zero_point: int
    float_channels: tuple[int, ...]
    sqnr_db: float
    """The calibrated signal-to-quantization-noise ratio of the int8 channels."""

    def to_json(self) -> dict[str, Any]:
        return {"scale": self.scale, "zero_point": self.zero_point, "float_channels": list(self.float_channels)}

    def act_quant(self) -> tuple[float, int, tuple[int, ...]]:
        """Its entry in architectures.ActQuant (key ``<layer>:output``)."""
        return self.scale, self.zero_point, self.float_channels


def _output_hooks(layers: tuple[str, ...], see, per_token: bool = False) -> Any:
    """``_run``'s hooks: ``see(name, y)`` gets each named layer's x @ W^T (output minus bias) at
    the counted positions, [positions, N] float64; ``per_token``: divided by each position's
    input peak (token_peaks), what the int8 output holds there."""
    def hooks(modules: dict[str, Any], counted: list[np.ndarray]) -> list[Any]:
        def watch(name: str):
            def hook(module, args, output):
                y = output.detach().double().numpy()
                if getattr(module, "bias", None) is not None:
                    y = y - module.bias.detach().double().numpy()
                if per_token:
                    y = y / token_peaks(args[0].detach().double().numpy())
                see(name, _counted(y, counted))
            return hook
        return [modules[name].register_forward_hook(watch(name)) for name in layers]
    return hooks


class _OutputRanges:
    """Per output channel: min, max and sum of squares of each named layer's x @ W^T, and the rows
    seen (``hooks`` for ``_run``)."""

    def __init__(self, layers: tuple[str, ...], per_token: bool = False) -> None:
        self.layers = layers
        self.stats: dict[str, list[Any]] = {name: [None, None, None, 0] for name in layers}
        self.hooks = _output_hooks(layers, self.gather, per_token)

    def gather(self, name: str, y: np.ndarray) -> None:
        st = self.stats[name]
        lo, hi, sq = y.min(axis=0), y.max(axis=0), (y ** 2).sum(axis=0)
        st[0] = lo if st[0] is None else np.minimum(st[0], lo)
        st[1] = hi if st[1] is None else np.maximum(st[1], hi)
        st[2] = sq if st[2] is None else st[2] + sq
        st[3] += y.shape[0]


def _sqnr_db(rms: float, scale: float) -> float:
    return float(20 * np.log10(max(rms, 1e-30) * np.sqrt(12) / scale))


def calibrate_outputs(model: LoadedModel, inputs: CalibrationInputs, observer: str,
                      layers: tuple[str, ...]) -> dict[str, OutputQuant | None]:
    """Int8 parameters of each named layer's x @ W^T over ``inputs``' counted positions, or None
    where int8 cannot hold it (``_output_params``)."""
    return _calibrated_outputs(model, inputs, observer, layers, inputs.out_min_sqnr_db)


@functools.lru_cache(maxsize=8)
def _calibrated_outputs(model: LoadedModel, inputs: CalibrationInputs, observer: str, layers: tuple[str, ...],
                        floor: float) -> dict[str, OutputQuant | None]:
    """``calibrate_outputs``, cached by the floor too (a kind's floor is a class attribute that a
    benchmark or a test may set apart)."""
    ranges = _OutputRanges(layers, inputs.per_token)
    _run(model, inputs, layers, ranges.hooks)
    return _output_params(ranges, model, inputs, observer)


def _output_params(ranges: _OutputRanges, model: LoadedModel, inputs: CalibrationInputs,
                   observer: str) -> dict[str, OutputQuant | None]:
    """From a first pass's per-channel ranges, the fewest outlier channels (0, 1, 2, 4, ... up to
    MAX_FLOAT_CHANNELS, largest |value| first) that leave the rest at ``inputs.out_min_sqnr_db``
    or better (its range from min/max, its noise step / sqrt(12)); then ``observer`` sees the rest
    in a second pass and gives the scale and zero point (minmax: from the first pass's ranges, the
    same range, no second pass)."""
    layers, stats = ranges.layers, ranges.stats
    chosen: dict[str, tuple[int, ...] | None] = {}
    for name, (lo, hi, sq, rows) in stats.items():
        order = np.argsort(-np.maximum(np.abs(lo), np.abs(hi)), kind="stable")
        chosen[name] = None
        for k in (0, 1, 2, 4, 8, 16):
            if k > MAX_FLOAT_CHANNELS or k >= len(order):
                break
            rest = np.ones(len(order), dtype=bool)
            rest[order[:k]] = False
            scale = (max(hi[rest].max(), 0) - min(lo[rest].min(), 0)) / 255
            if scale > 0 and _sqnr_db(np.sqrt(sq[rest].sum() / (rows * rest.sum())), scale) >= inputs.out_min_sqnr_db:
                chosen[name] = tuple(sorted(int(c) for c in order[:k]))
                break
    observers = {name: make_observer(observer) for name, ch in chosen.items() if ch is not None}
    squares = {name: np.zeros(2) for name in observers}

    def observe(name: str, y: np.ndarray) -> None:
        if name in observers:
            rest = np.delete(y, chosen[name], axis=1)
            observers[name].observe(rest)
            squares[name] += (float(np.sum(rest ** 2)), rest.size)

    if observer == MINMAX:  # its range is the other channels' ranges, gathered above: no second pass
        for name in observers:
            lo, hi, sq, rows = stats[name]
            observe(name, np.stack([lo, hi]))
            rest = np.delete(sq, chosen[name])
            squares[name] = np.array([float(rest.sum()), rows * rest.size])
    else:
        _run(model, inputs, tuple(observers), _output_hooks(tuple(observers), observe, inputs.per_token))
    out: dict[str, OutputQuant | None] = {name: None for name in layers}
    for name, obs in observers.items():
        scale, zero_point = obs.qparams(8)
        s32 = float(np.float32(scale.reshape(-1)[0]))
        rms = float(np.sqrt(squares[name][0] / max(squares[name][1], 1)))
        out[name] = OutputQuant(s32, int(zero_point.reshape(-1)[0]), chosen[name] or (), _sqnr_db(rms, s32))
    return out


@per_configuration(maxsize=2)
def _inputs_and_outputs(model: LoadedModel, inputs: CalibrationInputs, in_layers: tuple[str, ...],
                        out_layers: tuple[str, ...], floor: float
                        ) -> tuple[dict[str, ActivationQuant], dict[str, OutputQuant | None]]:
    """``calibrate`` and ``calibrate_outputs`` with the minmax observer, in one pass (``floor``:
    ``inputs.out_min_sqnr_db``, in the cache's key)."""
    observed, ranges = _InputObservers(MINMAX, in_layers), _OutputRanges(out_layers, inputs.per_token)
    _run(model, inputs, tuple(dict.fromkeys(in_layers + out_layers)),
         lambda modules, counted: observed.hooks(modules, counted) + ranges.hooks(modules, counted),
         observed.seen.clear)
    return observed.params(), _output_params(ranges, model, inputs, MINMAX)


def int8_parameters(model: LoadedModel, inputs: CalibrationInputs, plan: tuple[LayerPrecision, ...],
                    act_bits: int, observer: str, out_int8: bool
                    ) -> tuple[tuple[ActivationQuant | None, ...], tuple[OutputQuant | None, ...], dict[str, tuple]]:
    """Each plan layer's int8 input (``act_bits`` 8: the 8- and 4-bit layers') and, ``out_int8``,
    output (the 8-bit ones') parameters, None where float; and the reference's ActQuant of them
    (architectures.ActQuant: empty without int8 activations)."""
    from ..architectures.base import OUTPUT_QUANT

    if act_bits != 8:
        if out_int8:
            raise ValueError("int8 outputs go with int8 activations")
        return (), (), {}
    in_layers = quantized_inputs(plan)
    eight = tuple(p.layer.name for p in plan if p.bits == 8 and p.layer.name in in_layers) if out_int8 else ()
    if inputs.per_token:  # nothing to calibrate in front: each token's scale is its own
        params = dict.fromkeys(in_layers, PER_TOKEN)
        # every layer's outputs, as workloads/int8_activations.output_misses asks before planning
        # (each layer's are its own): one pass of the float model serves both
        every = calibrate_outputs(model, inputs, observer, tuple(p.layer.name for p in plan)) if eight else {}
        outs = {name: every[name] for name in eight}
    elif eight and observer == MINMAX:  # one pass of the float model gives both
        params, outs = _inputs_and_outputs(model, inputs, in_layers, eight, inputs.out_min_sqnr_db)
    else:
        params = calibrate(model, inputs, observer, in_layers)
        outs = calibrate_outputs(model, inputs, observer, eight) if eight else {}
    act_quant = tuple(params.get(p.layer.name) for p in plan)
    out_quant = tuple(outs.get(p.layer.name) for p in plan) if out_int8 else ()
    by_name = {p.layer.name: a.act_quant() for p, a in zip(plan, act_quant) if a}
    by_name |= {p.layer.name + OUTPUT_QUANT: o.act_quant() for p, o in zip(plan, out_quant) if o}
    return act_quant, out_quant, by_name


def linear_int8(plan: tuple[LayerPrecision, ...], act_quant: tuple[ActivationQuant | None, ...],
                out_quant: tuple[OutputQuant | None, ...]) -> list[dict[str, Any]]:
    """Each plan layer's int8 input and output parameters for the page (``act``, ``out``: None
    where float), in the plan's order."""
    n = len(plan)
    return [{"act": a.to_json() if a else None, "out": o.to_json() if o else None}
            for a, o in zip(act_quant or [None] * n, out_quant or [None] * n)]

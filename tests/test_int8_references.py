"""The float64 references with int8 activations (architectures/int8.py) against PyTorch fake
quantization hooked onto the same layers of the transformers module, in float64: what keeps the
kernel error of a decoder's or Whisper's W8A8 row checkable. Each check can fail: the float-activation reference, or one layer's zero point off
by one, lands beyond it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.architectures.base import OUTPUT_QUANT
from fixed_web_platform.architectures.gemma3 import GEMMA3
from fixed_web_platform.architectures.llama import LLAMA
from fixed_web_platform.architectures.whisper import reference as whisper_reference
from fixed_web_platform.models.calibration import PER_TOKEN

IDS = np.array([3, 5, 7, 11, 13, 2, 40, 50, 60, 1])


@contextlib.contextmanager
def _hooked(linears: dict, quant: dict[str, tuple]) -> Iterator[None]:
    """PyTorch's fake quantization on the named modules' inputs (and ``<name>:output`` outputs
    before the bias, the listed channels kept float) while the block runs; an input marked per
    token is divided by each position's peak |x| first, and the output multiplied by it."""
    import torch

    def fq(x, scale: float, zero_point: int, *_):  # noqa: ANN001, ANN202
        # torch.ao's FakeQuantize formula in float64 (torch.round: half to even). Its fused op,
        # torch.fake_quantize_per_tensor_affine, multiplies by 1 / scale in float32, which flips
        # values next to a rounding step: 1.4e-4 on the small Whisper's encoder.
        return (torch.clamp(torch.round(x / scale) + zero_point, -128, 127) - zero_point) * scale

    def output(y, q):  # noqa: ANN001, ANN202
        out = fq(y, *q)
        out[..., list(q[2])] = y[..., list(q[2])]
        return out

    peaks: dict[str, object] = {}

    def before(name: str, x, q):  # noqa: ANN001, ANN202
        if q[2:] and q[2]:
            peaks[name] = x.abs().amax(-1, keepdim=True).clamp(min=1e-30)
            x = x / peaks[name]
        return (fq(x, *q[:2]),)

    def after(m, name: str, y):  # noqa: ANN001, ANN202
        bias = m.bias if m.bias is not None else 0
        y = y - bias
        if name + OUTPUT_QUANT in quant:
            y = output(y, quant[name + OUTPUT_QUANT])
        if name in peaks:
            y = y * peaks.pop(name)
        return y + bias

    hooks = []
    for name, m in linears.items():
        if name in quant:
            hooks.append(m.register_forward_pre_hook(lambda _m, a, n=name, q=quant[name]: before(n, a[0], q)))
        hooks.append(m.register_forward_hook(lambda m, _a, y, n=name: after(m, n, y)))
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def _quant_from_peaks(linears: dict, run: Callable[[], object], head: str, per_token: bool = False) -> dict[str, tuple]:
    """Every linear layer's input quantized with a scale that clips its largest values (half its
    range over 127) and a zero point of 3, or (``per_token``) each position's input over its peak
    at the per-token scale; ``head``'s output too (its range over 127), channel 5 kept float."""
    peaks: dict[str, float] = {}
    outs: dict[str, float] = {}
    hooks = [m.register_forward_pre_hook(lambda _m, a, n=name: peaks.__setitem__(n, float(a[0].abs().max())))
             for name, m in linears.items()]
    hooks.append(linears[head].register_forward_hook(lambda _m, _a, y: outs.__setitem__(head, float(y.abs().max()))))
    run()
    for h in hooks:
        h.remove()
    inputs = ({name: PER_TOKEN.act_quant() for name in peaks} if per_token else
              {name: (peak / 2 / 127, 3) for name, peak in peaks.items()})
    return inputs | {head + OUTPUT_QUANT: (outs[head] / 127, 0, (5,))}


def _checks(ours: Callable[[dict | None], np.ndarray], theirs: np.ndarray, quant: dict[str, tuple]) -> None:
    scale = np.abs(theirs).max()
    assert np.abs(ours(quant) - theirs).max() <= 1e-6 * scale
    assert np.abs(ours(None) - theirs).max() > 1e-2 * scale
    first = next(iter(quant))
    off = quant | {first: (quant[first][0], quant[first][1] + 1, *quant[first][2:])}
    assert np.abs(ours(off) - theirs).max() > 1e-4 * scale


@pytest.mark.parametrize(("arch", "per_token"), [(LLAMA, False), (GEMMA3, False), (LLAMA, True)],
                         ids=["llama", "gemma3", "llama-per-token"])
def test_the_float64_decoder_with_int8_activations_is_pytorchs_fake_quantization(arch, per_token: bool) -> None:  # noqa: ANN001
    import torch
    from test_decoder import tiny_hf_config
    from test_gemma3 import tiny_gemma_config

    cfg = arch.config(tiny_gemma_config() if arch is GEMMA3 else tiny_hf_config(), "tiny")
    weights = {k: (v * 8 if v.ndim == 2 else v) for k, v in arch.random_weights(cfg, 7).items()}
    weights = arch.complete_weights(cfg, weights | {"lm_head.weight": weights["model.embed_tokens.weight"]})
    module = arch.torch_module(cfg, weights).double()
    linears = arch.linear_modules(module)

    def forward() -> np.ndarray:
        with torch.no_grad():
            return module(torch.tensor(IDS[None])).logits[0].numpy()

    quant = _quant_from_peaks(linears, forward, arch.head, per_token)
    with _hooked(linears, quant):
        theirs = forward()
    ours = lambda q: arch.reference_forward(cfg, weights, {"input_ids": IDS}, q)  # noqa: E731
    _checks(ours, theirs, quant)
    if per_token:  # the same constant scale without each position's peak around it lands far off
        static = {n: q[:2] if n in linears else q for n, q in quant.items()}
        assert np.abs(ours(static) - theirs).max() > 1e-2 * np.abs(theirs).max()


def test_the_float64_whisper_with_int8_activations_is_pytorchs_fake_quantization(tmp_path: Path) -> None:
    """The encoder, and a decoder step over its output (cross-attention's keys and values included)."""
    import torch
    from speech_models import tiny_whisper

    from fixed_web_platform.models import source

    loaded = source.load(source.resolve(str(tiny_whisper(tmp_path / "tiny-whisper"))))
    cfg, weights = loaded.config, loaded.weights
    module = loaded.module().double()
    linears = loaded.architecture.linear_modules(module)
    feats = np.random.default_rng(1).uniform(-1, 1, (cfg.mels, cfg.frames))
    prompt = torch.tensor([list(cfg.prompt)])

    def forward() -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            encoded = module.model.encoder(torch.from_numpy(feats)[None]).last_hidden_state
            hidden = module.model.decoder(input_ids=prompt, encoder_hidden_states=encoded).last_hidden_state
            return encoded[0].numpy(), module.proj_out(hidden)[0].numpy()

    quant = _quant_from_peaks(linears, forward, "proj_out")
    with _hooked(linears, quant):
        encoded, logits = forward()
    _checks(lambda q: whisper_reference.encode(cfg, weights, feats, q),
            encoded, {k: v for k, v in quant.items() if k.startswith("model.encoder.")})
    _checks(lambda q: whisper_reference.Decoder(cfg, weights, encoded, q).step(list(cfg.prompt)), logits,
            {k: v for k, v in quant.items() if not k.startswith("model.encoder.")})


def test_int8_check_says_int8_did_not_run_only_where_the_references_differ_beyond_flip_noise() -> None:
    """An output nearer the float-activation reference than the int8 one shows int8 activations
    did not run, if the two lie further apart than the flip noise; within it nothing can tell."""
    from fixed_web_platform.workloads.int8_activations import Int8Check

    rng = np.random.default_rng(0)
    int8_ref = rng.standard_normal(1000)
    float_ref = int8_ref + 0.1 * rng.standard_normal(1000)  # 0.1 apart (relative RMS)
    check = Int8Check(floor=0.03, float_acts=float_ref)
    assert "did not run" in check.problem(float_ref + 1e-3 * rng.standard_normal(1000), int8_ref)
    assert check.problem(int8_ref + 1e-3 * rng.standard_normal(1000), int8_ref) == ""
    assert Int8Check(floor=0.2, float_acts=float_ref).problem(float_ref, int8_ref) == ""


def test_an_engines_own_dynamic_rule_holds_each_block_of_each_row() -> None:
    """ORT's DP4A rule (engines/ort/dp4a.held_activations) as a layer's ActQuant entry: each 128
    values of a row scaled by their own peak, rounded to 127 steps; a [batch, seq, K] input held as
    its rows are, and the layer computing held(x) @ W^T."""
    from fixed_web_platform.architectures import int8
    from fixed_web_platform.engines.ort import dp4a

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 256))
    x[0, 0, :128] *= 100  # one block's peak does not scale the next block's
    held = dp4a.held_activations(x)
    assert np.array_equal(held, dp4a.held_activations(x.reshape(6, 256)).reshape(x.shape))
    for row, part in ((0, slice(0, 128)), (0, slice(128, 256)), (5, slice(128, 256))):
        block, got = x.reshape(6, 256)[row, part], held.reshape(6, 256)[row, part]
        peak = np.float32(np.abs(block).max())
        assert np.allclose(got, np.floor(0.5 + 127 * (block.astype(np.float32) / peak)) * peak / 127, rtol=1e-6)
        assert np.abs(got - block).max() <= peak / 254 * 1.001  # half a step of its own block
    assert np.abs(held[0, 0, :128] - x[0, 0, :128]).max() > 10 * np.abs(held[0, 0, 128:] - x[0, 0, 128:]).max()
    w = rng.standard_normal((16, 256))
    y = int8.linear(x, w, "layer", {"layer": dp4a.held_activations})
    assert np.allclose(y, held.astype(np.float64) @ w.T)
    assert not np.allclose(y, x @ w.T, rtol=1e-4)

"""Where a decoder's static int8 activations lose their accuracy, and what smoothing wins back:
issue 71's diagnosis of SmolLM2-135M W8A8 on WebNN (top-1 0.53 against fp32 in the browser
before smoothing, at 3.3x float32's decode speed).

PyTorch fp32 (the transformers module) with int8 fake quantization on chosen linear layers, judged
on the decoder workload's evaluation rows against the original module without it: next-token
top-1 agreement and mean KL. The weights stay float, so each figure is what the activations alone
cost.

Every row uses scales made as the harness makes them (models/calibration.int8_parameters on the
built-in calibration texts: minmax, Q/K/V sharing one, 1-16 float output channels where int8
cannot hold a layer's output), of the model the harness holds: smoothed (models/smoothing.py,
SmoothQuant folded into the weights) at ``alpha``, or not (``unsmoothed``). The rows without
``--per-token`` calibrate one scale per input tensor, the decoders' form before per-token inputs;
the harness's form is the ``--per-token`` row at the decoder's floor with the layers missing it
in float.

    .venv/bin/python benchmarks/w8a8_decoder_accuracy.py [--model smollm2-135m] [--alphas 0.5 0.8]
        [--min-sqnr 25 30 38] [--on calibration] [--per-token]

``--min-sqnr``: rows with other floors for a layer's output to go through int8 (the decoder's is
models/calibration.DECODER_OUT_INT8_MIN_SQNR_DB); ``--on calibration``: judged on the calibration
rows instead of the evaluation rows (where a setting is chosen); ``--per-token``: rows with each
input divided by its position's peak around the fused form (the decoders' form: the harness's
scaling, models/calibration.ActivationQuant.per_token), at the decoder's floor and the others,
position 0 in float or not, the layers missing the floor in float or not (about 4 minutes more).

About a minute here (2 cores) for SmolLM2-135M.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.models import calibration, rules, smoothing, source  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402
from fixed_web_platform.workloads.decoder.workload import DecoderWorkload  # noqa: E402

Quant = dict[str, tuple[float, int, tuple[int, ...]]]
"""layer -> (scale, zero point, float channels), for its input or its output."""


def _keep_first(q, x, k: int):  # noqa: ANN001, ANN202
    """``q`` with its first ``k`` positions (dimension 1) taken from ``x``."""
    if k:
        q[:, :k] = x[:, :k]
    return q


def fake_quantize(x, scale: float, zero_point: int, keep: tuple[int, ...] = ()):  # noqa: ANN001, ANN201
    import torch

    q = (torch.clamp(torch.round(x / scale) + zero_point, -128, 127) - zero_point) * scale
    if keep:
        q[..., list(keep)] = x[..., list(keep)]
    return q


class Judge:
    """The original module's logits of the evaluation rows, and a held model's int8 scales."""

    def __init__(self, model: str, on_calibration: bool = False) -> None:
        import torch

        self.workload = DecoderWorkload.from_options(model)
        self.loaded = source.load(source.resolve(self.workload.model))
        self.plan = tuple(rules.assign(self.loaded.config.linear_layers(), self.workload.rules, 8, 0))
        self.texts = calibration.DecoderRows(calibration.builtin_calibration_texts())
        ids = self.workload.tokens().eval_ids
        if on_calibration:
            tok = source.tokenizer(self.loaded.resolved)
            joined = [i for t in self.texts.texts for i in tok(t, add_special_tokens=False)["input_ids"]]
            row = calibration.CALIBRATION_ROW
            ids = np.array(joined[: len(joined) // row * row]).reshape(-1, row)
        self.ids = torch.from_numpy(ids.astype(np.int64))
        self.ref = self._logits(self.loaded.module())

    def _logits(self, net):  # noqa: ANN001, ANN202
        import torch

        with torch.no_grad():
            return net(input_ids=self.ids).logits.double()

    def held(self, alpha: float | None, min_sqnr_db: float | None = None) -> tuple[object, Quant, Quant]:
        """The held model's module (smoothed at ``alpha``, or the original: None) and its scales
        with one calibrated scale per input tensor (the form before per-token inputs; outputs in
        int8 at ``min_sqnr_db`` or better: the decoder's floor unless given)."""
        model = smoothing.smoothed(self.loaded, self.texts, alpha) if alpha is not None else self.loaded
        floor = calibration.DecoderRows.out_min_sqnr_db if min_sqnr_db is None else min_sqnr_db
        per_tensor = type("Rows", (calibration.DecoderRows,), {"out_min_sqnr_db": floor, "per_token": False})
        texts = per_tensor(self.texts.texts)  # the same rows, one scale per input tensor
        act, out, _ = calibration.int8_parameters(model, texts, self.plan, 8, "minmax", True)
        names = [p.layer.name for p in self.plan]
        return (model.module(), {n: (a.scale, a.zero_point, ()) for n, a in zip(names, act) if a},
                {n: (o.scale, o.zero_point, o.float_channels) for n, o in zip(names, out) if o})

    def score(self, net, inputs: Quant, outputs: Quant,  # noqa: ANN001
              only: Callable[[str], bool] = lambda name: True) -> tuple[float, float]:
        """(top-1, KL) of ``net`` with the named layers' inputs and outputs through int8."""
        import torch

        handles = []
        for name, module in self.loaded.architecture.linear_modules(net).items():
            if not only(name):
                continue
            if name in inputs:
                handles.append(module.register_forward_pre_hook(
                    lambda _m, args, q=inputs[name]: (fake_quantize(args[0], *q),)))
            if name in outputs:
                def out(m, _args, y, q=outputs[name]):  # noqa: ANN001, ANN202
                    bias = m.bias if m.bias is not None else 0
                    return fake_quantize(y - bias, *q) + bias
                handles.append(module.register_forward_hook(out))
        try:
            logits = self._logits(net)
        finally:
            for handle in handles:
                handle.remove()
        top1 = float((logits.argmax(-1) == self.ref.argmax(-1)).double().mean())
        ref, got = torch.log_softmax(self.ref, -1), torch.log_softmax(logits, -1)
        return top1, float((ref.exp() * (ref - got)).sum(-1).mean())

    def per_token(self, model, min_sqnr_db: float | None, keep_first: int = 0,  # noqa: ANN001
                  float_missing: bool = False) -> tuple[float, float]:
        """(top-1, KL) of ``model`` with every linear layer's input divided by its position's
        peak |x| (a float reduction the graph would add) before int8 at scale 1/127, and x @ W^T
        of that through int8 per tensor as the fused form needs (at ``min_sqnr_db`` or better,
        calibrated on the normalised outputs; None: outputs float), then multiplied back; the
        first ``keep_first`` positions of each row in float and left out of calibration;
        ``float_missing``: the layers whose outputs miss the floor wholly in float (input too)."""
        import torch

        layers = tuple(p.layer.name for p in self.plan)
        ranges = calibration._OutputRanges(layers)
        outputs: dict[str, tuple] = {}

        def patched(mode: str):  # noqa: ANN202
            net = model.module()
            for name, module in model.architecture.linear_modules(net).items():
                def forward(x, m=module, name=name):  # noqa: ANN001, ANN202
                    if mode == "score" and float_missing and name not in outputs:
                        return torch.nn.functional.linear(x, m.weight, m.bias)
                    peak = x.abs().amax(-1, keepdim=True).clamp(min=1e-12)
                    xn = x / peak
                    if mode == "score":
                        xn = _keep_first(fake_quantize(xn, 1 / 127, 0), xn, keep_first)
                    y = torch.nn.functional.linear(xn, m.weight)
                    if mode == "calibrate":
                        ranges.gather(name, y[:, keep_first:].detach().double().reshape(-1, y.shape[-1]).numpy())
                    elif name in outputs:
                        y = _keep_first(fake_quantize(y, *outputs[name]), y, keep_first)
                    y = y * peak
                    return y if m.bias is None else y + m.bias
                module.forward = forward
            return net

        if min_sqnr_db is not None:
            with torch.no_grad():
                self.texts.run(model, patched("calibrate"), [])
            floor = type("Rows", (calibration.DecoderRows,), {"out_min_sqnr_db": min_sqnr_db})
            chosen = calibration._output_params(ranges, model, floor(self.texts.texts), "minmax")
            outputs.update({n: o.act_quant() for n, o in chosen.items() if o})
        return self.score(patched("score"), {}, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--alphas", nargs="*", type=float, default=[0.5, 0.8],
                        help=f"other smoothing strengths to try besides the harness's {smoothing.SMOOTH_ALPHA:g}")
    parser.add_argument("--min-sqnr", nargs="*", type=float, default=[],
                        help="other floors (dB) for a layer's output to go through int8")
    parser.add_argument("--per-token", action="store_true",
                        help="rows with each input scaled by its position's peak before int8 (a per-token "
                             "scale around the fused form), its outputs at the floors, position 0 in float or not")
    parser.add_argument("--on", choices=["evaluation", "calibration"], default="evaluation",
                        help="the rows judged (default: the workload's evaluation rows)")
    args = parser.parse_args()
    judge = Judge(args.model, args.on == "calibration")
    alpha = smoothing.SMOOTH_ALPHA
    net, ins, outs = judge.held(alpha)
    rows = [(f"smoothed a={alpha:g}, inputs per tensor: every layer, inputs and outputs (the fused form)",
             judge.score(net, ins, outs)),
            (f"smoothed a={alpha:g}: inputs only", judge.score(net, ins, {})),
            (f"smoothed a={alpha:g}: outputs only", judge.score(net, {}, outs))]
    for kind in sorted({name.rsplit(".", 1)[-1] for name in ins}):
        alone = lambda name, kind=kind: name.rsplit(".", 1)[-1] == kind  # noqa: E731
        rows.append((f"smoothed a={alpha:g}: {kind} alone, inputs and outputs", judge.score(net, ins, outs, only=alone)))
    net, ins, outs = judge.held(None)
    rows += [("unsmoothed: every layer, inputs and outputs", judge.score(net, ins, outs)),
             ("unsmoothed: inputs only", judge.score(net, ins, {}))]
    for other in args.alphas:
        net, ins, outs = judge.held(other)
        rows.append((f"smoothed a={other:g}: every layer, inputs and outputs", judge.score(net, ins, outs)))
    for floor in args.min_sqnr:
        net, ins, outs = judge.held(alpha, floor)
        rows.append((f"smoothed a={alpha:g}, outputs in int8 at {floor:g} dB or better ({len(outs)} of "
                     f"{len(judge.plan)}): every layer", judge.score(net, ins, outs)))
    if args.per_token:
        for alpha_pt in (None, alpha):
            model = smoothing.smoothed(judge.loaded, judge.texts, alpha_pt) if alpha_pt else judge.loaded
            what = f"smoothed a={alpha_pt:g}" if alpha_pt else "unsmoothed"
            rows.append((f"{what}, inputs scaled per position: inputs only", judge.per_token(model, None)))
            for floor in (calibration.DECODER_OUT_INT8_MIN_SQNR_DB, *args.min_sqnr):
                for first in (0, 1):
                    rows.append((f"{what}, inputs scaled per position, outputs at {floor:g} dB"
                                 + (", position 0 in float" if first else ""), judge.per_token(model, floor, first)))
                rows.append((f"{what}, inputs scaled per position, outputs at {floor:g} dB, layers missing it in float",
                             judge.per_token(model, floor, float_missing=True)))
    positions = judge.ids.numel()
    print(f"{args.model}: int8 fake quantization in PyTorch fp32, {positions} {args.on} positions\n")
    print("\n".join(markdown_lines(["int8 on", "top-1 vs fp32", "KL"],
                                   [[what, f"{top1:.3f}", f"{kl:.3g}"] for what, (top1, kl) in rows])))


if __name__ == "__main__":
    main()

"""Where a decoder's static int8 activations lose their accuracy, and what smoothing would buy:
issue 71's diagnosis of SmolLM2-135M W8A8 on WebNN (top-1 0.53 against fp32 in the browser, at
2.9x float32's decode speed).

PyTorch fp32 (the transformers module, float weights) with int8 fake quantization on chosen
linear layers, judged on the decoder workload's evaluation rows against the same module without
it: next-token top-1 agreement and mean KL. The weights stay float, so each figure is what the
activations alone cost.

- ``harness ...`` rows use the scales the harness's graphs hold (models/calibration.int8_parameters
  on the built-in calibration texts: minmax, Q/K/V sharing one, 1-16 float output channels where
  int8 cannot hold a layer's output).
- ``smooth a=...`` rows migrate each layer's input outliers into its weights first (SmoothQuant:
  s_j = max|x_j|^a / max|W_j|^(1-a), x / s quantized, W * s), scales recalibrated by minmax on the
  smoothed inputs over the same texts, no float channels.

    .venv/bin/python benchmarks/w8a8_decoder_accuracy.py [--model smollm2-135m] [--alphas 0.5 0.7]

About a minute here (2 cores) for SmolLM2-135M.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.models import calibration, rules, source  # noqa: E402
from fixed_web_platform.precision.observers import make_observer  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402
from fixed_web_platform.workloads.decoder.workload import DecoderWorkload  # noqa: E402

Quant = dict[str, tuple[float, int, tuple[int, ...]]]
"""layer -> (scale, zero point, float channels), for its input or its output."""


def fake_quantize(x, scale: float, zero_point: int, keep: tuple[int, ...] = ()):  # noqa: ANN001, ANN201
    import torch

    q = (torch.clamp(torch.round(x / scale) + zero_point, -128, 127) - zero_point) * scale
    if keep:
        q[..., list(keep)] = x[..., list(keep)]
    return q


class Judge:
    """The module, its evaluation rows and fp32's logits of them."""

    def __init__(self, model: str) -> None:
        import torch

        self.workload = DecoderWorkload.from_options(model)
        self.loaded = source.load(source.resolve(self.workload.model))
        self.plan = tuple(rules.assign(self.loaded.config.linear_layers(), self.workload.rules, 8, 0))
        self.net = self.loaded.module()
        self.modules = self.loaded.architecture.linear_modules(self.net)
        self.ids = torch.from_numpy(self.workload.tokens().eval_ids.astype(np.int64))
        self.ref = self._logits()

    def _logits(self):  # noqa: ANN202
        import torch

        with torch.no_grad():
            return self.net(input_ids=self.ids).logits.double()

    def score(self, inputs: Quant, outputs: Quant, smooth: dict[str, object] | None = None,
              only: Callable[[str], bool] = lambda name: True) -> tuple[float, float]:
        """(top-1, KL) with the named layers' inputs (divided by ``smooth`` first, multiplied back
        after: the weights' side of the migration) and outputs through int8."""
        import torch

        handles = []
        for name, module in self.modules.items():
            if not only(name):
                continue
            s = (smooth or {}).get(name, 1.0)
            if name in inputs:
                handles.append(module.register_forward_pre_hook(
                    lambda _m, args, q=inputs[name], s=s: (fake_quantize(args[0] / s, *q) * s,)))
            if name in outputs:
                def out(m, _args, y, q=outputs[name]):  # noqa: ANN001, ANN202
                    bias = m.bias if m.bias is not None else 0
                    return fake_quantize(y - bias, *q) + bias
                handles.append(module.register_forward_hook(out))
        try:
            logits = self._logits()
        finally:
            for handle in handles:
                handle.remove()
        top1 = float((logits.argmax(-1) == self.ref.argmax(-1)).double().mean())
        ref, got = torch.log_softmax(self.ref, -1), torch.log_softmax(logits, -1)
        return top1, float((ref.exp() * (ref - got)).sum(-1).mean())

    def harness_quant(self) -> tuple[Quant, Quant]:
        inputs = calibration.DecoderRows(calibration.builtin_calibration_texts())
        act, out, _ = calibration.int8_parameters(self.loaded, inputs, self.plan, 8, "minmax", True)
        names = [p.layer.name for p in self.plan]
        return ({n: (a.scale, a.zero_point, ()) for n, a in zip(names, act) if a},
                {n: (o.scale, o.zero_point, o.float_channels) for n, o in zip(names, out) if o})

    def smoothed_quant(self, alpha: float) -> tuple[dict[str, object], Quant, Quant]:
        """SmoothQuant's factors and minmax scales of the smoothed inputs and of the outputs."""
        import torch

        texts = calibration.DecoderRows(calibration.builtin_calibration_texts())
        peaks: dict[str, object] = {}

        def seen(name: str):  # noqa: ANN202
            def hook(_m, args):  # noqa: ANN001, ANN202
                x = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(0)
                peaks[name] = torch.maximum(peaks[name], x) if name in peaks else x
            return hook

        self._run(texts, {n: seen(n) for n in self.modules}, {})
        smooth = {n: ((peaks[n].clamp(min=1e-5) ** alpha)
                      / (m.weight.detach().abs().amax(0).clamp(min=1e-5) ** (1 - alpha))).clamp(min=1e-5)
                  for n, m in self.modules.items()}
        ins = {n: make_observer("minmax") for n in self.modules}
        outs = {n: make_observer("minmax") for n in self.modules}
        self._run(texts, {n: (lambda _m, a, n=n: ins[n].observe((a[0] / smooth[n]).double().numpy()
                                                                .reshape(-1, a[0].shape[-1])))
                          for n in self.modules},
                  {n: (lambda _m, _a, y, n=n: outs[n].observe(y.double().numpy().reshape(-1, y.shape[-1])))
                   for n in self.modules})

        def params(observers: dict) -> Quant:  # noqa: ANN001
            return {n: (float(np.float32(o.qparams(8)[0].reshape(-1)[0])), int(o.qparams(8)[1].reshape(-1)[0]), ())
                    for n, o in observers.items()}
        return smooth, params(ins), params(outs)

    def _run(self, texts: calibration.DecoderRows, pre: dict, post: dict) -> None:  # noqa: ANN001
        import torch

        handles = [self.modules[n].register_forward_pre_hook(h) for n, h in pre.items()]
        handles += [self.modules[n].register_forward_hook(h) for n, h in post.items()]
        try:
            with torch.no_grad():
                texts.run(self.loaded, self.net, [])
        finally:
            for handle in handles:
                handle.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--alphas", nargs="*", type=float, default=[0.5, 0.7])
    args = parser.parse_args()
    judge = Judge(args.model)
    ins, outs = judge.harness_quant()
    rows = [("harness: every layer, inputs and outputs (the fused form)", judge.score(ins, outs)),
            ("harness: inputs only", judge.score(ins, {})), ("harness: outputs only", judge.score({}, outs))]
    kinds = sorted({name.rsplit(".", 1)[-1] for name in judge.modules})
    for kind in kinds:
        alone = lambda name, kind=kind: name.rsplit(".", 1)[-1] == kind  # noqa: E731
        rows.append((f"harness: {kind} alone, inputs and outputs", judge.score(ins, outs, only=alone)))
        rows.append((f"harness: {kind} alone, inputs only", judge.score(ins, {}, only=alone)))
    for alpha in args.alphas:
        smooth, s_ins, s_outs = judge.smoothed_quant(alpha)
        rows.append((f"smooth a={alpha:g}: inputs and outputs", judge.score(s_ins, s_outs, smooth)))
        rows.append((f"smooth a={alpha:g}: inputs only", judge.score(s_ins, {}, smooth)))
    positions = judge.ids.numel()
    print(f"{args.model}: int8 fake quantization in PyTorch fp32, {positions} evaluation positions\n")
    print("\n".join(markdown_lines(["int8 on", "top-1 vs fp32", "KL"],
                                   [[what, f"{top1:.3f}", f"{kl:.3g}"] for what, (top1, kl) in rows])))


if __name__ == "__main__":
    main()

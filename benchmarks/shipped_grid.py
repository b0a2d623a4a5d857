"""Why a quantizer can look better on a model than it is: each linear layer's weight error (relative
RMS against the weights the harness treats as float) under every weight quantizer, at one bits and
block. SmolLM2-135M's "float" weights are its shipped GGUF dequantized (Q4_1 body, Q8_0 head), so a
quantizer with Q4_1's rule re-finds that grid exactly: its 4-bit error is 0 on every body layer,
where min/max's is 8-9%. docs/design/weight-quantizers.md#why-q4_1-beats-minmax-on-smollm2 cites it.

    .venv/bin/python benchmarks/shipped_grid.py [--model smollm2-135m] [--bits 4] [--block-size 32]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.models import source  # noqa: E402
from fixed_web_platform.precision.quantizers import QUANTIZERS, quantize  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--bits", type=int, default=4)
    parser.add_argument("--block-size", type=int, default=32)
    args = parser.parse_args()
    model = source.load(source.resolve(args.model, False), False, 0)
    names = [q for q, spec in QUANTIZERS.items() if not spec.calibrated]  # per tensor, no calibration set
    body = []
    for layer in model.config.linear_layers():
        w = np.asarray(model.weights[f"{layer.name}.weight"], dtype=np.float32)
        body.append([layer.name, *(f"{quantize(w, args.bits, args.block_size, q).weight_error(w):.4f}" for q in names)])
    print(f"{args.model}: weight error per layer at {args.bits} bits, block {args.block_size}")
    print("\n".join(markdown_lines(["layer", *names], body)))


if __name__ == "__main__":
    main()

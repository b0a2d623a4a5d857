"""The weight-quantizer sweep of docs/design/weight-quantizers.md: every model at 32, 8, 4 and 2 bits
with every quantizer, on the harness's WebGPU (Firefox) and WebNN (Chrome, experimental mode) and
ONNX Runtime Web's wasm (Chrome), one results folder per (model, setting) under ``--output-dir``,
then one report over all of them: its first screen ("At a glance") is the table of bits,
quantizer, weight MiB, accuracy and speed, and names the pick per setting.

    .venv/bin/python benchmarks/quantizer_sweep.py --output-dir results/quantizer-sweep \\
        [--models minilm smollm2 whisper] [--settings webgpu-firefox ...] [--budget-min 120]

Resumable and budgeted: run the same command again to go on; a finished part is skipped, an
interrupted one continues (``--resume``, its plan.json decides what is left), and no new part
starts once ``--budget-min`` minutes have passed (the part under way finishes). Each part's time is
appended to ``parts.log`` in the output folder. Refusals (WebNN has no 2-bit type; ORT's WebGPU is
not in the matrix) are rows with their reason, not gaps. On these 2-core machines with software
adapters, compare within the sweep only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from fixed_web_platform.plan import PLAN_FILE, load_plan  # noqa: E402
from fixed_web_platform.precision.quantizers import QUANTIZERS  # noqa: E402

MODELS = {
    "minilm": ["--model", "all-MiniLM-L6-v2"],
    "smollm2": ["--model", "smollm2-135m"],
    "whisper": ["--model", "whisper-tiny.en", "--clips", "30", "--min-iterations", "1", "--timeout", "1800"],
}
"""Quickest first; Whisper's 30 clips are the issue's evaluation set."""
SETTINGS = {
    "webgpu-firefox": ["--browser", "firefox", "--platform", "webgpu"],
    "webnn-chrome": ["--browser", "chrome", "--platform", "webnn", "--experimental-precision"],
    "ort-wasm-chrome": ["--browser", "chrome", "--engine", "ort", "--platform", "wasm"],
}
BITS = ["32", "8", "4", "2"]


def part_command(model: str, setting: str, folder: Path) -> list[str]:
    """The main command for one part: a fresh sweep into ``folder``, or its resumption."""
    where = ["--resume", str(folder)] if (folder / PLAN_FILE).exists() else ["--output-dir", str(folder)]
    return [sys.executable, str(ROOT / "run_real_webgpu_webnn.py"), *MODELS[model], *SETTINGS[setting],
            "--bits", *BITS, "--weight-quant", *QUANTIZERS, "--no-report", *where]


def finished(folder: Path) -> bool:
    """Every planned run has a row (what --resume would skip)."""
    if not (folder / PLAN_FILE).exists() or not (folder / "results.csv").exists():
        return False
    runs, _ = load_plan(folder)
    return {r.run_id for r in runs} <= set(pd.read_csv(folder / "results.csv", usecols=["run_id"]).run_id)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--budget-min", type=float, default=float("inf"),
                        help="start no new part after this many minutes (default: no limit)")
    args = parser.parse_args()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for model in args.models:
        for setting in args.settings:
            folder = args.output_dir / f"{model}_{setting}"
            if finished(folder):
                continue
            if (time.monotonic() - start) / 60 > args.budget_min:
                print(f"budget of {args.budget_min:g} min spent: {model}_{setting} and later parts left for the next run")
                return 0
            began = time.monotonic()
            code = subprocess.call(part_command(model, setting, folder), cwd=ROOT)
            line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {model}_{setting}: exit {code}, " \
                   f"{(time.monotonic() - began) / 60:.1f} min"
            print(line, flush=True)
            with open(args.output_dir / "parts.log", "a") as log:
                log.write(line + "\n")
    folders = sorted(str(f) for f in args.output_dir.iterdir() if (f / "results.csv").exists())
    return subprocess.call([sys.executable, str(ROOT / "run_real_webgpu_webnn.py"), "report", *folders,
                            "--output-dir", str(args.output_dir / "report")], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())

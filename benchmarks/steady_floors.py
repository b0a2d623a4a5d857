"""How long each engine takes to reach its steady state in each browser: the measurement behind
run_spec.WARMUP_FLOORS_S (``--warmup-time auto``).

Record long series with no floor, in the counts protocol (so no page stops on a plateau before a
late tier-up), then read where each page's steady segment began:

    .venv/bin/python run_real_webgpu_webnn.py --browser chrome firefox --engine harness ort \\
        --platform webgpu webnn wasm --bits 8 --steady off --warmup 0 --warmup-time 0 \\
        --min-iterations 10 --min-time 12 --max-iterations 2048 --no-report \\
        --output-dir results/floors/matmul
    .venv/bin/python run_real_webgpu_webnn.py --model smollm2-135m --engine wllama \\
        --platform wasm --browser chrome firefox --bits 8 --prompt-len 8 --new-tokens 8 \\
        --eval-len 8 --steady off --warmup 0 --warmup-time 0 --min-iterations 10 --min-time 12 \\
        --no-report --output-dir results/floors/wllama
    .venv/bin/python benchmarks/steady_floors.py results/floors/*

Both sweeps are resumable (``--resume FOLDER``). For each (engine, platform, browser) it prints
the class tally, the median and largest warm-up seconds over the ok rows, and the floor they
suggest: the largest warm-up seen, rounded up to half a second, where the median warm-up is
over 0.25 s (below that a floor buys nothing the stop rule does not already give).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fixed_web_platform.report.markdown import markdown_table  # noqa: E402
from fixed_web_platform.results.reader import load  # noqa: E402

KEYS = ["engine", "platform", "browser"]


def floors_table(folders: list[Path]) -> pd.DataFrame:
    rows = pd.concat([load(f).rows for f in folders], ignore_index=True)
    ok = rows[rows["outcome"] == "ok"].copy()
    out = []
    for key, group in ok.groupby(KEYS, sort=True):
        warm = pd.to_numeric(group["warmup_s"], errors="coerce").dropna()
        median = float(warm.median()) if len(warm) else math.nan
        largest = float(warm.max()) if len(warm) else math.nan
        floor = math.ceil(largest * 2) / 2 if median > 0.25 else 0.0
        classes = group["steady_class"].value_counts()
        out.append(dict(zip(KEYS, key)) | {
            "rows": len(group),
            "tally": ", ".join(f"{c} x{n}" for c, n in classes.items()),
            "warmup_s_median": round(median, 2),
            "warmup_s_max": round(largest, 2),
            "suggested_floor_s": floor,
        })
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="result folders of the sweeps above")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not (f / "results.csv").is_file()]
    if missing:
        parser.error(f"no results.csv in {', '.join(missing)}")
    print(markdown_table(floors_table(args.folders)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The tier-pinned control (docs/concepts/steady-state.md): the same sweep twice, as it runs and
with the JavaScript engine's WebAssembly tier pinned to its optimizing compiler, then every
configuration whose steady level is more than 10% slower than the pinned one is flagged: a stop
on a flat plateau before a late tier-up, the one case timings alone cannot see.

    .venv/bin/python benchmarks/tier_control.py --output-dir /tmp/tier -- \\
        --browser chrome firefox --engine ort --platform wasm --bits 8 4

Everything after ``--`` goes to the main command (run_real_webgpu_webnn.py) for both sweeps; the
pinned one adds ``--browser-arg chrome=--js-flags=--no-liftoff`` (edge too) and
``--browser-pref firefox=javascript.options.wasm_baselinejit=false``. Each sweep is resumable:
run the same command again to finish an interrupted one (``--resume``). Prints one line per
configuration; exits 1 when any is flagged.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixed_web_platform.report.markdown import markdown_table  # noqa: E402
from fixed_web_platform.results.reader import load  # noqa: E402

PINNED = ["--browser-arg", "chrome=--js-flags=--no-liftoff", "--browser-arg", "edge=--js-flags=--no-liftoff",
          "--browser-pref", "firefox=javascript.options.wasm_baselinejit=false"]
SLOWER = 1.10
"""A steady level this much slower than the pinned one is flagged."""


def sweep(out: Path, args: list[str]) -> None:
    cmd = [sys.executable, str(ROOT / "run_real_webgpu_webnn.py")]
    cmd += ["--resume", str(out)] if (out / "plan.json").is_file() else [*args, "--output-dir", str(out), "--no-report"]
    subprocess.run(cmd, check=False)


def control_table(default: Path, pinned: Path) -> pd.DataFrame:
    """One row per configuration ok on both sides (the same plan: the same run ids)."""
    label = ["run_id", "browser", "engine", "platform", "workload", "bits_requested", "steady_class"]
    a, b = load(default).rows, load(pinned).rows
    both = a[a["outcome"] == "ok"][[*label, "latency_ms_median"]].merge(
        b[b["outcome"] == "ok"][["run_id", "latency_ms_median"]], on="run_id", suffixes=("_default", "_pinned"))
    ratio = both["latency_ms_median_default"] / both["latency_ms_median_pinned"]
    return both[label].assign(default_ms=both["latency_ms_median_default"].round(3),
                              pinned_ms=both["latency_ms_median_pinned"].round(3),
                              default_over_pinned=ratio.round(3),
                              flag=ratio.gt(SLOWER).map({True: "slower than pinned", False: ""}))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    args = parser.parse_args(argv[:cut])
    theirs = argv[cut + 1:]
    sweep(args.output_dir / "default", theirs)
    sweep(args.output_dir / "pinned", [*theirs, *PINNED])
    table = control_table(args.output_dir / "default", args.output_dir / "pinned")
    print(markdown_table(table) if len(table) else "no configuration ran ok in both sweeps")
    return 1 if table["flag"].ne("").any() else 0


if __name__ == "__main__":
    raise SystemExit(main())

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
    keys = ["run_id", "browser", "engine", "platform", "workload", "bits_requested"]
    a = load(default).rows.set_index("run_id")
    b = load(pinned).rows.set_index("run_id")
    rows = []
    for run_id, row in a.iterrows():
        if run_id not in b.index or row["outcome"] != "ok" or b.loc[run_id, "outcome"] != "ok":
            continue
        ratio = float(row["latency_ms_median"]) / float(b.loc[run_id, "latency_ms_median"])
        rows.append({**{k: row[k] for k in keys[1:]}, "run_id": run_id,
                     "steady_class": row.get("steady_class", ""),
                     "default_ms": round(float(row["latency_ms_median"]), 3),
                     "pinned_ms": round(float(b.loc[run_id, "latency_ms_median"]), 3),
                     "default_over_pinned": round(ratio, 3),
                     "flag": "slower than pinned" if ratio > SLOWER else ""})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, _, theirs = (argv[:argv.index("--")], None, argv[argv.index("--") + 1:]) if "--" in argv else (argv, None, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    args = parser.parse_args(ours)
    sweep(args.output_dir / "default", theirs)
    sweep(args.output_dir / "pinned", [*theirs, *PINNED])
    table = control_table(args.output_dir / "default", args.output_dir / "pinned")
    print(markdown_table(table))
    return 1 if (table["flag"] != "").any() else 0


if __name__ == "__main__":
    raise SystemExit(main())

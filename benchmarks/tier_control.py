"""The tier-pinned control (docs/concepts/steady-state.md): the same sweep twice, as it runs and
with the JavaScript engine's WebAssembly tier pinned to its optimizing compiler, then every
configuration whose steady level is more than 10% slower than the pinned one is flagged: a stop
on a flat plateau before a late tier-up, the one case timings alone cannot see.

    .venv/bin/python benchmarks/tier_control.py --output-dir /tmp/tier -- \\
        --browser firefox --engine ort --platform wasm --bits 8 4

Everything after ``--`` goes to the main command (run_real_webgpu_webnn.py) for both sweeps. The
pinned one runs only the browsers with a verified pin (``PINS``): Firefox's preference
``javascript.options.wasm_baselinejit=false`` (Ion only; its whole-module compile shows in
``compile_ms``: 36 s against 1.5 s for ORT's wasm). Chromium has none here (``NO_PIN``), and its
configurations are listed as not pinned. Each sweep is resumable: run the same command again to
finish an interrupted one (``--resume``). Prints one line per configuration; exits 1 when any is
flagged, 2 when no browser asked for has a pin.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixed_web_platform.cli.run import build_parser  # noqa: E402
from fixed_web_platform.report.markdown import markdown_table  # noqa: E402
from fixed_web_platform.results.reader import load  # noqa: E402

PINS = {"firefox": ["--browser-pref", "firefox=javascript.options.wasm_baselinejit=false"]}
"""What pins each browser's WebAssembly tier to its optimizing compiler (verified: it changes
compile_ms and the page still runs)."""
NO_PIN = ("no faithful tier pin in Chromium here: --js-flags=--no-liftoff stalls ONNX Runtime's page 140 s "
          "and then fails its fetch, and V8's tiering flags (--wasm-tiering-budget, --no-wasm-dynamic-tiering) "
          "ran ORT's wasm 2-3x slower (docs/concepts/steady-state.md)")
SLOWER = 1.10
"""A steady level this much slower than the pinned one is flagged."""
CONFIGURATION = ["browser", "engine", "platform", "workload", "bits_requested", "weight_format"]
"""A configuration's rows (its --repetitions, each a fresh page load) are summarised by their
median on each side: the page load is the unit of independence."""


def sweep(out: Path, args: list[str]) -> None:
    cmd = [sys.executable, str(ROOT / "run_real_webgpu_webnn.py")]
    cmd += ["--resume", str(out)] if (out / "plan.json").is_file() else [*args, "--output-dir", str(out), "--no-report"]
    subprocess.run(cmd, check=False)


def browsers_asked(args: list[str]) -> list[str]:
    """The browsers the main command would run with these arguments (its own parser, its default)."""
    known, _ = build_parser().parse_known_args(args)
    return [str(b) for b in known.browser]


def pinned_args(args: list[str]) -> list[str] | None:
    """The main command's arguments for the pinned sweep: only the browsers with a pin, each
    with it (a repeated --browser replaces the earlier one; None: none of them has one)."""
    pinned = [b for b in browsers_asked(args) if b in PINS]
    if not pinned:
        return None
    return [*args, "--browser", *pinned, *(arg for b in pinned for arg in PINS[b])]


def control_table(default: Path, pinned: Path) -> pd.DataFrame:
    """One row per configuration ok in the default sweep, beside its pinned figure where the
    browser has a pin."""
    a = _per_configuration(load(default).rows)
    b = _per_configuration(load(pinned).rows) if (pinned / "results.csv").is_file() else a.iloc[:0]
    both = a.merge(b[[*CONFIGURATION, "latency_ms_median"]], on=CONFIGURATION, how="left", suffixes=("_default", "_pinned"))
    ratio = both["latency_ms_median_default"] / both["latency_ms_median_pinned"]
    flag = ratio.gt(SLOWER).map({True: "slower than pinned", False: ""})
    flag[~both["browser"].isin(list(PINS))] = "not pinned: no tier pin in this browser"
    flag[both["browser"].isin(list(PINS)) & ratio.isna()] = "pinned run not ok"
    return both[[*CONFIGURATION, "page_loads", "steady_class"]].assign(default_ms=both["latency_ms_median_default"].round(3),
                                                        pinned_ms=both["latency_ms_median_pinned"].round(3),
                                                        default_over_pinned=ratio.round(3), flag=flag)


def _per_configuration(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows, one per configuration: the median of its rows' medians, how many there were
    and their classes."""
    ok = rows[rows["outcome"] == "ok"]
    return ok.groupby(CONFIGURATION, as_index=False, dropna=False).agg(
        latency_ms_median=("latency_ms_median", "median"), page_loads=("latency_ms_median", "size"),
        steady_class=("steady_class", lambda c: ", ".join(sorted(set(map(str, c))))))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    args = parser.parse_args(argv[:cut])
    theirs = argv[cut + 1:]
    pinned = pinned_args(theirs)
    if any(b not in PINS for b in browsers_asked(theirs)):
        print(NO_PIN, file=sys.stderr)
    if pinned is None:
        return 2
    sweep(args.output_dir / "default", theirs)
    sweep(args.output_dir / "pinned", pinned)
    table = control_table(args.output_dir / "default", args.output_dir / "pinned")
    print(markdown_table(table) if len(table) else "no configuration ran ok in the default sweep")
    return 1 if table["flag"].eq("slower than pinned").any() else 0


if __name__ == "__main__":
    raise SystemExit(main())

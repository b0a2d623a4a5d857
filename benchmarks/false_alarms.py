"""Does compare cry wolf? False alarms between back-to-back sweeps of the same code, and the
smallest planted slowdown still caught, per --repetitions; with --history, the same for the
history judge (compare OLDEST ... CURRENT) night after night over a series of sweeps.

    # a history: sweeps of the same code one after another, with the nightly's settings
    for i in $(seq -w 0 22); do
      .venv/bin/python run_real_webgpu_webnn.py --platform webgpu --browser chrome \
          --bits 32 16 8 4 2 --repetitions 5 --output-dir /tmp/history/n$i
    done
    .venv/bin/python benchmarks/false_alarms.py --history /tmp/history/n*

With --history, every night from the 6th on is judged against the nights before it (both in the
order recorded and reversed: a second same-code history from the same measurements), then a step
of each --factor is planted in one configuration at a time on that night and the next (the
configuration's raw samples multiplied) and counted caught when that night or the next calls it a
regression; "whole sweep" plants it in every configuration at once.

    # 10 pairs of back-to-back sweeps, e.g. (see docs/guides/comparing-and-history.md):
    for i in 01 02 ...; do for s in a b; do
      .venv/bin/python run_real_webgpu_webnn.py --platform webgpu --browser chrome \\
          --bits 8 4 --shape 4x256x256 --repetitions 5 --output-dir /tmp/fa/pair${i}_$s
    done; done
    .venv/bin/python benchmarks/false_alarms.py /tmp/fa/pair*_a /tmp/fa/pair*_b

Folders pair up in order: the first half are baselines, the second half their currents (the
glob above sorts them so). For each --repetitions (each configuration's first rounds kept) and each planted
factor (every raw sample of the current side multiplied), it prints how many configurations
compare called a regression, how many it found insufficient, and how many it compared.
``--save-fixture FILE.tar.gz`` also packs the folders, trimmed to what compare reads (results.csv,
environment.json, and the headline samples per page), as tests/fixtures/false_alarms/ holds them.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.analysis.compare import Verdict  # noqa: E402
from fixed_web_platform.analysis.false_alarms import history_tally, tally  # noqa: E402
from fixed_web_platform.analysis.history import sweep_figures  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402
from fixed_web_platform.results.reader import headline_key, load  # noqa: E402

FACTORS = (1.0, 1.1, 1.2, 1.3, 1.5, 2.0)
REPETITIONS = (1, 2, 3, 5)


KEPT = ("run_id", "schema_version", "outcome", "timing_source", "samples_per_page")
"""What compare reads of a samples record (with the headline samples)."""


def save_fixture(folders: list[Path], target: Path, root: Path | None = None) -> None:
    """Pack the folders (named by their path under ``root``, else their last path part) with only
    what compare reads."""
    with tarfile.open(target, "w:gz") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for folder in folders:
            name = folder.relative_to(root).as_posix() if root is not None else folder.name
            add(f"{name}/results.csv", (folder / "results.csv").read_bytes())
            add(f"{name}/environment.json", (folder / "environment.json").read_bytes())
            lines = []
            for line in (folder / "samples.jsonl").read_text().splitlines():
                record = json.loads(line)
                key = headline_key(record)
                trimmed = {k: record[k] for k in KEPT if k in record}
                trimmed[key] = [None if v is None else round(v, 5) for v in record.get(key) or []]
                lines.append(json.dumps(trimmed))
            add(f"{name}/samples.jsonl", ("\n".join(lines) + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="baselines, then their currents")
    p.add_argument("--repetitions", nargs="+", type=int, default=list(REPETITIONS),
                   help="repetitions (rounds) per configuration to keep (the first ones)")
    p.add_argument("--factor", nargs="+", type=float, default=list(FACTORS),
                   help="planted slowdowns (1.0 = the false-alarm row)")
    p.add_argument("--save-fixture", type=Path, default=None, metavar="FILE.tar.gz",
                   help="also pack the folders, trimmed, as a test fixture")
    p.add_argument("--history", action="store_true",
                   help="the folders are one history, oldest first: judge it night after night")
    args = p.parse_args(argv)
    if args.history:
        return history_main(args)
    if len(args.folders) % 2:
        p.error("give an even number of folders: the baselines, then their currents")
    half = len(args.folders) // 2
    sets = [load(f) for f in args.folders]
    pairs = list(zip(sets[:half], sets[half:], strict=True))
    head = ["--repetitions", "planted", "regression", "insufficient", "unchanged", "improvement",
            "configurations"]
    body = []
    for repetitions in args.repetitions:
        for factor in args.factor:
            t = tally(pairs, factor=factor, repetitions=repetitions)
            body.append([str(repetitions), "none (false alarms)" if factor == 1.0 else f"{factor:g}x",
                         f"{t.count(Verdict.REGRESSION)}", f"{t.count(Verdict.INSUFFICIENT)}",
                         f"{t.count(Verdict.UNCHANGED)}", f"{t.count(Verdict.IMPROVEMENT)}",
                         f"{t.configurations}"])
    return _print(f"{len(pairs)} pairs of sweeps", head, body, args)


def _print(title: str, head: list[str], body: list[list[str]], args: argparse.Namespace) -> int:
    print(f"{title}\n")
    print("\n".join(markdown_lines(head, body)))
    if args.save_fixture is not None:
        save_fixture(args.folders, args.save_fixture)
        print(f"\nfixture: {args.save_fixture}")
    return 0


def history_main(args: argparse.Namespace) -> int:
    sweeps = [sweep_figures(load(f)) for f in args.folders]
    factors = [f for f in args.factor if f != 1.0]
    head = ["order", "planted in", "judgements", "regression", "improvement", "insufficient",
            *(f"{f:g}x caught" for f in factors)]
    body = []
    for order, series in (("as recorded", sweeps), ("reversed", sweeps[::-1])):
        for whole in (False, True):
            t = history_tally(series, factors, whole_sweep=whole)
            body.append([order, "every configuration" if whole else "one configuration", str(t.judgements),
                         str(t.count(Verdict.REGRESSION)), str(t.count(Verdict.IMPROVEMENT)),
                         str(t.count(Verdict.INSUFFICIENT)),
                         *(f"{t.caught[f]} of {t.planted} ({t.rate(f):.0%})" for f in factors)])
    return _print(f"{len(sweeps)} sweeps, {len(sweeps[-1].rounds)} configurations in the newest", head, body, args)


if __name__ == "__main__":
    raise SystemExit(main())

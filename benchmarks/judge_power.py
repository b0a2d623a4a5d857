"""Does the history judge catch a 1.5x step after five sweeps of the same code, without crying
wolf? Issue 72's target: against five sweeps of the same code (the default shapes, --bits 32 8 4,
--repeat 3), a sixth with its 4-bit samples planted 1.5x slower is called on both shapes, and the
unplanted sixth is not, in at least 4 of 5 independent repeats.

    # print the commands for the sweeps not recorded yet (5 repeats of 6 sweeps, one after another)
    .venv/bin/python benchmarks/judge_power.py results/judge-power --commands
    # judge every complete repeat (resumable: repeats already judged are read from
    # results/judge-power/judge_power.json; a repeat's verdicts are redone when its folders change)
    .venv/bin/python benchmarks/judge_power.py results/judge-power
    # pack the complete repeats, trimmed to what the judge reads, as a test fixture
    .venv/bin/python benchmarks/judge_power.py results/judge-power --save-fixture judge_power.tar.gz

A repeat is ROOT/repeatN/s1 ... s6 (s1 recorded first). In each, s6 is judged against s1..s5 as
`compare s1 ... s6` judges it (analysis/history.py's history_compare): as recorded (any regression
verdict is a false alarm), and with s6's --planted-bits runs' raw samples multiplied by --factor
(caught when every shape's planted configurations are called regressions).

``--windows``: every SWEEPS consecutive sweeps in recording order (across repeats; the sweeps are
all of the same code) stand for a repeat: more judgements from the same sweeps, overlapping, so
not independent. ``--pages N``: each run's first N page loads, as a sweep with --repeat N would
have given.

``--rounds-as-sweeps FOLDER...`` validates the script on sweeps recorded with several
--repetitions (tests/fixtures/false_alarms/): each round of each folder, in order, stands for a
sweep of one browser session, and consecutive groups of six are the repeats.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.false_alarms import save_fixture  # noqa: E402
from fixed_web_platform.analysis.false_alarms import (  # noqa: E402
    RepeatResult,
    first_pages,
    judge_repeat,
    one_round,
)
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402
from fixed_web_platform.results.reader import load  # noqa: E402

SWEEPS = 6
"""Five sweeps of history and the sixth judged."""
TARGET = 4
"""Repeats (of REPEATS) that must call the planted step on every shape and nothing unplanted."""
REPEATS = 5
RECORD = (".venv/bin/python run_real_webgpu_webnn.py --platform webgpu --browser chrome --bits 32 8 4 "
          "--repeat 3 --output-dir {folder}")
STATE = "judge_power.json"


def _digest(folders: list[Path]) -> str:
    h = hashlib.sha256()
    for f in folders:
        h.update((f / "results.csv").read_bytes())
    return h.hexdigest()[:16]


def _recorded_repeats(root: Path, repeats: int) -> tuple[dict[str, list[Path]], list[str]]:
    """The complete repeats under ``root`` and the commands for the sweeps still missing (in
    recording order: a repeat's sweeps one after another)."""
    complete, missing = {}, []
    for n in range(1, repeats + 1):
        folders = [root / f"repeat{n}" / f"s{i}" for i in range(1, SWEEPS + 1)]
        absent = [f for f in folders if not (f / "results.csv").is_file()]
        if absent:
            missing += [RECORD.format(folder=f) for f in absent]
        else:
            complete[f"repeat{n}"] = folders
    return complete, missing


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("root", type=Path, nargs="?", help="folder of repeat1/s1 ... repeatN/s6")
    p.add_argument("--commands", action="store_true", help="print the commands for the sweeps not recorded yet")
    p.add_argument("--repeats", type=int, default=REPEATS)
    p.add_argument("--factor", type=float, default=1.5)
    p.add_argument("--planted-bits", type=int, nargs="+", default=[4])
    p.add_argument("--bits", type=int, nargs="+", default=[32, 8, 4],
                   help="with --rounds-as-sweeps: keep only these bits' runs, as a sweep with these --bits")
    p.add_argument("--save-fixture", type=Path, default=None, metavar="FILE.tar.gz",
                   help="also pack the complete repeats (repeatN/sM), trimmed to what the judge reads")
    p.add_argument("--windows", action="store_true",
                   help="every six consecutive sweeps (recording order, across repeats) stand for a repeat")
    p.add_argument("--pages", type=int, default=None, metavar="N",
                   help="each run's first N page loads only, as --repeat N would have given")
    p.add_argument("--rounds-as-sweeps", type=Path, nargs="+", default=None, metavar="FOLDER",
                   help="instead of ROOT: each round of these sweeps stands for a one-session sweep")
    args = p.parse_args(argv)
    bits = set(args.planted_bits)
    if args.rounds_as_sweeps:
        sessions = []
        for folder in args.rounds_as_sweeps:
            rs = load(folder)
            sessions += [one_round(rs, r, args.bits) for r in sorted({int(x) for x in rs.rows["repetition"]})]
        groups = {f"repeat{i // SWEEPS + 1}": sessions[i:i + SWEEPS]
                  for i in range(0, len(sessions) - SWEEPS + 1, SWEEPS)}
        results = {name: judge_repeat(sets, args.factor, bits) for name, sets in groups.items()}
        return _print(results, args, f"{len(sessions)} one-session sweeps from {len(args.rounds_as_sweeps)} folders")
    if args.root is None:
        p.error("give ROOT (or --rounds-as-sweeps FOLDER...)")
    complete, missing = _recorded_repeats(args.root, args.repeats)
    if args.commands or not complete:
        print(f"# {len(missing)} sweep(s) to record, one after another" if missing else "# every sweep is recorded")
        print("\n".join(missing))
        if args.commands:
            return 0
    if args.save_fixture is not None:
        save_fixture([f for folders in complete.values() for f in folders], args.save_fixture, args.root)
        print(f"fixture: {args.save_fixture} ({len(complete)} complete repeat(s))")
    groups, title = complete, f"{len(complete)} complete repeat(s) under {args.root}"
    if args.windows:
        order = [f for folders in complete.values() for f in folders]
        groups = {f"{_short(order[i], args.root)}..{_short(order[i + SWEEPS - 1], args.root)}": order[i:i + SWEEPS]
                  for i in range(len(order) - SWEEPS + 1)}
        title = f"{len(groups)} windows of {SWEEPS} consecutive sweeps under {args.root} (overlapping)"
    if args.pages:
        title += f", each run's first {args.pages} page load(s)"
    state_path = args.root / STATE
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    results = {}
    for name, folders in groups.items():
        key = f"{name} {_digest(folders)} x{args.factor:g} bits {sorted(bits)} pages {args.pages or 'all'} v2"
        if key not in state:
            sets = [load(f) for f in folders]
            sets = [first_pages(rs, args.pages) for rs in sets] if args.pages else sets
            state[key] = asdict(judge_repeat(sets, args.factor, bits))
            state_path.write_text(json.dumps(state, indent=1))  # after each repeat: an interrupted run resumes
        results[name] = RepeatResult(**state[key])
    return _print(results, args, title)


def _short(folder: Path, root: Path) -> str:
    return folder.relative_to(root).as_posix()


def _print(results: dict[str, RepeatResult], args: argparse.Namespace, title: str) -> int:
    head = ["repeat", "planted: caught on every shape", "unplanted: false alarms", "passes"]
    body = [[name, ", ".join(f"{w} {'/'.join(v)}" for w, v in r.planted.items()),
             ", ".join(r.false_alarms) or "none", "yes" if r.passed else "no"] for name, r in results.items()]
    print(f"{title}; {args.factor:g}x planted in the sixth's {sorted(set(args.planted_bits))}-bit runs\n")
    print("\n".join(markdown_lines(head, body)))
    caught = sum(r.caught for r in results.values())
    quiet = sum(not r.false_alarms for r in results.values())
    passed = sum(r.passed for r in results.values())
    alarms = sum(len(r.false_alarms) for r in results.values())
    judged = sum(r.judged for r in results.values())
    print(f"\ncaught on every shape in {caught} of {len(results)}; no false alarm in {quiet} of {len(results)} "
          f"({alarms} of {judged} unplanted judgements); both in {passed} of {len(results)} "
          f"(target: {TARGET} of {REPEATS} independent repeats)")
    for name, r in results.items():
        for config, note in r.notes.items():
            print(f"  {name} {config}: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

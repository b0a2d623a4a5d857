"""How often compare cries wolf, and what it still catches, measured on real sweeps.

Give it pairs of back-to-back sweeps of the same code on one machine. A regression verdict
between the two sides of a pair is a false alarm. A slowdown planted by scaling one side's raw
samples (every page load's, so the page-to-page spread is kept) shows the smallest change that
is still caught. ``repetitions`` keeps only each configuration's first repetitions (rounds), and
``pages`` each run's first page loads, to see what a smaller ``--repetitions`` / ``--repeat``
would have given from the same measurements.

benchmarks/false_alarms.py prints the tables; tests/test_compare_false_alarms.py asserts on
recorded sweeps. ``judge_repeat`` is issue 72's power target (benchmarks/judge_power.py): a sixth
sweep judged against five of the same code, as recorded and with a step planted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..results.reader import CONFIG_KEY, ResultSet, headline_key
from .compare import Verdict, compare

SAMPLE_KEYS = ("gpu_ms", "wall_ms")


def first_pages(rs: ResultSet, pages: int) -> ResultSet:
    """The same sweep as if it had run with ``--repeat pages``: each run's first page loads."""
    samples = {}
    for run_id, record in rs.samples.items():
        counts = record.get("samples_per_page")
        if not isinstance(counts, list) or len(counts) <= pages:
            samples[run_id] = record
            continue
        keep = sum(counts[:pages])
        trimmed = {k: (record[k][:keep] if isinstance(record.get(k), list) else record.get(k))
                   for k in SAMPLE_KEYS}
        samples[run_id] = record | trimmed | {"samples_per_page": counts[:pages]}
    return dataclasses.replace(rs, samples=samples)


def first_repetitions(rs: ResultSet, repetitions: int) -> ResultSet:
    """The same sweep as if it had run with ``--repetitions repetitions`` (its first rounds)."""
    return _rounds(rs, rs.rows["repetition"].astype(int) < repetitions)


def one_round(rs: ResultSet, repetition: int, bits: Collection[int] | None = None) -> ResultSet:
    """The sweep's round ``repetition`` alone, as a sweep of one browser session would be (named
    ``<folder>/round<repetition>``): a recorded --repetitions 5 sweep gives five such sweeps.
    ``bits``: only the runs asking for these bits, as a sweep with those --bits."""
    keep = rs.rows["repetition"].astype(int) == repetition
    if bits is not None:
        keep &= rs.rows["bits_requested"].astype(int).isin(list(bits))
    return dataclasses.replace(_rounds(rs, keep), directory=rs.directory / f"round{repetition}")


def _rounds(rs: ResultSet, keep: Any) -> ResultSet:
    """The sweep with only the rows ``keep`` (a boolean mask) selects, and their samples."""
    rows = rs.rows[keep].reset_index(drop=True)
    kept = {int(r) for r in rows["run_id"]}
    return dataclasses.replace(rs, rows=rows, samples={k: v for k, v in rs.samples.items() if k in kept})


def slowed(rs: ResultSet, factor: float, bits: Collection[int] | None = None) -> ResultSet:
    """The same sweep with every headline sample multiplied by ``factor`` (a planted slowdown);
    ``bits``: only the runs asking for these bits (bits_requested)."""
    chosen = None if bits is None else {
        int(r["run_id"]) for r in rs.rows.to_dict("records") if int(r["bits_requested"]) in set(bits)}
    samples = {}
    for run_id, record in rs.samples.items():
        key = headline_key(record)
        values = record.get(key)
        if isinstance(values, list) and (chosen is None or run_id in chosen):
            record = record | {key: [None if v is None else v * factor for v in values]}
        samples[run_id] = record
    return dataclasses.replace(rs, samples=samples)


@dataclass(frozen=True)
class Tally:
    """Verdicts over the latency-comparable configurations of several sweep pairs."""

    pairs: int
    configurations: int
    counts: dict[str, int]

    def count(self, verdict: Verdict) -> int:
        return self.counts.get(verdict.value, 0)


JUDGED = frozenset({Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED, Verdict.INSUFFICIENT})
"""Verdicts of configurations whose latency was compared (ok on both sides, same timing source)."""


def tally(pairs: Sequence[tuple[ResultSet, ResultSet]], *, factor: float = 1.0,
          repetitions: int | None = None, pages: int | None = None, **options: Any) -> Tally:
    """Compare every pair (current = second side, slowed by ``factor``), trimmed to the first
    ``repetitions`` and ``pages`` when given; count the verdicts."""
    counts: dict[str, int] = {}
    configurations = 0
    for base, cur in pairs:
        if repetitions is not None:
            base, cur = first_repetitions(base, repetitions), first_repetitions(cur, repetitions)
        if pages is not None:
            base, cur = first_pages(base, pages), first_pages(cur, pages)
        if factor != 1.0:
            cur = slowed(cur, factor)
        for entry in compare(base, cur, **options).entries:
            if entry.verdict not in JUDGED:
                continue
            configurations += 1
            counts[entry.verdict.value] = counts.get(entry.verdict.value, 0) + 1
    return Tally(pairs=len(pairs), configurations=configurations, counts=counts)


# ---------------------------------------------------------------------------------------------
# Judged against a history (analysis/history.py)


@dataclass(frozen=True)
class HistoryTally:
    """Verdicts over configurations judged against their history, night after night."""

    judgements: int
    """Configuration-nights judged (same code: each a chance of a false alarm)."""
    counts: dict[str, int]
    """Verdicts of those judgements (no step planted)."""
    caught: dict[float, int]
    """Planted factor -> configuration-nights whose step was called a regression on its night or
    the next."""
    planted: int
    """Steps planted per factor (one per configuration and step night)."""
    whole_sweep: bool = False

    def count(self, verdict: Verdict) -> int:
        return self.counts.get(verdict.value, 0)

    def rate(self, factor: float) -> float:
        return self.caught.get(factor, 0) / self.planted if self.planted else math.nan


def history_tally(sweeps: Sequence[Any], factors: Sequence[float] = (), *, first: int | None = None,
                  whole_sweep: bool = False, **options: Any) -> HistoryTally:
    """Night by night over ``sweeps`` (SweepFigures, oldest first): judge every configuration of
    night t against nights before it (same code: false alarms), and plant a step of each factor
    at night t in one configuration (``whole_sweep``: in every one) and count it caught when
    night t or t+1 calls it a regression. ``first``: the first night judged (default: the first
    with HISTORY_MIN nights before it)."""
    from .history import HISTORY_MIN, judge_history

    if not sweeps:
        raise ValueError("no sweeps to tally")
    start = HISTORY_MIN if first is None else first
    counts: dict[str, int] = {}
    caught = {f: 0 for f in factors}
    judgements = planted = 0
    configs = list(sweeps[-1].rounds)
    for t in range(start, len(sweeps)):
        for entry in judge_history(sweeps[:t + 1], with_steps=False, **options):
            judgements += 1
            counts[entry.verdict.value] = counts.get(entry.verdict.value, 0) + 1
        for config in configs:
            if config not in sweeps[t].rounds:
                continue
            planted += 1
            for f in factors:
                target = None if whole_sweep else config
                stepped = [*sweeps[:t], *(s.shifted(target, f) for s in sweeps[t:t + 2])]
                for end in range(t + 1, min(t + 2, len(sweeps)) + 1):
                    entry = judge_history(stepped[:end], configs=[config], with_steps=False, **options)[0]
                    if entry.verdict is Verdict.REGRESSION:
                        caught[f] += 1
                        break
    return HistoryTally(judgements, counts, caught, planted, whole_sweep)


# ---------------------------------------------------------------------------------------------
# A sixth sweep against five (issue 72's power target: benchmarks/judge_power.py)

_BITS, _WORKLOAD = CONFIG_KEY.index("bits_requested"), CONFIG_KEY.index("workload")


@dataclass(frozen=True)
class RepeatResult:
    """One repeat's verdicts: per workload its planted configurations' verdicts, and the
    configurations the unplanted sixth was called a regression in."""

    sweeps: list[str]
    planted: dict[str, list[str]]
    false_alarms: list[str]
    notes: dict[str, str]
    judged: int = 0
    """Configurations of the unplanted sixth whose latency was judged (each a chance of a false alarm)."""

    @property
    def caught(self) -> bool:
        return bool(self.planted) and all(v == Verdict.REGRESSION.value for vs in self.planted.values() for v in vs)

    @property
    def passed(self) -> bool:
        return self.caught and not self.false_alarms


def judge_repeat(sets: Sequence[ResultSet], factor: float, bits: Collection[int]) -> RepeatResult:
    """The last of ``sets`` against the earlier ones as ``compare`` judges a history
    (history.history_compare): as recorded (a regression is a false alarm), and with its ``bits``
    runs' raw samples multiplied by ``factor`` (caught when every workload's are regressions)."""
    from .history import history_compare

    unplanted = history_compare(sets).comparison.entries
    planted = history_compare([*sets[:-1], slowed(sets[-1], factor, bits=bits)]).comparison.entries
    by_workload: dict[str, list[str]] = {}
    notes = {}
    for e in planted:
        if e.config[_BITS] in bits:
            by_workload.setdefault(str(e.config[_WORKLOAD]), []).append(e.verdict.value)
            notes[f"{e.config[_WORKLOAD]} {e.config[_BITS]}-bit"] = e.note
    alarms = [f"{e.config[_WORKLOAD]} {e.config[_BITS]}-bit" for e in unplanted if e.verdict.is_regression]
    judged = sum(1 for e in unplanted if e.verdict in JUDGED)
    return RepeatResult([str(rs.directory) for rs in sets], by_workload, alarms, notes, judged)

"""Compare two result folders: which configurations got slower, faster, less accurate, broke or
were fixed.

Latency is judged on independent units, never on pooled iterations: iterations of one page
share that load's state (JIT, allocation, what else the machine did), and pages of one run share
its browser session, so pooling them as independent samples makes noise look significant. A
configuration's units are its repetitions (``--repetitions``: rounds, each in a fresh browser
session, spread over the sweep's time) when it has several, else the page loads of its one run
(``--repeat``). Each unit's median is one observation; the change is the ratio of pooled medians,
with a Welch t interval on the logarithms of the units' medians (a handful of units gets a wide
interval, as it should). A change is called when the interval excludes 1 AND the ratio passes
the minimum effect. With fewer than MIN_PAGES units on a side the spread between
units is unknown: the verdict is ``insufficient`` (never a regression on one unit per side),
unless both sides have several units and the change is far beyond every unit's own spread
(FAR_EFFECT, no overlap of the units' p10-p90).

Configurations are matched on result_files.CONFIG_KEY, the one identity of a row
(results/rows.identity_columns: the core's and each workload kind's identity columns). A browser
or engine version that differs between the sides (analysis/versions.py) is not a reason to refuse:
it is a known change point, and the entry attributes its verdict to it; what ran the browser (this
machine, a grid node) still has to match.

A configuration whose series never reached a steady state is judged on its whole distribution
(every timed iteration of each unit): its units' medians then carry the unsettled spread, so the
Welch interval is as wide as that spread makes it, and the entry says it was judged so.

The command line and the table are in cli/compare.py.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..results.reader import CONFIG_KEY, ResultSchemaError, ResultSet, page_samples
from ..series.stats import RatioInterval, welch_ratio_interval
from ..series.steady import SteadyClass
from ..vocabulary import Outcome, with_build
from ..workloads import DEFAULT_KIND, kind_named
from .versions import VersionChange, Versions, row_versions

DEFAULT_ALPHA = 0.001
"""The interval of the ratio is at level 1 - alpha (99.9%): measured on back-to-back sweeps of the
same code here, 0.01 still called one configuration in 60 (a sweep-wide drift; docs/guides/comparing-and-history.md)."""
MIN_PAGES = 3
"""Units (repetitions or page loads) per side below which their spread is not known well enough."""
RECOMMENDED_REPEAT = 5
"""The --repetitions the docs, the nightly workflow and the 'insufficient' note recommend."""
FAR_EFFECT = 1.0
"""With 2 units per side, a change this large whose units do not overlap is still called."""
DEFAULT_MIN_EFFECT = 0.10
"""asv's default factor (1.1): software adapters drift about this much between back-to-back runs."""
FLOAT_ERROR_GROWTH_REL = 0.10
"""rel_error_vs_float may grow by this fraction before it is an accuracy regression..."""
FLOAT_ERROR_GROWTH_ABS = 1e-6
"""...and by this much in absolute terms (so growth from 1e-9 to 2e-9 is not one)."""

MACHINE_KEYS = ("system", "machine", "cpu_count")
"""environment.json["machine"] entries that must match for timings to be comparable."""

_INT_KEYS = frozenset({"bits_requested", "block_size", "act_bits"})
_SKIP_OUTCOMES = frozenset({Outcome.UNAVAILABLE, Outcome.UNSUPPORTED})


class Verdict(enum.StrEnum):
    """What happened to one configuration between baseline and current (most severe first)."""

    NEW_FAILURE = "new-failure"  # baseline ok, current failed/crashed/timed out/invalid
    ACCURACY_REGRESSION = "accuracy-regression"  # kernel beyond tolerance, or error vs float grew
    REGRESSION = "regression"  # significantly slower by more than the minimum effect
    IMPROVEMENT = "improvement"  # significantly faster by more than the minimum effect
    INSUFFICIENT = "insufficient"  # a change beyond the minimum effect, too few units to judge
    FIXED = "fixed"  # baseline failing, current ok
    UNCHANGED = "unchanged"  # no significant change, or a change below the minimum effect
    STILL_FAILING = "still-failing"  # failing on both sides (not new, so not a regression)
    ADDED = "added"  # configuration only in current
    REMOVED = "removed"  # configuration only in baseline
    SKIPPED = "skipped"  # cannot be compared (unsupported/unavailable, no samples...); note says why

    @property
    def is_regression(self) -> bool:
        return self in (Verdict.NEW_FAILURE, Verdict.ACCURACY_REGRESSION, Verdict.REGRESSION)


_ORDER = {v: i for i, v in enumerate(Verdict)}


class MetadataMismatch(Exception):
    """Baseline and current were measured on different machines (or grid nodes)."""

    def __init__(self, differences: Sequence[str]) -> None:
        self.differences = tuple(differences)
        super().__init__(
            "baseline and current were measured on different set-ups: " + "; ".join(self.differences)
        )


@dataclass(frozen=True)
class Entry:
    config: tuple[Any, ...]
    """Values of result_files.CONFIG_KEY, in that order."""
    verdict: Verdict
    baseline_median: float | None = None
    """Median of the pooled headline samples (ms), None without samples."""
    current_median: float | None = None
    effect: float | None = None
    """current_median / baseline_median - 1 (positive: slower)."""
    interval: RatioInterval | None = None
    """Welch interval of current/baseline from the units' medians; None when not computed."""
    n_baseline: int = 0
    n_current: int = 0
    """Pooled headline sample counts."""
    pages_baseline: int = 0
    pages_current: int = 0
    """Independent units with samples on each side, the verdict's unit: repetitions (rounds,
    each in a fresh browser session) when a side has several, else its one run's page loads."""
    note: str = ""
    baseline_outcome: str = ""
    current_outcome: str = ""
    """Outcomes of the side's rows, e.g. "ok" or "ok x2, crash x1"; "" when absent."""
    version_change: str = ""
    """The browser or engine versions that changed between the sides ('chrome 153.0.8010.0 ->
    156.0.7000.1'), to which the verdict is attributed; '' when they match."""

    @property
    def config_dict(self) -> dict[str, Any]:
        return dict(zip(CONFIG_KEY, self.config, strict=True))

    @property
    def shape(self) -> str:
        """What ran as its kind says it ('1x768x3072', '4x32 tokens'), with a mixed precision
        plan and random weights where the row has them."""
        return shape_of(self.config_dict)

    @property
    def label(self) -> str:
        c = self.config_dict
        mode = c["precision_mode"] + (f"/{c['device_type']}" if c["device_type"] else "")
        block = f" block{c['block_size']}" if c["block_size"] else ""
        acts = f" int8 activations ({c['observer']})" if str(c.get("act_bits")) == "8" else ""
        return (f"{c['browser']}/{c['platform']} {mode} {c['bits_requested']}-bit{block}{acts} "
                f"{c['workload']} {self.shape}")


def shape_of(c: Mapping[str, Any]) -> str:
    """What a configuration ran as its kind says it ('1x768x3072', '4x32 tokens'), with a mixed
    precision plan and random weights where it has them."""
    plan = c.get("precision_plan") or ""
    extra = f" {plan}" if plan.startswith("mixed") else ""
    weights = " random weights" if c.get("weights") == "random" else ""
    return f"{kind_named(c.get('kind') or DEFAULT_KIND).shape(c)}{extra}{weights}"


@dataclass(frozen=True)
class Comparison:
    entries: tuple[Entry, ...]
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    metadata_differences: tuple[str, ...] = ()
    """Set-up differences (machines) accepted with force=True (empty when the set-ups match)."""
    baseline_dir: str = ""
    current_dir: str = ""

    @property
    def has_regression(self) -> bool:
        return any(e.verdict.is_regression for e in self.entries)

    @property
    def version_changes(self) -> tuple[str, ...]:
        """The distinct version changes the entries are attributed to, in entry order."""
        return tuple(dict.fromkeys(e.version_change for e in self.entries if e.version_change))

    @property
    def counts(self) -> dict[Verdict, int]:
        """Entries per verdict, most severe first; only verdicts that occur."""
        counts = {v: 0 for v in Verdict}
        for e in self.entries:
            counts[e.verdict] += 1
        return {v: n for v, n in counts.items() if n}


# ---------------------------------------------------------------------------------------------
# Metadata


def _ran_on(env: Mapping[str, Any], browser: str) -> dict[str, Any]:
    """What ran this browser: the session's own record (a grid node's platform, say), else this
    harness machine's identity (MACHINE_KEYS) for folders and local runs."""
    recorded = ((env.get("browsers") or {}).get(browser) or {}).get("ran_on") or {}
    if recorded.get("where", "local") != "local":
        return {"where": recorded.get("where"), "platform": recorded.get("platform", ""),
                "node": recorded.get("node", "")}
    machine = env.get("machine") or {}
    return {f"machine {key}": machine.get(key) for key in MACHINE_KEYS}


def metadata_differences(baseline_env: Mapping[str, Any], current_env: Mapping[str, Any]) -> list[str]:
    """Differences that make timings incomparable: what ran each browser (this machine, or a grid
    node as the session's capabilities said). Browser and engine versions are not among them: a
    version change is a known change point the entries attribute their verdicts to."""
    diffs = [f"{side} has no environment.json" for side, env in
             (("baseline", baseline_env), ("current", current_env)) if not env]
    if diffs:
        return diffs
    b_browsers = baseline_env.get("browsers") or {}
    c_browsers = current_env.get("browsers") or {}
    common = sorted(set(b_browsers) & set(c_browsers))
    for name in common or [""]:
        b, c = _ran_on(baseline_env, name), _ran_on(current_env, name)
        for key in dict.fromkeys([*b, *c]):
            if b.get(key) != c.get(key):
                where = f"{name} ran on: " if name else ""
                diffs.append(f"{where}{key} {b.get(key)!r} in baseline, {c.get(key)!r} in current")
    return list(dict.fromkeys(diffs))


# ---------------------------------------------------------------------------------------------
# Reading one side


@dataclass
class _Side:
    rows: list[dict[str, Any]] = field(default_factory=list)
    runs: list[list[list[float]]] = field(default_factory=list)
    """Per ok repetition (a round: its own browser session), its page loads' headline samples."""
    timing_sources: set[str] = field(default_factory=set)
    runs_without_samples: int = 0
    versions: Versions = Versions()
    """The browser and engine versions its rows ran on (analysis/versions.py)."""

    @property
    def pages(self) -> list[list[float]]:
        return [page for run in self.runs for page in run]

    @property
    def unsettled(self) -> bool:
        """Did any ok run's series never reach a steady state (series/steady.py)?"""
        return any(r.get("outcome") is Outcome.OK and r.get("steady_class") == SteadyClass.NO_STEADY
                   for r in self.rows)

    @property
    def units(self) -> list[list[float]]:
        """The independent units the verdict resamples: the repetitions (rounds, each in a fresh
        browser session, spread over the sweep) when there are several, else the page loads of
        the one run (which share its browser session)."""
        if len(self.runs) >= 2:
            return [[s for page in run for s in page] for run in self.runs]
        return self.pages

    @property
    def unit_name(self) -> str:
        return "repetitions" if len(self.runs) >= 2 else "page loads"

    @property
    def samples(self) -> list[float]:
        return [s for page in self.pages for s in page]

    @property
    def concurrency(self) -> int:
        """Most runs in progress at once while this configuration ran (1 = alone)."""
        values = [_number(r.get("concurrent_sessions")) for r in self.rows]
        return int(max((v for v in values if v is not None), default=1))

    @property
    def outcomes(self) -> list[Outcome]:
        return [r["outcome"] for r in self.rows]

    @property
    def status(self) -> str:
        """'ok' (every repetition ok), 'failing' (any failed), or 'skip' (could not run)."""
        if any(o.is_failure for o in self.outcomes):
            return "failing"
        if any(o in _SKIP_OUTCOMES for o in self.outcomes):
            return "skip"
        return "ok"

    @property
    def outcome_summary(self) -> str:
        counts: dict[str, int] = {}
        for o in self.outcomes:
            counts[o.value] = counts.get(o.value, 0) + 1
        if len(counts) == 1 and len(self.outcomes) == 1:
            return next(iter(counts))
        return ", ".join(f"{o} x{n}" for o, n in counts.items())

    def first_reason(self, wanted: frozenset[Outcome] | None = None) -> str:
        for r in self.rows:
            o = r["outcome"]
            if (o in wanted) if wanted is not None else o is not Outcome.OK:
                reason = " ".join(str(r.get("reason") or "").split())
                text = f"{o.value}: {reason}" if reason else o.value
                return text if len(text) <= 100 else text[:97] + "..."
        return ""

    @property
    def median(self) -> float | None:
        return float(np.median(self.samples)) if self.samples else None

    def worst(self, column: str) -> float | None:
        """Largest value of a column over the ok repetitions (NaN/empty ignored)."""
        values = [_number(r.get(column)) for r in self.rows if r["outcome"] is Outcome.OK]
        values = [v for v in values if v is not None]
        return max(values) if values else None

    def kernel_out_of_tolerance(self) -> tuple[float, float] | None:
        """(error, tolerance) of the worst ok repetition whose kernel error exceeds its tolerance."""
        worst: tuple[float, float] | None = None
        for r in self.rows:
            if r["outcome"] is not Outcome.OK:
                continue
            err, tol = _number(r.get("rel_error_vs_dequantized")), _number(r.get("kernel_tolerance"))
            if err is None or tol is None or not math.isfinite(tol) or not err > tol:
                continue
            if worst is None or err > worst[0]:
                worst = (err, tol)
        return worst


def _number(value: Any) -> float | None:
    """A float from a CSV cell; None for empty or NaN (load() reads both as NaN)."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def _config_value(key: str, value: Any, where: Path) -> Any:
    if key in _INT_KEYS:
        v = _number(value)
        if v is None or not v.is_integer():
            raise ResultSchemaError(f"{where}: column {key} has a non-integer value {value!r}")
        return int(v)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # whole-model batch_size / seq_len (NaN, so float, on matmul rows)
    return str(value)


def _clean_pages(record: Mapping[str, Any], where: Path) -> list[list[float]]:
    """The record's headline samples per page load, non-finite ones (NaN was written as null)
    dropped."""
    try:
        return page_samples(dict(record))
    except (TypeError, ValueError) as exc:
        raise ResultSchemaError(f"{where}: unreadable samples for run {record.get('run_id')}: {exc}") \
            from None


def _sides(rs: ResultSet) -> dict[tuple[Any, ...], _Side]:
    """Rows grouped by configuration (repetitions pooled), in first-seen order."""
    csv_path = rs.directory / "results.csv"
    needed = [*CONFIG_KEY, "run_id", "outcome"]
    missing = [c for c in needed if c not in rs.rows.columns]
    if missing:
        raise ResultSchemaError(f"{csv_path}: missing column(s) {', '.join(missing)}")
    samples_path = rs.directory / "samples.jsonl"
    sides: dict[tuple[Any, ...], _Side] = {}
    for record in rs.rows.to_dict("records"):
        try:
            record["outcome"] = Outcome(str(record["outcome"]))
        except ValueError:
            raise ResultSchemaError(f"{csv_path}: unknown outcome {record['outcome']!r}") from None
        key = tuple(_config_value(k, record[k], csv_path) for k in CONFIG_KEY)
        side = sides.setdefault(key, _Side())
        side.rows.append(record)
        if record["outcome"] is not Outcome.OK:
            continue
        run_id = _number(record["run_id"])
        raw = rs.samples.get(int(run_id)) if run_id is not None else None
        pages = _clean_pages(raw, samples_path) if raw is not None else []
        if not pages:
            side.runs_without_samples += 1
            continue
        side.runs.append(pages)
        source = str(raw.get("timing_source") or record.get("timing_source") or "")
        side.timing_sources.add(source or "unknown")
    for side in sides.values():
        side.versions = row_versions(side.rows, rs.environment)
    return sides


# ---------------------------------------------------------------------------------------------
# Judging one configuration


def pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _accuracy_note(base: _Side, cur: _Side) -> str:
    """Why current is less accurate than baseline, or "" when it is not."""
    reasons = []
    cur_bad = cur.kernel_out_of_tolerance()
    if cur_bad is not None and base.kernel_out_of_tolerance() is None:
        base_err = base.worst("rel_error_vs_dequantized")
        was = f" (baseline {base_err:.2e})" if base_err is not None else ""
        reasons.append(f"kernel error {cur_bad[0]:.2e} exceeds its tolerance {cur_bad[1]:.0e}{was}")
    b, c = base.worst("rel_error_vs_float"), cur.worst("rel_error_vs_float")
    if b is not None and c is not None and c > b * (1 + FLOAT_ERROR_GROWTH_REL) \
            and c - b > FLOAT_ERROR_GROWTH_ABS:
        growth = f" ({pct(c / b - 1)})" if b > 0 and math.isfinite(c) else ""
        reasons.append(f"error vs float grew {b:.2e} -> {c:.2e}{growth}")
    return "; ".join(reasons)


def _far_beyond(base_units: list[list[float]], cur_units: list[list[float]], effect: float) -> bool:
    """With a few units per side: a change beyond FAR_EFFECT whose every unit's p10-p90 lies
    apart from every unit of the other side (nothing within-unit spread could explain)."""
    if min(len(base_units), len(cur_units)) < 2 or abs(effect) < FAR_EFFECT:
        return False
    spans = {name: [np.percentile(u, [10, 90]) for u in units]
             for name, units in (("base", base_units), ("cur", cur_units))}
    if effect > 0:
        return min(lo for lo, _ in spans["cur"]) > max(hi for _, hi in spans["base"])
    return max(hi for _, hi in spans["cur"]) < min(lo for lo, _ in spans["base"])


def _latency_verdict(base: _Side, cur: _Side, alpha: float, min_effect: float
                     ) -> tuple[Verdict, float, RatioInterval | None, str]:
    """(verdict, effect, interval, note) of two sides that both have samples on one source."""
    base_units, cur_units = base.units, cur.units
    pages = (len(base_units), len(cur_units))
    unit = base.unit_name if base.unit_name == cur.unit_name else "units"
    bm, cm = base.median, cur.median
    assert bm is not None and cm is not None
    effect = cm / bm - 1 if bm > 0 else math.nan
    interval = None
    if min(pages) >= 2:  # with one unit a side, there is no unit-to-unit spread to resample
        interval = welch_ratio_interval(base_units, cur_units, 1 - alpha)
    if not math.isfinite(effect):
        return Verdict.SKIPPED, effect, interval, "latency not compared: baseline median is 0"
    direction = "slower" if effect > 0 else "faster"
    called = Verdict.REGRESSION if effect > 0 else Verdict.IMPROVEMENT
    if abs(effect) <= min_effect:
        significant = interval is not None and (interval.low > 1 or interval.high < 1)
        return Verdict.UNCHANGED, effect, interval, (
            f"{pct(effect)}: significant but below the minimum effect {min_effect:.0%}"
            if significant else "")
    if min(pages) < MIN_PAGES:
        if _far_beyond(base_units, cur_units, effect):
            return called, effect, interval, (
                f"{pct(effect)} {direction}; only {pages[0]}/{pages[1]} {unit}, but every one lies "
                "apart from every one of the other side")
        return Verdict.INSUFFICIENT, effect, interval, (
            f"{pct(effect)} on {pages[0]}/{pages[1]} {unit}: the spread between them needs at "
            f"least {MIN_PAGES} per side; re-run both with --repetitions {RECOMMENDED_REPEAT}")
    assert interval is not None
    if interval.low > 1 or interval.high < 1:
        return called, effect, interval, f"{pct(effect)} {direction}"
    return Verdict.UNCHANGED, effect, interval, (
        f"{pct(effect)} is within the spread between {unit} ({interval.level:.1%} interval "
        f"{pct(interval.low - 1)} to {pct(interval.high - 1)})")


def _judge_both_ok(config: tuple[Any, ...], base: _Side, cur: _Side, alpha: float,
                   min_effect: float) -> Entry:
    common = dict(config=config, n_baseline=len(base.samples), n_current=len(cur.samples),
                  pages_baseline=len(base.units), pages_current=len(cur.units),
                  baseline_median=base.median, current_median=cur.median,
                  baseline_outcome=base.outcome_summary, current_outcome=cur.outcome_summary)
    accuracy = _accuracy_note(base, cur)
    notes: list[str] = []
    for name, side in (("baseline", base), ("current", cur)):
        if side.runs_without_samples and side.pages:
            notes.append(f"{side.runs_without_samples} {name} run(s) without samples")
    if base.concurrency != cur.concurrency:
        notes.append(f"concurrent sessions differ ({base.concurrency} in baseline, {cur.concurrency} "
                     "in current): runs sharing a machine disturb each other's timings")

    effect = None
    interval = None
    if not base.pages or not cur.pages:
        which = " and ".join(n for n, s in (("baseline", base), ("current", cur)) if not s.pages)
        verdict = Verdict.SKIPPED
        notes.insert(0, f"latency not compared: no raw samples in {which}")
    elif base.timing_sources != cur.timing_sources or len(base.timing_sources) > 1:
        verdict = Verdict.SKIPPED
        notes.insert(0, "latency not compared: timing source differs ("
                     f"{'/'.join(sorted(base.timing_sources))} in baseline, "
                     f"{'/'.join(sorted(cur.timing_sources))} in current)")
    else:
        verdict, effect, interval, why = _latency_verdict(base, cur, alpha, min_effect)
        if unsettled := [n for n, side in (("baseline", base), ("current", cur)) if side.unsettled]:
            notes.insert(0, WHOLE_DISTRIBUTION.format(where=" and ".join(unsettled)))
        if why:
            notes.insert(0, why)
    if accuracy:
        if verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
            notes.insert(0, f"latency {verdict.value}")
        notes.insert(0, accuracy)
        verdict = Verdict.ACCURACY_REGRESSION
    return Entry(verdict=verdict, effect=effect, interval=interval, note="; ".join(notes), **common)


WHOLE_DISTRIBUTION = ("no steady state in {where}: judged on its whole distribution (every timed "
                      "iteration; its spread widens the interval; docs/concepts/steady-state.md)")
"""The note of a configuration judged without a steady state, compare's and history's."""


def attributed(entry: Entry) -> Entry:
    """The entry with its verdict attributed to the version change between its sides, when
    there is one: 'chrome 153.0.8010.0 -> 156.0.7000.1: 4-bit 1x768x3072 +40.0% slower'."""
    if not entry.version_change:
        return entry
    c = entry.config_dict
    what = f"{entry.version_change}: {c['bits_requested']}-bit {entry.shape}"
    if entry.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and entry.note:
        return dataclasses.replace(entry, note=f"{what} {entry.note}")  # the note leads with '+40.0% slower'
    return dataclasses.replace(entry, note="; ".join(filter(None, [f"{what} {entry.verdict.value}", entry.note])))


def _judge(config: tuple[Any, ...], base: _Side | None, cur: _Side | None, alpha: float,
           min_effect: float) -> Entry:
    if base is None or cur is None:
        side = cur if base is None else base
        assert side is not None
        verdict = Verdict.ADDED if base is None else Verdict.REMOVED
        n, median = len(side.samples), side.median
        return Entry(
            config=config, verdict=verdict,
            current_median=median if base is None else None, n_current=n if base is None else 0,
            baseline_median=median if cur is None else None, n_baseline=n if cur is None else 0,
            baseline_outcome="" if base is None else side.outcome_summary,
            current_outcome="" if cur is None else side.outcome_summary,
            note=f"only in {'current' if base is None else 'baseline'}: {side.outcome_summary}",
        )
    return attributed(dataclasses.replace(_judge_sides(config, base, cur, alpha, min_effect),
                                          version_change=VersionChange(base.versions, cur.versions).text))


def _judge_sides(config: tuple[Any, ...], base: _Side, cur: _Side, alpha: float, min_effect: float) -> Entry:
    common = dict(config=config, baseline_outcome=base.outcome_summary,
                  current_outcome=cur.outcome_summary,
                  baseline_median=base.median, current_median=cur.median,
                  n_baseline=len(base.samples), n_current=len(cur.samples),
                  pages_baseline=len(base.units), pages_current=len(cur.units))
    b, c = base.status, cur.status
    if b == "ok" and c == "ok":
        return _judge_both_ok(config, base, cur, alpha, min_effect)
    if b == "ok" and c == "failing":
        return Entry(verdict=Verdict.NEW_FAILURE, note=f"current {cur.first_reason()}", **common)
    if b == "failing" and c == "ok":
        return Entry(verdict=Verdict.FIXED, note=f"baseline was {base.first_reason()}", **common)
    if b == "failing" and c == "failing":
        return Entry(verdict=Verdict.STILL_FAILING,
                     note=f"baseline {base.first_reason()}; current {cur.first_reason()}", **common)
    parts = [f"{name} {side.first_reason(_SKIP_OUTCOMES)}" for name, side in
             (("baseline", base), ("current", cur)) if side.status == "skip"]
    parts += [f"{name} {side.first_reason()}" for name, side in
              (("baseline", base), ("current", cur)) if side.status == "failing"]
    return Entry(verdict=Verdict.SKIPPED, note="; ".join(parts), **common)


def compare(baseline: ResultSet, current: ResultSet, *, alpha: float = DEFAULT_ALPHA,
            min_effect: float = DEFAULT_MIN_EFFECT, force: bool = False) -> Comparison:
    """Match configurations and judge each (a browser or engine version change attributed in the
    entries); raise MetadataMismatch when a browser ran on another machine, unless force."""
    if not (0 < alpha < 1):
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if not (math.isfinite(min_effect) and min_effect >= 0):
        raise ValueError(f"min_effect must be a non-negative number, got {min_effect}")
    diffs = metadata_differences(baseline.environment, current.environment)
    if diffs and not force:
        raise MetadataMismatch(diffs)
    base_sides, cur_sides = _sides(baseline), _sides(current)
    keys = list(base_sides) + [k for k in cur_sides if k not in base_sides]
    entries = [_judge(k, base_sides.get(k), cur_sides.get(k), alpha, min_effect) for k in keys]
    entries.sort(key=lambda e: _ORDER[e.verdict])  # stable: file order within a verdict
    return Comparison(entries=tuple(entries), alpha=alpha, min_effect=min_effect,
                      metadata_differences=tuple(diffs), baseline_dir=str(baseline.directory),
                      current_dir=str(current.directory))


BUILD_AXES = {"browser": "browser_build", "engine": "engine_build"}
"""The run axes whose values are builds of one thing (``--browser chrome@webnn chrome@chromium``,
``--engine ort@1.30.0 ort@1.31``): compare_builds sets them against each other within a sweep."""


@dataclass(frozen=True)
class BuildPair:
    """One configuration on two builds of its browser or engine, within one sweep."""

    axis: str
    """'browser' or 'engine': which of BUILD_AXES differs (everything else is the same)."""
    baseline: str
    """The build set against, as asked ('chrome@webnn', 'ort' for the default build)."""
    current: str
    entry: Entry
    """The judgement, as compare's (current against baseline), attributed to their versions."""


def compare_builds(rs: ResultSet, *, alpha: float = DEFAULT_ALPHA,
                   min_effect: float = DEFAULT_MIN_EFFECT) -> tuple[BuildPair, ...]:
    """Within one sweep: every configuration that ran on several builds of its browser or of its
    engine (one axis at a time, all else equal), each build judged against the first the plan ran
    as compare judges two sweeps. The units are the repetitions: rounds, which run every build in
    turn, so a drift of the machine hits both sides (with one repetition, the page loads)."""
    sides = _sides(rs)
    pairs: list[BuildPair] = []
    for axis, column in BUILD_AXES.items():
        at, named = CONFIG_KEY.index(column), CONFIG_KEY.index(axis)
        groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for config in sides:
            groups.setdefault(config[:at] + config[at + 1:], []).append(config)
        for configs in groups.values():
            base = configs[0]
            for config in configs[1:]:
                pairs.append(BuildPair(axis, _build_name(base, named, at), _build_name(config, named, at),
                                       _judge(config, sides[base], sides[config], alpha, min_effect)))
    return tuple(pairs)


def _build_name(config: tuple[Any, ...], named: int, at: int) -> str:
    return with_build(config[named], config[at])

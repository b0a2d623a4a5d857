"""Judge the newest sweep against the history of earlier ones (oldest first), not one baseline.

A night's figure for a configuration is the median, over the sweep's rounds (``--repetitions``:
each round a fresh browser session), of the logarithm of that round's median latency (a
disturbance that hits a round or two does not move it; a change in the code moves every round). Two views
of the same measurements:

- ``absolute``: the configuration's own latency, night after night. It sees every change,
  including those that move a whole browser session alike, and all the machine's drift with it
  (on this 2-core machine whole sweeps of the same code ran up to 1.9x slower while something
  else loaded the CPU: docs/guides/comparing-and-history.md).
- ``session`` (drift-free): in each round, the configuration's latency with the session's drift
  taken out: the drift is the median, over the OTHER configurations measured in the same browser
  session (those of the same setting, i.e. its work at other precisions, when there are at least
  SESSION_PEERS of them; else all the others, at least SESSION_PEERS), of how far each ran from
  its own usual level (``levels``). Whatever moves the whole session cancels: machine load, clock, a browser-wide
  slow-down. It cannot see a change that moves half or more of the session's configurations alike.

Which view decides: the session view wherever the configuration has one with a history (it
shared its browser sessions with at least SESSION_PEERS others, in the newest sweep and
HISTORY_MIN earlier ones); the absolute view where it has no session view at all. A view without
enough history leaves the configuration to the pairwise judge against the previous sweep
(history_compare). When the absolute view alone would call a change, the entry says so ("the
whole session moved") without calling it: on this machine that is what a loaded CPU looks like.

How a view judges the newest night (``judge_series``): the history before the step is the
series' last stretch with no change point (ruptures' PELT on the earlier nights), at most
MAX_HISTORY nights and at least HISTORY_MIN. The newest night alone (k=1), or the newest two
(k=2: a step the night before that persists, both nights beyond the minimum effect on the same
side), is compared with that history's mean by a t prediction interval whose spread is the
night-to-night spread: ``(mean(after) - mean(before)) / (s * sqrt(1/k + 1/n))`` with s the larger
of the configuration's own spread and the one pooled over the configurations of the same
browser, engine and platform (variances weighted by their degrees of freedom, which the t
distribution then has: one noise level per machine and setting, estimated from many series; a
noisier series keeps its own spread). The two tests share alpha (STEP_ALPHA: 5% for the newest
night alone, 95% for two nights in a row); a change is called when p is below its share AND the
change passes the minimum effect. So a step is caught on its night or the night after. Nights measured with another timing source than
the newest one's (GPU timestamps, wall clock) are not part of its series.

Known change points: where a configuration's browser or engine version (analysis/versions.py)
differs from the night before's. A step that starts on such a night is judged against the
history before it and attributed to the version change ("chrome 153.0.8010.0 -> 156.0.7000.1:
4-bit 1x768x3072 +50.0% slower"); the history of later nights restarts there (until HISTORY_MIN
nights of the new version, the previous sweep alone judges, as compare A B does). A step on a
night without a version change is judged as any other.

Change points found in the data (the history's start, the plots' marks, the summary's "what changed when") are
ruptures' PELT with an l2 cost and a penalty of PENALTY * s^2 * log(n), s the noise estimated
from successive differences (a step moves one of them only), each kept only where the level moved
beyond the minimum effect and beyond chance (the move in units of that noise, at alpha over the
n - 1 places a cut could be made).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..results.reader import CONFIG_KEY, ResultSet, page_samples, sweep_names
from ..results.rows import setting_columns
from ..series import changepoints
from ..series.changepoints import SD_FLOOR
from ..series.steady import SteadyClass
from ..vocabulary import Outcome
from .compare import (
    WHOLE_DISTRIBUTION,
    _ORDER,
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    Comparison,
    MetadataMismatch,
    Verdict,
    _config_value,
    compare,
    metadata_differences,
    shape_of,
)
from .versions import VersionChange, Versions, row_versions

HISTORY_MIN = 5
"""Nights of history (after the last change point) before a view judges the newest."""
MAX_HISTORY = 30
"""Nights of history a view looks back at most (the nightly workflow keeps as many)."""
SESSION_PEERS = 2
"""Other configurations a browser session must hold for the session (drift-free) view."""
STEP_NIGHTS = (1, 2)
"""A step is looked for on the newest night and on the night before it (persisting)."""
STEP_ALPHA = {1: 0.05, 2: 0.95}
"""The share of alpha each test spends (together at most alpha): a step on the newest night alone
must be far beyond the history (one night of one configuration ran 1.4x slower than its session
here, same code), one seen on two nights in a row less so."""


class View(enum.StrEnum):
    ABSOLUTE = "absolute"
    SESSION = "session"

    @property
    def meaning(self) -> str:
        return {View.ABSOLUTE: "its own latency",
                View.SESSION: "its latency over the median of the other configurations in the same browser "
                              "session"}[self]


Config = tuple[Any, ...]


# ---------------------------------------------------------------------------------------------
# One sweep: each configuration's log median per browser session


@dataclass(frozen=True)
class SweepFigures:
    """What a sweep contributes to histories: per configuration, per browser session (browser,
    round), the log of that run's median latency (several runs of one session: their mean)."""

    name: str
    created: str
    rounds: Mapping[Config, Mapping[tuple[str, int], float]]
    sources: Mapping[Config, str] = field(default_factory=dict)
    """Each configuration's timing source ('gpu-timestamp', 'wall-clock'; '' unknown)."""
    unsettled: frozenset[Config] = frozenset()
    """Configurations with an ok run whose series never reached a steady state: judged on their
    whole distribution (their figures are every timed iteration's), and said so."""
    versions: Mapping[Config, Versions] = field(default_factory=dict)
    """Each configuration's browser and engine versions (a change between nights is a known
    change point)."""

    def view(self, view: View, levels: Mapping[Config, float] | None = None) -> dict[Config, list[float]]:
        """Per configuration, its values in this view, one per browser session. The session view
        needs ``levels``: each configuration's usual log figure (``levels()`` over the sweeps
        judged together)."""
        if view is View.ABSOLUTE:
            return {c: list(by.values()) for c, by in self.rounds.items()}
        assert levels is not None, "the session view needs the configurations' levels"
        out: dict[Config, list[float]] = {}
        for members in self._sessions().values():
            deviations = {c: v - levels[c] for c, v in members.items() if c in levels}
            by_work: dict[tuple[Any, ...], list[tuple[Config, float]]] = {}
            for c, d in deviations.items():
                by_work.setdefault(_work(c), []).append((c, d))
            for c, v in members.items():
                reference = [d for o, d in by_work.get(_work(c), ()) if o != c]  # the same work
                if len(reference) < SESSION_PEERS:
                    reference = [d for o, d in deviations.items() if o != c]  # else every other
                if len(reference) >= SESSION_PEERS:
                    out.setdefault(c, []).append(v - statistics.median(reference))
        return out

    def _sessions(self) -> dict[tuple[str, int], dict[Config, float]]:
        sessions: dict[tuple[str, int], dict[Config, float]] = {}
        for c, by in self.rounds.items():
            for s, v in by.items():
                sessions.setdefault(s, {})[c] = v
        return sessions

    def session_index(self, levels: Mapping[Config, float]) -> dict[str, list[float]]:
        """Per browser, in each of its sessions, the median of its configurations' log figures
        above their usual levels: how much slower than usual the session ran as a whole."""
        out: dict[str, list[float]] = {}
        for (browser, _), members in sorted(self._sessions().items()):
            deviations = [v - levels[c] for c, v in members.items() if c in levels]
            if len(deviations) > SESSION_PEERS:
                out.setdefault(browser, []).append(statistics.median(deviations))
        return out

    def shifted(self, config: Config | None, factor: float) -> SweepFigures:
        """The sweep as if ``config``'s raw samples (every configuration's when None) had been
        multiplied by ``factor``: medians scale with the samples, so logs shift by log(factor)."""
        d = math.log(factor)
        return SweepFigures(self.name, self.created, {
            c: ({s: v + d for s, v in by.items()} if config is None or c == config else by)
            for c, by in self.rounds.items()}, self.sources, self.unsettled, self.versions)


_SETTING = [CONFIG_KEY.index(k) for k in setting_columns()]


def _work(config: Config) -> tuple[Any, ...]:
    """The configuration's setting (results/rows.setting_columns: all but the precision asked
    for): the same work at other precisions drifts alike (a memory-bound GEMV and a compute-bound
    GEMM answer a loaded machine differently)."""
    return tuple(config[i] for i in _SETTING)


def sweep_figures(rs: ResultSet, name: str | None = None) -> SweepFigures:
    """The ok runs of a results folder, as SweepFigures (runs without samples left out)."""
    where = rs.directory / "results.csv"
    logs: dict[Config, dict[tuple[str, int], list[float]]] = {}
    sources: dict[Config, set[str]] = {}
    unsettled: set[Config] = set()
    rows: dict[Config, list[dict[str, Any]]] = {}
    for record in rs.rows.to_dict("records"):
        if str(record.get("outcome")) != Outcome.OK.value:
            continue
        config = tuple(_config_value(k, record[k], where) for k in CONFIG_KEY)
        rows.setdefault(config, []).append(record)
        if record.get("steady_class") == SteadyClass.NO_STEADY:
            unsettled.add(config)
        raw = rs.samples.get(int(record["run_id"]))
        if raw is None:
            continue
        samples = [s for page in page_samples(dict(raw)) for s in page]
        median = float(np.median(samples)) if samples else 0.0
        if not median > 0:
            continue
        repetition = record.get("repetition")
        rnd = int(repetition) if repetition is not None and not (
            isinstance(repetition, float) and math.isnan(repetition)) else 0
        session = (str(record["browser"]), rnd)
        logs.setdefault(config, {}).setdefault(session, []).append(math.log(median))
        sources.setdefault(config, set()).add(str(raw.get("timing_source") or record.get("timing_source") or ""))
    rounds = {c: {s: float(np.mean(v)) for s, v in by.items()} for c, by in logs.items()}
    created = str((rs.environment or {}).get("created_utc") or "")
    return SweepFigures(name or rs.directory.name, created, rounds,
                        {c: "/".join(sorted(v)) for c, v in sources.items()}, frozenset(unsettled),
                        {c: row_versions(r, rs.environment) for c, r in rows.items()})


# ---------------------------------------------------------------------------------------------
# Series and their judgement


@dataclass(frozen=True)
class Night:
    """One sweep's figure of one configuration in one view."""

    sweep: str
    created: str
    value: float
    """Median over the sweep's browser sessions of the log figure: a disturbance that hits one or
    two of five rounds does not move it; a change in the code moves every round."""
    low: float
    high: float
    """The lowest and highest session's figure (for 5 sessions a 94% interval of the median; NaN
    with one session)."""
    units: int
    versions: Versions = Versions()
    """What the configuration ran on that night (a change from the night before is a known
    change point)."""


def night(sweep: SweepFigures, values: Sequence[float], config: Config | None = None) -> Night:
    middle = statistics.median(values)
    low, high = (min(values), max(values)) if len(values) >= 2 else (math.nan, math.nan)
    versions = sweep.versions.get(config, Versions()) if config is not None else Versions()
    return Night(sweep.name, sweep.created, middle, low, high, len(values), versions)


def version_breaks(series: Sequence[Night]) -> dict[int, str]:
    """The known change points of a series: night index -> what changed from the night before."""
    out = {}
    for i in range(1, len(series)):
        change = VersionChange(series[i - 1].versions, series[i].versions)
        if change.changed:
            out[i] = change.text
    return out


@dataclass(frozen=True)
class Step:
    """A change point in a series: from night ``index`` on, the level moved by ``effect``."""

    index: int
    sweep: str
    created: str
    effect: float


@dataclass(frozen=True)
class ViewJudgement:
    view: View
    verdict: Verdict
    """REGRESSION, IMPROVEMENT, UNCHANGED, or INSUFFICIENT (too little history)."""
    effect: float = math.nan
    """exp(mean(after) - mean(before)) - 1 of the test that decided (positive: slower)."""
    nights_after: int = 0
    """1: the newest night stepped; 2: the step came the night before and persists."""
    since: str = ""
    """The sweep from which the step is seen."""
    limit: float = math.nan
    """The prediction limit of the newest night(s) as a change (+- this is not called)."""
    p: float = math.nan
    history_nights: int = 0
    pooled_series: int = 0
    """Series whose night-to-night spread was pooled (this one included)."""
    note: str = ""
    version_change: str = ""
    """The version change the step starts with (a known change point), '' when none."""

    @property
    def called(self) -> bool:
        return self.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)


def change_points(values: Sequence[float], min_effect: float = DEFAULT_MIN_EFFECT,
                  alpha: float = DEFAULT_ALPHA) -> list[int]:
    """Indices where a new level starts in a series of nights (series/changepoints.py)."""
    return changepoints.change_points(values, min_effect, alpha)


def steps(series: Sequence[Night], min_effect: float = DEFAULT_MIN_EFFECT,
          alpha: float = DEFAULT_ALPHA) -> list[Step]:
    """The change points of a whole series, each with the move from the level before to after."""
    values = [n.value for n in series]
    points = change_points(values, min_effect, alpha)
    bounds = [0, *points, len(values)]
    out = []
    for i, cp in enumerate(points):
        before = values[bounds[i]:cp]
        after = values[cp:bounds[i + 2]]
        out.append(Step(cp, series[cp].sweep, series[cp].created, math.expm1(np.mean(after) - np.mean(before))))
    return out


def _history(values: Sequence[float], min_effect: float, alpha: float) -> list[float]:
    """The earlier nights a step is judged against: the last stretch with no change point, at
    most MAX_HISTORY nights."""
    recent = list(values[-MAX_HISTORY:])
    points = change_points(recent, min_effect, alpha)
    return recent[points[-1]:] if points else recent


def judge_series(view: View, series: Sequence[Night], peers: Sequence[Sequence[Night]] = (), *,
                 alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT) -> ViewJudgement:
    """Judge the last night of ``series`` against the earlier ones (see the module doc).
    ``peers``: the series of the configurations sharing this one's browser, engine and platform,
    ending on the same sweep, whose night-to-night spread is pooled with this one's."""
    from scipy import stats as scipy_stats

    values = [n.value for n in series]
    floor = math.log1p(min_effect)
    tried: list[ViewJudgement] = []
    usable = 0
    breaks = version_breaks(series)
    n = len(values)
    for k in STEP_NIGHTS:
        if n <= k:
            break
        if any(n - k < b for b in breaks):
            continue  # a version change within the nights judged: the newest night alone (k=1) says it
        change = breaks.get(n - k, "")  # the step starts with a version change: judged against the nights before
        start = max((b for b in breaks if b < n - k), default=0)  # the history restarts at a version change
        before = _history(values[start:n - k], min_effect, alpha)
        after = values[-k:]
        usable = max(usable, len(before))
        if len(before) < HISTORY_MIN:
            continue
        mean = float(np.mean(before))
        shifts = [a - mean for a in after]
        if k > 1 and not (all(s > floor for s in shifts) or all(s < -floor for s in shifts)):
            continue  # not a step that persists: the newest night alone (k=1) says what it is
        own = statistics.stdev(before)
        own_df = len(before) - 1
        others, others_df = 0.0, 0
        for peer in peers:
            pv = [n.value for n in peer][:-k][-len(before):]
            if len(pv) >= 2:
                others += statistics.variance(pv) * (len(pv) - 1)
                others_df += len(pv) - 1
        df = own_df + others_df  # one noise level per machine and setting, from every series of it
        sd = max(own, math.sqrt((own ** 2 * own_df + others) / df))  # a noisier series keeps its own
        sd = max(sd, SD_FLOOR)
        se = sd * math.sqrt(1 / k + 1 / len(before))
        diff = float(np.mean(after)) - mean
        p = float(2 * scipy_stats.t.sf(abs(diff) / se, df))
        level = alpha * STEP_ALPHA[k]
        limit = math.expm1(float(scipy_stats.t.ppf(1 - level / 2, df)) * se)
        effect = math.expm1(diff)
        called = p < level and abs(effect) > min_effect
        verdict = (Verdict.REGRESSION if effect > 0 else Verdict.IMPROVEMENT) if called else Verdict.UNCHANGED
        since = series[-k].sweep
        pooled_series = 1 + sum(1 for peer in peers if len(peer) > k + 1)
        tried.append(ViewJudgement(view, verdict, effect, k, since, limit, p, len(before), pooled_series,
                                   version_change=change))
    if not tried:
        earlier = max(len(values) - 1, 0)
        cut = f", {usable} since its last change point" if usable < earlier else ""
        return ViewJudgement(view, Verdict.INSUFFICIENT, history_nights=usable,
                             note=f"{earlier} earlier night(s) in this view{cut}; a history needs {HISTORY_MIN}")
    calls = [j for j in tried if j.called]
    return min(calls, key=lambda j: j.p) if calls else tried[0]


# ---------------------------------------------------------------------------------------------
# Every configuration of the newest sweep


@dataclass(frozen=True)
class HistoryEntry:
    config: Config
    verdict: Verdict
    decided_by: View | None
    judgements: tuple[ViewJudgement, ...]
    series: Mapping[View, tuple[Night, ...]] = field(default_factory=dict)
    steps: Mapping[View, tuple[Step, ...]] = field(default_factory=dict)
    note: str = ""

    @property
    def config_dict(self) -> dict[str, Any]:
        return dict(zip(CONFIG_KEY, self.config, strict=True))

    def judgement(self, view: View) -> ViewJudgement | None:
        return next((j for j in self.judgements if j.view is view), None)

    @property
    def decision(self) -> ViewJudgement | None:
        return None if self.decided_by is None else self.judgement(self.decided_by)


def _group(config: Config) -> tuple[Any, ...]:
    c = dict(zip(CONFIG_KEY, config, strict=True))
    return (c.get("browser"), c.get("engine"), c.get("platform"))


def levels(sweeps: Sequence[SweepFigures]) -> dict[Config, float]:
    """Each configuration's usual log figure over the sweeps: the median of all its sessions'
    (a step in the newest night or two barely moves it)."""
    values: dict[Config, list[float]] = {}
    for s in sweeps:
        for c, by in s.rounds.items():
            values.setdefault(c, []).extend(by.values())
    return {c: statistics.median(v) for c, v in values.items()}


def series_by_view(sweeps: Sequence[SweepFigures], usual: Mapping[Config, float] | None = None
                   ) -> dict[View, dict[Config, list[Night]]]:
    """Per view, per configuration of the newest sweep, its nights in order (sweeps where it has
    no value in that view left out). ``usual``: the configurations' levels over these sweeps
    (computed when not given)."""
    out: dict[View, dict[Config, list[Night]]] = {}
    current = sweeps[-1]
    window = sweeps[-(MAX_HISTORY + 1):]
    usual = levels(window) if usual is None else usual
    for view in View:
        per = [(s, s.view(view, usual)) for s in window]
        newest = per[-1][1]
        out[view] = {c: [night(s, values[c], c) for s, values in per
                         if c in values and s.sources.get(c, "") == current.sources.get(c, "")]
                     for c in current.rounds if c in newest}
    return out


def judge_history(sweeps: Sequence[SweepFigures], *, alpha: float = DEFAULT_ALPHA,
                  min_effect: float = DEFAULT_MIN_EFFECT, configs: Sequence[Config] | None = None,
                  with_steps: bool = True) -> list[HistoryEntry]:
    """Judge each configuration of the newest sweep (or only ``configs``) against its history;
    ``with_steps``: also find the change points of each whole series (what the plots mark) and
    whether the sessions moved as a whole (the entries' notes)."""
    return _judge(sweeps, alpha, min_effect, configs, with_steps)[0]


def _judge(sweeps: Sequence[SweepFigures], alpha: float, min_effect: float, configs: Sequence[Config] | None,
           with_steps: bool) -> tuple[list[HistoryEntry], dict[str, ViewJudgement]]:
    """judge_history's entries, and per browser whose sessions moved as a whole, that judgement."""
    if not (0 < alpha < 1):
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if not sweeps:
        raise ValueError("no sweeps to judge")
    usual = levels(sweeps[-(MAX_HISTORY + 1):])
    by_view = series_by_view(sweeps, usual)
    moved = _sessions_moved(sweeps, usual, alpha, min_effect) if with_steps else {}
    entries = []
    for config in (configs if configs is not None else list(sweeps[-1].rounds)):
        judgements: list[ViewJudgement] = []
        series: dict[View, tuple[Night, ...]] = {}
        found: dict[View, tuple[Step, ...]] = {}
        for view in View:
            mine = by_view[view].get(config)
            if not mine or mine[-1].sweep != sweeps[-1].name:
                continue
            peers = [s for c, s in by_view[view].items()
                     if c != config and _group(c) == _group(config) and s[-1].sweep == sweeps[-1].name]
            series[view] = tuple(mine)
            found[view] = tuple(steps(mine, min_effect, alpha)) if with_steps else ()
            judgements.append(judge_series(view, mine, peers, alpha=alpha, min_effect=min_effect))
        entry = _decide(config, judgements, series, found, moved.get(str(config[CONFIG_KEY.index("browser")])))
        if config in sweeps[-1].unsettled:
            entry = dataclasses.replace(entry, note="; ".join(
                filter(None, [entry.note, WHOLE_DISTRIBUTION.format(where="the newest sweep")])))
        entries.append(entry)
    return entries, moved


def _sessions_moved(sweeps: Sequence[SweepFigures], usual: Mapping[Config, float], alpha: float,
                    min_effect: float) -> dict[str, ViewJudgement]:
    """Per browser whose sessions as a whole (their median configuration) moved beyond their
    history on the newest night(s), that judgement."""
    window = sweeps[-(MAX_HISTORY + 1):]
    newest = window[-1].session_index(usual)
    out = {}
    for browser in newest:
        series = [night(s, idx[browser]) for s in window if browser in (idx := s.session_index(usual))]
        j = judge_series(View.ABSOLUTE, series, alpha=alpha, min_effect=min_effect)
        if j.called:
            out[browser] = j
    return out


def _decide(config: Config, judgements: list[ViewJudgement], series: dict[View, tuple[Night, ...]],
            found: dict[View, tuple[Step, ...]], moved: ViewJudgement | None = None) -> HistoryEntry:
    by = {j.view: j for j in judgements}
    session, absolute = by.get(View.SESSION), by.get(View.ABSOLUTE)
    decider = session if session is not None else absolute
    if decider is None:
        return HistoryEntry(config, Verdict.SKIPPED, None, tuple(judgements), series, found,
                            "no ok run with samples in the newest sweep")
    notes = [describe(decider, f"{config[_BITS]}-bit {shape_of(dict(zip(CONFIG_KEY, config, strict=True)))}")]
    if decider is session and absolute is not None and absolute.called and session.verdict is Verdict.UNCHANGED:
        notes.append(f"its own latency moved {absolute.effect:+.1%} ({absolute.verdict.value} in the absolute "
                     "view) with the whole browser session: machine drift or a change common to the session, "
                     "not called")
    elif decider is session and absolute is not None and absolute.verdict is not Verdict.INSUFFICIENT:
        notes.append(f"absolute {absolute.effect:+.1%}")
    if moved is not None:
        notes.append(f"the browser's sessions as a whole ran {moved.effect:+.1%} against their history "
                     f"({'the newest night' if moved.nights_after == 1 else 'the last two nights'}): machine load "
                     "or a change common to every configuration, which the drift-free view cannot see")
    return HistoryEntry(config, decider.verdict, decider.view, tuple(judgements), series, found,
                        "; ".join(n for n in notes if n))


_BITS = CONFIG_KEY.index("bits_requested")


def describe(j: ViewJudgement, what: str = "") -> str:
    """One line of evidence for a view's judgement; one whose step starts with a version change
    leads with it and ``what`` moved ('chrome 153.0 -> 156.0: 4-bit 1x768x3072 +50.0% slower; ...')."""
    if j.verdict is Verdict.INSUFFICIENT:
        return f"{j.view.value} view: {j.note}"
    when = "on the newest night" if j.nights_after == 1 else f"since {j.since} (two nights)"
    head = f"{j.view.value} view {j.effect:+.1%} {when}"
    evidence = (f"against {j.history_nights} nights of history (limit +-{j.limit:.1%}, p={j.p:.1g}, "
                f"spread pooled over {j.pooled_series} series)")
    if j.version_change:
        moved = f"{j.effect:+.1%} {'slower' if j.effect > 0 else 'faster'}" if j.called else j.verdict.value
        return f"{j.version_change}: {what + ' ' if what else ''}{moved} at the version change; {head} {evidence}"
    return f"{head} {evidence}"


# ---------------------------------------------------------------------------------------------
# Which earlier sweeps can be a history of the newest


def matching_history(sets: Sequence[ResultSet], force: bool = False) -> tuple[list[ResultSet], list[str]]:
    """The earlier sweeps whose set-up (browser versions, what ran each browser) matches the
    newest one's, oldest first with the newest last; and a line per sweep left out and why."""
    *earlier, current = sets
    kept, left = [], []
    for rs in earlier:
        diffs = metadata_differences(rs.environment, current.environment)
        if diffs and not force:
            left.append(f"{rs.directory}: {'; '.join(diffs)}")
        else:
            kept.append(rs)
    return [*kept, current], left


# ---------------------------------------------------------------------------------------------
# compare OLDEST ... NEWER CURRENT


LATENCY_VERDICTS = frozenset({Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED, Verdict.INSUFFICIENT})
"""Pairwise verdicts the history's latency judgement replaces (failures, accuracy, added... stay)."""
HISTORY_OVERRIDES = frozenset({Verdict.FIXED, Verdict.ADDED})
"""Pairwise verdicts the history's own call replaces (the previous sweep failed or lacked the
configuration, the earlier ones did not)."""


@dataclass(frozen=True)
class HistoryComparison:
    """The newest sweep judged against the earlier ones: ``comparison`` is the pairwise one
    against the newest matching earlier sweep (failures, fixes, accuracy, added and removed
    configurations) with its latency verdicts replaced by the history's."""

    comparison: Comparison
    history: tuple[HistoryEntry, ...]
    sweeps: tuple[str, ...]
    """The sweeps judged as one history, oldest first; the last is the one judged."""
    left_out: tuple[str, ...] = ()
    """Earlier sweeps not used, each with why (a different set-up)."""
    moved: Mapping[str, ViewJudgement] = field(default_factory=dict)
    """Per browser whose sessions as a whole moved beyond their history on the newest night(s)."""

    @property
    def has_regression(self) -> bool:
        return self.comparison.has_regression

    def entry(self, config: Config) -> HistoryEntry | None:
        return next((h for h in self.history if h.config == config), None)


def history_compare(sets: Sequence[ResultSet], *, alpha: float = DEFAULT_ALPHA,
                    min_effect: float = DEFAULT_MIN_EFFECT, force: bool = False) -> HistoryComparison:
    """Judge the last of ``sets`` (oldest first) against the earlier ones of the same set-up.
    Raises MetadataMismatch when no earlier sweep matches (unless ``force``)."""
    if len(sets) < 2:
        raise ValueError("a history needs at least one earlier sweep")
    kept, left = matching_history(sets, force)
    if len(kept) < 2:
        raise MetadataMismatch([f"no earlier sweep has the newest one's set-up ({'; '.join(left)})"])
    names = sweep_names([rs.directory for rs in kept])
    figures = [sweep_figures(rs, name) for rs, name in zip(kept, names, strict=True)]
    history, moved = _judge(figures, alpha, min_effect, None, True)
    pairwise = compare(kept[-2], kept[-1], alpha=alpha, min_effect=min_effect, force=True)
    judged_against = names[-2]
    by_config = {h.config: h for h in history}
    entries = []
    for e in pairwise.entries:
        h = by_config.get(e.config)
        d = h.decision if h is not None else None
        if h is None or d is None:
            entries.append(e)
        elif e.verdict in LATENCY_VERDICTS and h.verdict is Verdict.INSUFFICIENT:
            # a history too short to judge: the previous sweep alone judges, as a pair
            entries.append(dataclasses.replace(e, note="; ".join(filter(None, [
                f"{d.view.value} view: {d.note}; judged against {judged_against} alone", e.note]))))
        elif e.verdict in LATENCY_VERDICTS or (e.verdict in HISTORY_OVERRIDES and d.called):
            was = f"; against {judged_against} alone: {e.verdict.value}" if e.verdict in HISTORY_OVERRIDES else ""
            entries.append(dataclasses.replace(e, verdict=h.verdict, effect=d.effect, interval=None,
                                               note=h.note + was))
        else:
            entries.append(e)
    entries.sort(key=lambda e: _ORDER[e.verdict])
    comparison = dataclasses.replace(pairwise, entries=tuple(entries),
                                     metadata_differences=tuple(metadata_differences(
                                         kept[0].environment, kept[-1].environment)) if force else ())
    return HistoryComparison(comparison, tuple(history), tuple(names), tuple(left), moved)


def expand_sweeps(paths: Sequence[Any]) -> list[Any]:
    """Result folders from the arguments, in order: a folder holding results.csv is one sweep; a
    folder without one stands for the sweeps inside it (each sub-folder holding results.csv),
    ordered by when they were made (environment.json's created_utc), then by name."""
    from pathlib import Path

    out = []
    for p in map(Path, paths):
        if (p / "results.csv").is_file() or not p.is_dir():
            out.append(p)
            continue
        inner = [d for d in p.iterdir() if not d.name.startswith(".") and (d / "results.csv").is_file()]
        out.extend(sorted(inner, key=lambda d: (created_in(d), d.name)) or [p])
    return out


def add_to_history(history_dir: Any, sweep: ResultSet, keep: int = MAX_HISTORY + 1) -> Any:
    """Copy what a history needs of ``sweep`` (results.csv, samples.jsonl, environment.json) into
    a new folder of ``history_dir`` named after when the sweep was made (now, if it does not say),
    and remove the oldest folders beyond ``keep``. Returns the new folder. Raises ValueError for a
    sweep the history already holds, or one older than the history's newest (a history only
    grows at its end)."""
    import datetime as dt
    import hashlib
    import re
    import shutil
    from pathlib import Path

    if keep < 2:
        raise ValueError(f"--keep: a history keeps at least 2 sweeps, not {keep}")
    root = Path(history_dir)
    root.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256((Path(sweep.directory) / "results.csv").read_bytes()).hexdigest()
    existing = expand_sweeps([root]) if any(root.iterdir()) else []
    existing = [d for d in existing if d != root]
    for d in existing:
        if hashlib.sha256((d / "results.csv").read_bytes()).hexdigest() == digest:
            raise ValueError(f"{sweep.directory} is already in the history as {d}")
    created = str((sweep.environment or {}).get("created_utc") or "") or dt.datetime.now(dt.UTC).isoformat()
    stem = re.sub(r"[^0-9A-Za-z]+", "", created)[:15]
    newest = existing[-1].name if existing else ""
    if newest and stem < newest[:15]:
        raise ValueError(f"{sweep.directory} was made ({created}) before the history's newest sweep ({newest}); "
                         "a history only grows at its end")
    target, n = root / stem, 1
    while target.exists():
        n += 1
        target = root / f"{stem}-{n}"
    tmp = root / f".{target.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in ("results.csv", "samples.jsonl", "environment.json"):
        source = Path(sweep.directory) / name
        if source.is_file():
            shutil.copy2(source, tmp / name)
    if not created_in(tmp):  # the folder's name is its time; say it inside too, so the order holds
        (tmp / "environment.json").write_text(json.dumps({**(sweep.environment or {}), "created_utc": created}))
    tmp.rename(target)
    sweeps = expand_sweeps([root])
    for old in sweeps[:-keep] if len(sweeps) > keep else []:
        shutil.rmtree(old, ignore_errors=True)
    return target


def created_in(folder: Any) -> str:
    """environment.json's created_utc of a results folder ('' when it does not say)."""
    from pathlib import Path

    try:
        return str(json.loads((Path(folder) / "environment.json").read_text()).get("created_utc") or "")
    except (OSError, ValueError, AttributeError):
        return ""

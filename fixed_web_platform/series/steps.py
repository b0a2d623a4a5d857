"""Series inside iterations: a generation's decode steps, a clip's, and one figure per iteration
(a generation's time to first token), each judged as series/steady.py judges a page's iterations.

A decode step attends over one more token than the one before, so its time grows with the
context by design; the steps of every iteration (after the page's floor) are put end to end in
time order, and that growth is divided out with one straight line of step time against step
index fitted over all of them (times their mean). What is left moves only where the engine's
speed moves: a slow first generation is a warm-up, a drift across generations is no steady state
(a line per generation would hide both, each generation judged alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .steady import Verdict, classify, run_class


@dataclass(frozen=True)
class Judged:
    """One page load's series of a figure, judged: its verdict, and the first iteration (of the
    page's, after its floor) the figure takes."""

    verdict: Verdict
    first: int


def judge_per_iteration(values: Sequence[float], start_ms: Sequence[float]) -> Judged:
    """A figure measured once an iteration (time to first token), judged on its own series."""
    verdict = classify(values, start_ms)
    return Judged(verdict, verdict.steady_start if verdict.settled else 0)


def judge_steps(steps: Sequence[Sequence[float]], start_ms: Sequence[float]) -> Judged | None:
    """The steps of each iteration (``steps[i]``, iteration i starting at ``start_ms[i]``) as one
    series without its growth with context (above), judged; the figure takes the iterations from
    the one holding the steady segment's first step. None without steps."""
    counts = [len(s) for s in steps]
    if not sum(counts):
        return None
    times = np.concatenate([np.asarray(s, dtype=np.float64) for s in steps])
    index = np.concatenate([np.arange(n, dtype=np.float64) for n in counts])
    starts = np.concatenate([start + np.concatenate([[0.0], np.cumsum(s)[:-1]]) if len(s) else np.zeros(0)
                             for start, s in zip(start_ms, steps)])
    if times.size >= 3 and (times > 0).all() and np.ptp(index) > 0:
        line = np.polyval(np.polyfit(index, times, 1), index)
        if (line > 0).all():
            times = times / line * float(times.mean())
    verdict = classify(times, starts)
    owner = np.repeat(np.arange(len(steps)), counts)  # the iteration of each step
    return Judged(verdict, int(owner[verdict.steady_start]) if verdict.settled else 0)


def steps_per_s(iterations: Iterable[Sequence[float]]) -> list[float]:
    """Each iteration's rate: its steps over their summed milliseconds, a second (tokens/s of a
    generation or of a clip's decoding); iterations without measured time left out."""
    return [len(s) / sum(s) * 1000.0 for s in iterations if sum(s) > 0]


def class_text(judged: Sequence[Judged | None]) -> str:
    """A row's class of one figure over its page loads (series/steady.py run_class); '' when no
    page had the series."""
    verdicts = [j.verdict for j in judged if j is not None]
    return run_class(verdicts).value if verdicts else ""

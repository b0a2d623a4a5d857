"""A precision plan under an accuracy budget: the fewest weight bytes whose predicted accuracy
still meets the budget, found from a sensitivity ranking, written as precision rules.

Algorithm (ranked-prefix greedy, from each floor): start with every layer at the baseline bits.
For each low precision, lowest first (2, then 4, ...), take the probes still at the baseline, least
sensitive first (the sensitivity sweep's ranking at that precision), and find by binary search the
longest prefix that can move to that precision with the plan's predicted accuracy (the numpy
float64 forward with exactly the weights the plan holds) still meeting the budget; move it, go on
with the next precision. Moving layers to 2 bits first can spend the budget that would have let
every layer take 4 (MiniLM: 2/4/8 mixed at 56.3 MiB where uniform 4-bit meets the budget at 53.2),
so the greedy runs once from each floor (2 and up, 4 and up, ...) and the plan holding the fewest
predicted weight bytes wins. It assumes accuracy falls as more layers lose bits (checked at each
probe of the search, not proven), costs about log2(probes) forward passes per precision and floor,
and is verified in the browser afterwards: the plan's run there is judged against the same budget.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...models.rules import PrecisionRule
from ...precision.quantizers import DEFAULT_QUANTIZER
from .sensitivity import Probe, figures, predicted

BUDGET_METRICS = {"cosine": "cosine_mean", "cosine_mean": "cosine_mean", "cosine_min": "cosine_min",
                  "spearman": "spearman", "top1": "top1_agreement", "top1_agreement": "top1_agreement"}
_BUDGET = re.compile(r"^\s*([a-z0-9_]+)\s*>=\s*([0-9]*\.?[0-9]+)\s*$")


@dataclass(frozen=True)
class Budget:
    metric: str
    """An EmbeddingAccuracy field: cosine_mean, cosine_min, spearman or top1_agreement."""
    threshold: float

    def value(self, figures: Any) -> float | None:
        v = figures.get(self.metric) if isinstance(figures, dict) else getattr(figures, self.metric)
        return None if v is None else float(v)

    def met(self, figures: Any) -> bool:
        v = self.value(figures)
        return v is not None and v >= self.threshold

    @property
    def text(self) -> str:
        return f"{self.metric}>={self.threshold:g}"


def parse_budget(text: str) -> Budget:
    """'cosine>=0.99', 'cosine_min>=0.98', 'spearman>=0.97', 'top1>=0.95'; ValueError otherwise."""
    m = _BUDGET.match(text.lower())
    if m is None or m.group(1) not in BUDGET_METRICS:
        raise ValueError(f"--accuracy-budget {text!r}: write METRIC>=VALUE with METRIC one of "
                         f"{', '.join(BUDGET_METRICS)} (e.g. cosine>=0.99)")
    threshold = float(m.group(2))
    if not 0 < threshold <= 1:
        raise ValueError(f"--accuracy-budget {text!r}: the value must be in (0, 1]")
    return Budget(BUDGET_METRICS[m.group(1)], threshold)


@dataclass(frozen=True)
class Check:
    """One predicted plan tried during the search."""

    floor: int
    """The lowest precision of the greedy pass this check belongs to."""
    bits: int
    moved: int
    """How many of the candidates at ``bits`` were moved in the plan tried."""
    value: float | None
    met: bool
    weight_bytes: float | None


@dataclass(frozen=True)
class FoundPlan:
    assignment: tuple[tuple[Probe, int], ...]
    """The probes moved below the baseline, with their bits, in the order they were moved."""
    baseline_bits: int
    block_size: int
    budget: Budget
    predicted: dict[str, float | None]
    checks: tuple[Check, ...]

    def rules(self, all_layers: Sequence[str]) -> tuple[PrecisionRule, ...]:
        """Precision rules for exactly this plan; the layers left at the baseline get a last
        catch-all rule (only when there are some: a rule matching nothing is an error)."""
        out = [PrecisionRule(p.pattern, bits, self.block_size) for p, bits in self.assignment]
        moved = {name for p, _ in self.assignment for name in p.layers}
        if any(name not in moved for name in all_layers):
            out.append(PrecisionRule("*", self.baseline_bits, self.block_size))
        return tuple(out)

    def rules_json(self, all_layers: Sequence[str]) -> dict[str, Any]:
        return {"description": f"found by the sensitivity plan search for {self.budget.text} "
                               f"(ranked-prefix greedy from each floor, predicted {self.budget.metric} "
                               f"{self.budget.value(self.predicted)})",
                "rules": [r.to_json() for r in self.rules(all_layers)]}


Predictor = Callable[[tuple[PrecisionRule, ...]], dict[str, float | None]]
"""A plan's rules -> its predicted accuracy figures and ``weight_bytes``."""


def search(ranking: dict[int, Sequence[Probe]], budget: Budget, predict: Predictor, *,
           baseline_bits: int, block_size: int) -> FoundPlan:
    """``ranking``: per low precision, the probes least sensitive first. ``predict``: a plan's
    rules -> its predicted figures. The greedy from each floor; the plan meeting the budget with
    the fewest predicted weight bytes. ValueError when the baseline misses the budget."""
    base = predict(())
    if not budget.met(base):
        raise ValueError(f"the baseline (every layer at {baseline_bits}-bit) already misses "
                         f"{budget.text}: predicted {budget.metric} {budget.value(base)}")
    checks: list[Check] = []
    plans = [_greedy({b: ranking[b] for b in ranking if b >= floor}, budget, predict, base, block_size, floor, checks)
             for floor in sorted(ranking)] or [((), base)]
    assignment, figures_ = min(plans, key=lambda plan: _bytes(plan[1]))
    return FoundPlan(assignment, baseline_bits, block_size, budget, figures_, tuple(checks))


def _bytes(figures_: dict[str, float | None]) -> float:
    v = figures_.get("weight_bytes")
    return float("inf") if v is None else float(v)


def _greedy(ranking: dict[int, Sequence[Probe]], budget: Budget, predict: Predictor, base: dict[str, float | None],
            block_size: int, floor: int, checks: list[Check]) -> tuple[tuple[tuple[Probe, int], ...], dict[str, float | None]]:
    """One ranked-prefix greedy pass over ``ranking``'s precisions, lowest first; its checks
    appended to ``checks``."""
    assigned: list[tuple[Probe, int]] = []
    current = base

    def rules_for(plan: Sequence[tuple[Probe, int]]) -> tuple[PrecisionRule, ...]:
        return tuple(PrecisionRule(p.pattern, b, block_size) for p, b in plan)

    for bits in sorted(ranking):
        taken = {name for p, _ in assigned for name in p.layers}
        candidates = [p for p in ranking[bits] if not taken & set(p.layers)]
        lo, hi = 0, len(candidates)  # lo: known to meet the budget; search the longest prefix
        best = current
        while lo < hi:
            mid = (lo + hi + 1) // 2
            figures_ = predict(rules_for([*assigned, *((p, bits) for p in candidates[:mid])]))
            ok = budget.met(figures_)
            checks.append(Check(floor, bits, mid, budget.value(figures_), ok, figures_.get("weight_bytes")))
            if ok:
                lo, best = mid, figures_
            else:
                hi = mid - 1
        assigned.extend((p, bits) for p in candidates[:lo])
        current = best
    return tuple(assigned), current


def workload_predictor(workload: Any, baseline_bits: int, seed: int, weight_quant: str = DEFAULT_QUANTIZER) -> Predictor:
    """Predicted accuracy of a plan on this model workload (numpy forward vs PyTorch fp32), its
    8/4/2-bit layers' codes made by ``weight_quant``, and the weight bytes it holds."""
    def predict(rules: tuple[PrecisionRule, ...]) -> dict[str, float | None]:
        planned = dataclasses.replace(workload, rules=rules, rules_name="plan search")
        block = rules[0].block_size if rules else 32
        acc, weight_bytes = predicted(planned, baseline_bits, block, seed, weight_quant)
        return {**figures(acc), "weight_bytes": float(weight_bytes)}
    return predict

"""Precision rules: which bits each linear layer gets. Data, not code.

A rule set is an ordered list of ``{"match": PATTERN, "bits": B, "block_size": 32}``; PATTERN is
a shell-style glob on layer names (``encoder.layer.*.attention.*``) or, prefixed ``re:``, a
regular expression that must match the whole name. The first rule that matches a layer wins;
layers no rule matches get the run's ``--bits``. A rule that matches no layer is an error (a
typo must not pass silently). ``--mixed-precision`` is the rule set in data/mixed_precision.json.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..architectures import LinearLayer
from ..vocabulary import PER_CHANNEL_BLOCK, check_packing as check_layer_packing, parse_bits

MIXED_PRECISION_RULES = Path(__file__).parent / "data" / "mixed_precision.json"


@dataclass(frozen=True)
class PrecisionRule:
    match: str
    bits: int
    block_size: int = 32

    def matches(self, name: str) -> bool:
        if self.match.startswith("re:"):
            return re.fullmatch(self.match[3:], name) is not None
        return fnmatch.fnmatchcase(name, self.match)

    def to_json(self) -> dict[str, Any]:
        block = "per-channel" if self.block_size == PER_CHANNEL_BLOCK else self.block_size
        return {"match": self.match, "bits": self.bits, "block_size": block}


@dataclass(frozen=True)
class LayerPrecision:
    """What one linear layer is asked to hold."""

    layer: LinearLayer
    bits: int
    block_size: int
    """As asked: a block size, or PER_CHANNEL_BLOCK (see ``block``)."""
    rule: str
    """The rule's pattern that chose it, or '--bits'."""

    @property
    def per_channel(self) -> bool:
        return self.block_size == PER_CHANNEL_BLOCK

    @property
    def block(self) -> int:
        """The block along K the layer's bytes hold: K itself per channel."""
        return self.layer.k if self.per_channel else self.block_size


def _rule(doc: Any, where: str, i: int) -> PrecisionRule:
    if not isinstance(doc, dict) or "match" not in doc or "bits" not in doc:
        raise ValueError(f"{where}: rule {i + 1} is not an object with 'match' and 'bits'")
    unknown = set(doc) - {"match", "bits", "block_size"}
    if unknown:
        raise ValueError(f"{where}: rule {i + 1} has unknown keys {', '.join(sorted(unknown))}")
    pattern = doc["match"]
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{where}: rule {i + 1}: 'match' must be a non-empty string")
    if pattern.startswith("re:"):
        try:
            re.compile(pattern[3:])
        except re.error as exc:
            raise ValueError(f"{where}: rule {i + 1}: bad regular expression {pattern[3:]!r} ({exc})") from None
    try:
        bits = parse_bits(doc["bits"])
    except ValueError as exc:
        raise ValueError(f"{where}: rule {i + 1}: {exc}") from None
    block = doc.get("block_size", 32)
    if block == "per-channel":
        block = PER_CHANNEL_BLOCK
    elif isinstance(block, bool) or not isinstance(block, int) or block <= 0:
        raise ValueError(f"{where}: rule {i + 1}: block_size must be a positive integer or \"per-channel\"")
    return PrecisionRule(pattern, bits, block)


def parse_rules(doc: Any, where: str) -> tuple[PrecisionRule, ...]:
    if isinstance(doc, dict) and "rules" in doc:
        doc = doc["rules"]
    if not isinstance(doc, list) or not doc:
        raise ValueError(f"{where}: expected a non-empty list of rules (or {{\"rules\": [...]}})")
    return tuple(_rule(r, where, i) for i, r in enumerate(doc))


def load_rules(path: Path | str) -> tuple[PrecisionRule, ...]:
    """A JSON or YAML rules file; ValueError with one line when it cannot be used."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"precision rules file {path}: cannot read ({exc.__class__.__name__})") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - JSON and YAML parse errors differ
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"precision rules file {path} does not parse: {first}") from None
    return parse_rules(doc, f"precision rules file {path}")


def mixed_precision_rules() -> tuple[PrecisionRule, ...]:
    return load_rules(MIXED_PRECISION_RULES)


def assign(layers: Sequence[LinearLayer], rules: Sequence[PrecisionRule], default_bits: int,
           default_block: int) -> list[LayerPrecision]:
    """Each layer's bits: first matching rule, else the run's bits. ValueError for a rule that
    matches no layer."""
    used = [False] * len(rules)
    out = []
    for layer in layers:
        for i, rule in enumerate(rules):
            if rule.matches(layer.name):
                used[i] = True
                out.append(LayerPrecision(layer, rule.bits, rule.block_size, rule.match))
                break
        else:
            out.append(LayerPrecision(layer, default_bits, default_block, "--bits"))
    idle = [r.match for r, u in zip(rules, used) if not u]
    if idle:
        raise ValueError(f"precision rule {idle[0]!r} matches no layer of this model "
                         f"(layers look like {layers[0].name})")
    return out


def float32_first(names: Sequence[str], rules: tuple[PrecisionRule, ...]) -> tuple[PrecisionRule, ...]:
    """Exact-name 32-bit rules for the named layers, ahead of ``rules``."""
    return tuple(PrecisionRule(name, 32) for name in names) + rules


def check_packing(plan: Sequence[LayerPrecision]) -> None:
    """ValueError (one line) for a packed layer whose K its block size does not divide, or whose
    block is not whole 32-bit words of its bits."""
    for p in plan:
        check_layer_packing(p.layer.k, p.bits, p.block, f"layer {p.layer.name}")


def chosen_rules(mixed_precision: bool, precision_rules: Path | str | None,
                 mixed_path: Path = MIXED_PRECISION_RULES) -> tuple[tuple[PrecisionRule, ...], str]:
    """The rule set the user's words name and its name for rows: none ('', every layer at --bits),
    --mixed-precision (the kind's rules file ``mixed_path``), or a --precision-rules file."""
    if mixed_precision and precision_rules is not None:
        raise ValueError("--mixed-precision and --precision-rules are two rule sets: choose one")
    if mixed_precision:
        return load_rules(mixed_path), "mixed-precision"
    if precision_rules is not None:
        return load_rules(precision_rules), str(precision_rules)
    return (), ""


def summary(plan: Sequence[LayerPrecision]) -> str:
    """'uniform:4' or 'mixed:8x24,4x12' (bits x layer count, most bits first)."""
    counts = Counter(p.bits for p in plan)
    if len(counts) == 1:
        return f"uniform:{next(iter(counts))}"
    return "mixed:" + ",".join(f"{b}x{c}" for b, c in sorted(counts.items(), reverse=True))

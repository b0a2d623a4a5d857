"""Which browser and engine versions a configuration ran on, and how they changed between two
sweeps: a known change point that compare and history attribute a step to ("chrome 153.0.8010.0
-> 156.0.7000.1: 4-bit 1x768x3072 +40.0% slower") instead of refusing to compare the sweeps.

A row's versions are its own columns (``browser_version``: what the browser reported;
``engine_version``: the engine build the page reported), read from the data, never typed; a
row that does not say (older folders) falls back on environment.json's version of its browser.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

VERSION_COLUMNS = ("browser_version", "engine_version")
"""The row columns that name what ran: a difference in them is a known change point."""


@dataclass(frozen=True)
class Versions:
    """What a configuration ran on in one sweep ('' where unknown; several joined by ' / ')."""

    browser: str = ""
    """The browser's name as the rows give it ('chrome', 'firefox')."""
    browser_version: str = ""
    engine: str = ""
    engine_version: str = ""


@dataclass(frozen=True)
class VersionChange:
    """The versions of one configuration on either side of a change point."""

    before: Versions
    after: Versions

    @property
    def changed(self) -> bool:
        return self.text != ""

    @property
    def text(self) -> str:
        """'chrome 153.0.8010.0 -> 156.0.7000.1; ort 1.30.0 -> 1.31.0-dev' ('' when nothing
        known changed: an unknown side is not a change)."""
        parts = []
        for name, b, a in ((self.after.browser, self.before.browser_version, self.after.browser_version),
                           (self.after.engine, self.before.engine_version, self.after.engine_version)):
            if b and a and b != a:
                parts.append(f"{name} {b} -> {a}")
        return "; ".join(parts)


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return " ".join(str(value).split())


def row_versions(rows: Iterable[Mapping[str, Any]], environment: Mapping[str, Any] | None = None) -> Versions:
    """The versions of one configuration's rows in one sweep (its repetitions': distinct values
    joined, in order); the browser's version from environment.json when the rows do not say."""
    rows = list(rows)
    found: dict[str, list[str]] = {k: [] for k in ("browser", "engine", *VERSION_COLUMNS)}
    for r in rows:
        for key, values in found.items():
            if (v := _text(r.get(key))) and v not in values:
                values.append(v)
    browser = " / ".join(found["browser"])
    browser_version = " / ".join(found["browser_version"])
    if not browser_version and browser:
        recorded = ((environment or {}).get("browsers") or {}).get(browser) or {}
        browser_version = _text(recorded.get("version"))
    return Versions(browser, browser_version, " / ".join(found["engine"]), " / ".join(found["engine_version"]))

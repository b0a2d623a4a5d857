"""Reading a number out of a table cell: the one rule for every reader of result files."""

from __future__ import annotations

import math
from typing import Any


def number(value: Any) -> float | None:
    """A float from a table value; None for empty, unreadable or NaN."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v

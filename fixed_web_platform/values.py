"""Reading table cells: a number out of one, and whether one is blank; the one rule for every
reader of result files."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def number(value: Any) -> float | None:
    """A float from a table value; None for empty, unreadable or NaN."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def is_blank(value: Any) -> bool:
    """A cell with nothing in it: None, NaN or pandas' NA (a column of another workload kind)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))

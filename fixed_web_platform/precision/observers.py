"""Calibration observers: the range of an activation seen over calibration inputs, turned into
scale and zero point by ``quant.qparams_from_range`` (the rule the weights use too).

An observer sees activations [..., C] batch by batch (``observe``) and gives a range per tensor
(``per_channel=False``: arrays of shape [1]) or per channel (the last axis: shape [C]):

- ``MinMax``: the smallest and largest value seen.
- ``MovingAverageMinMax(averaging_constant)``: each batch's min and max folded into a running
  average, ``r = (1 - c) * r + c * batch`` (the first batch sets it); outliers of one batch count
  for ``c`` of it.
- ``Percentile(percentile)``: the ``100 - p`` and ``p`` percentiles of every value seen (99.99:
  one value in ten thousand may clip on each side).
- ``MSE``: the clipping range, a shrunken MinMax range ``[a * lo, a * hi]`` for ``a`` on a grid in
  (0, 1], whose quantize-dequantize error (mean squared, over every value seen) is smallest; it
  lies inside MinMax's by construction.

Observers that need the values themselves (Percentile, MSE) keep them; the calibration sets here
are small (tens of texts).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from . import quant

MSE_GRID = 40
"""Shrink factors tried by MSE: 1, then evenly down to 1 / MSE_GRID."""


@dataclass
class Observer(ABC):
    per_channel: bool = False
    name: str = field(init=False, default="")

    def _flat(self, x: np.ndarray) -> np.ndarray:
        a = np.asarray(x, dtype=np.float64)
        a = a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a.reshape(-1, 1)
        return a if self.per_channel else a.reshape(-1, 1)

    @abstractmethod
    def observe(self, x: np.ndarray) -> None: ...

    @abstractmethod
    def range(self) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi): shape [1] per tensor, [C] per channel."""

    def qparams(self, bits: int = 8, *, symmetric: bool = False) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.range()
        return quant.qparams_from_range(lo, hi, bits, symmetric=symmetric)

    @property
    def label(self) -> str:
        return f"{self.name}{' per channel' if self.per_channel else ''}"


@dataclass
class _Running(Observer):
    """Keeps a running (lo, hi); ``fold`` says how a batch's own min and max join it."""

    _lo: np.ndarray | None = None
    _hi: np.ndarray | None = None

    @abstractmethod
    def fold(self, old: np.ndarray, new: np.ndarray, upper: bool) -> np.ndarray: ...

    def observe(self, x: np.ndarray) -> None:
        a = self._flat(x)
        lo, hi = a.min(axis=0), a.max(axis=0)
        self._lo = lo if self._lo is None else self.fold(self._lo, lo, False)
        self._hi = hi if self._hi is None else self.fold(self._hi, hi, True)

    def range(self) -> tuple[np.ndarray, np.ndarray]:
        if self._lo is None or self._hi is None:
            raise ValueError("the observer has seen no values")
        return self._lo, self._hi


@dataclass
class MinMax(_Running):
    def __post_init__(self) -> None:
        self.name = "minmax"

    def fold(self, old: np.ndarray, new: np.ndarray, upper: bool) -> np.ndarray:
        return np.maximum(old, new) if upper else np.minimum(old, new)


@dataclass
class MovingAverageMinMax(_Running):
    averaging_constant: float = 0.01

    def __post_init__(self) -> None:
        if not 0 < self.averaging_constant <= 1:
            raise ValueError(f"averaging constant must be in (0, 1], got {self.averaging_constant}")
        self.name = f"moving-average-minmax({self.averaging_constant:g})"

    def fold(self, old: np.ndarray, new: np.ndarray, upper: bool) -> np.ndarray:
        c = self.averaging_constant
        return (1 - c) * old + c * new


@dataclass
class _Keeping(Observer):
    """Keeps every value seen (per channel: the columns)."""

    _seen: list[np.ndarray] = field(default_factory=list)

    def observe(self, x: np.ndarray) -> None:
        self._seen.append(self._flat(x))

    def values(self) -> np.ndarray:
        if not self._seen:
            raise ValueError("the observer has seen no values")
        return np.concatenate(self._seen, axis=0)


@dataclass
class Percentile(_Keeping):
    percentile: float = 99.99

    def __post_init__(self) -> None:
        if not 50 < self.percentile <= 100:
            raise ValueError(f"percentile must be in (50, 100], got {self.percentile}")
        self.name = f"percentile({self.percentile:g})"

    def range(self) -> tuple[np.ndarray, np.ndarray]:
        v = self.values()
        return (np.percentile(v, 100 - self.percentile, axis=0),
                np.percentile(v, self.percentile, axis=0))


@dataclass
class MSE(_Keeping):
    bits: int = 8
    symmetric: bool = False

    def __post_init__(self) -> None:
        self.name = "mse"

    def range(self) -> tuple[np.ndarray, np.ndarray]:
        v = self.values()
        lo, hi = v.min(axis=0), v.max(axis=0)
        best_err = np.full(lo.shape, np.inf)
        best_lo, best_hi = lo.copy(), hi.copy()
        for a in np.linspace(1.0, 1.0 / MSE_GRID, MSE_GRID):
            scale, zp = quant.qparams_from_range(a * lo, a * hi, self.bits, symmetric=self.symmetric)
            err = ((fake_quantize(v, scale, zp, self.bits) - v) ** 2).mean(axis=0)
            better = err < best_err
            best_err = np.where(better, err, best_err)
            best_lo = np.where(better, a * lo, best_lo)
            best_hi = np.where(better, a * hi, best_hi)
        return best_lo, best_hi


def fake_quantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, bits: int) -> np.ndarray:
    """quantize -> dequantize in float64 with per-tensor/per-channel (last axis) parameters."""
    qmin, qmax = quant.DTYPE_RANGES[quant._SIGNED_DTYPE_FOR_BITS[bits]]
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    z = np.asarray(zero_point, dtype=np.float64).reshape(-1)
    q = np.clip(np.rint(np.asarray(x, dtype=np.float64) / s) + z, qmin, qmax)
    return (q - z) * s


MINMAX = "minmax"
OBSERVERS = {
    MINMAX: MinMax,
    "moving-average-minmax": MovingAverageMinMax,
    "percentile": Percentile,
    "mse": MSE,
}
"""By the name a user gives (``--observer``)."""


def make_observer(name: str, *, per_channel: bool = False) -> Observer:
    try:
        cls = OBSERVERS[name]
    except KeyError:
        raise ValueError(f"observer {name!r} is not one of {', '.join(OBSERVERS)}") from None
    return cls(per_channel=per_channel)

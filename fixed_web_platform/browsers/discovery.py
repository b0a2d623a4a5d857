"""Finding a browser and its driver: explicit path -> project-local install -> system paths.

Nothing here downloads anything; a browser that is not found raises ``BrowserUnavailable``
naming what was searched and how to install it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..vocabulary import BrowserName
from .products import PRODUCTS, BrowserProduct, DriverKind


class BrowserUnavailable(Exception):
    """The browser or its driver is not installed here; the message says what was searched."""


@dataclass(frozen=True)
class ResolvedBrowser:
    product: BrowserProduct
    binary: Path
    driver: Path | None
    driver_kind: DriverKind


def _find(candidate: str) -> Path | None:
    if "/" in candidate:
        path = Path(candidate)
        return path if path.is_file() and path.stat().st_mode & 0o111 else None
    found = shutil.which(candidate)
    return Path(found).resolve() if found else None


def resolve(
    name: BrowserName, binary: str | None = None, driver: str | None = None
) -> ResolvedBrowser:
    """Find a browser's binary and driver; an explicit path must exist or it is an error."""
    product = PRODUCTS[name]
    binaries = (binary,) if binary else product.binaries
    found_binary = next((p for p in map(_find, binaries) if p), None)
    if found_binary is None:
        raise BrowserUnavailable(
            f"{name}: no browser binary found (searched {', '.join(binaries)}); "
            f"{'check --browser-binary' if binary else product.install_hint}"
        )
    drivers = (driver,) if driver else product.drivers
    found_driver = next((p for p in map(_find, drivers) if p), None)
    if found_driver is not None:
        return ResolvedBrowser(product, found_binary, found_driver, product.driver_kind)
    if product.fallback_driver_kind is not None and not driver:
        return ResolvedBrowser(product, found_binary, None, product.fallback_driver_kind)
    raise BrowserUnavailable(
        f"{name}: no {product.driver_kind} found (searched {', '.join(drivers)}); "
        f"{'check --driver' if driver else product.install_hint}"
    )

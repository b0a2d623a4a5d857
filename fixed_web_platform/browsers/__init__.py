"""Browsers: products (data), discovery (where they are), sessions (running them)."""

from .discovery import BrowserUnavailable, ResolvedBrowser, resolve, resolve_remote
from .products import PRODUCTS, BrowserProduct, DriverKind
from .sessions import BrowserSession, PageGone, launch

__all__ = ["PRODUCTS", "BrowserProduct", "BrowserSession", "BrowserUnavailable", "DriverKind",
           "PageGone", "ResolvedBrowser", "launch", "resolve", "resolve_remote"]

"""Probes: what is measured or read about the browser around a run: process memory (memory.py),
rest before a page load (quiet.py), the adapter's label (adapter.py)."""

"""Probes: what is measured or read about the browser around a run (memory, adapter)."""

"""Engines: who builds the work for the page (see base.py), listed in registry.py with the table
of which workload kinds each runs."""

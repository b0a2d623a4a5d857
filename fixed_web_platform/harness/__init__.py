"""Harness: the page protocol (protocol.py), the local job server (server.py), one page visit with
liveness (page.py), and the loop over a plan's runs (runner.py)."""

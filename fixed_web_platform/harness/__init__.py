"""Harness: the local job server (server.py), one page visit with liveness (page.py), and the loop
over a plan's runs (runner.py). The page protocol they speak is page_protocol.py, below the engines."""

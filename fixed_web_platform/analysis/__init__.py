"""Analysis: statistics on raw samples (stats.py), a run's row from its replies (measurement.py),
two sweeps judged against each other (compare.py)."""

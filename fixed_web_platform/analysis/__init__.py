"""Analysis: a run's row from its replies (measurement.py), two sweeps judged against each other
(compare.py, false_alarms.py), nights of a history judged (history.py); the statistics of one
series of samples they use are in series/."""

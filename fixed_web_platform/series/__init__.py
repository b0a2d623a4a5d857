"""Statistics of one series of timed samples, below every other layer but the vocabulary:
summaries and intervals (stats.py), where a page load's iterations settle (steady.py) and the
change points it is judged by (changepoints.py). Kinds, analysis and the report all use them."""

"""Evaluating a variant and judging the result: metrics, criteria, statistics, the holdout claim."""

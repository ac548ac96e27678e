"""Evaluate, mutate, optimise, record: the search over harness variants, and the command line on top."""

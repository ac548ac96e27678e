"""Mutators: evidence in, new pool entries (or control re-evaluations) out."""

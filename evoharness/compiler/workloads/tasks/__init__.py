"""A workload from a tasks file (JSONL or YAML) and Python tool functions: no Workload class to write."""

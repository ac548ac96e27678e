"""Workloads shipped with evoharness, each a Workload (compiler.runtime.workload) registered by name."""

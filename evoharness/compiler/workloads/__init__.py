"""Workloads shipped with evoharness, each a Workload (evoharness.compiler.runtime.workload) registered by name."""

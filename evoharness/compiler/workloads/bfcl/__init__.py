"""BFCL multi-turn as a Workload: tasks, a stateful environment over bfcl-eval's backends, its scorer and tools."""

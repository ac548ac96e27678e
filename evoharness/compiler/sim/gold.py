"""Where the simulator gets a task's gold trajectory and tool metadata (injectable)."""
from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from evoharness.compiler.runtime.workload import Task, Workload, workload_factory
from evoharness.compiler.toolspec import ToolSpec


class GoldSource(Protocol):
    def task(self, task_id: str) -> Task: ...

    def tool_specs(self, task_id: str) -> Mapping[str, ToolSpec]: ...


class WorkloadGoldSource:
    """Gold from the workload registry: ``bfcl/<id>`` -> ``workload_factory('bfcl')()``.

    Workload instances and their tool specs are cached: constructing one may load a dataset.
    """

    def __init__(self) -> None:
        self._workloads: dict[str, Workload] = {}
        self._specs: dict[str, Mapping[str, ToolSpec]] = {}
        self._lock = threading.Lock()

    def _workload(self, task_id: str) -> Workload:
        name = task_id.split("/", 1)[0]
        with self._lock:
            if name not in self._workloads:
                self._workloads[name] = workload_factory(name)()
            return self._workloads[name]

    def task(self, task_id: str) -> Task:
        return self._workload(task_id).task(task_id)

    def tool_specs(self, task_id: str) -> Mapping[str, ToolSpec]:
        name = task_id.split("/", 1)[0]
        workload = self._workload(task_id)
        with self._lock:
            if name not in self._specs:
                self._specs[name] = {s.name: s for s in workload.tool_specs()}
            return self._specs[name]


class StaticGoldSource:
    """Fixed tasks and specs, for tests and for workloads outside the registry."""

    def __init__(self, tasks: Sequence[Task], specs: Sequence[ToolSpec] = ()) -> None:
        self._tasks = {t.task_id: t for t in tasks}
        self._specs = {s.name: s for s in specs}

    def task(self, task_id: str) -> Task:
        if task_id not in self._tasks:
            raise KeyError(f"unknown task {task_id!r}; this gold source knows {sorted(self._tasks)}")
        return self._tasks[task_id]

    def tool_specs(self, task_id: str) -> Mapping[str, ToolSpec]:
        return self._specs

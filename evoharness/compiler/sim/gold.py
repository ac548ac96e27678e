"""Where the simulator gets a task's gold trajectory and tool metadata (injectable)."""
from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from evoharness.compiler.runtime.workload import Task, Workload, live_tools, workload_factory
from evoharness.compiler.toolspec import ToolSpec


class GoldSource(Protocol):
    def task(self, task_id: str) -> Task: ...

    def tool_specs(self, task_id: str) -> Mapping[str, ToolSpec]: ...


def reference_results(gold: object, task_id: str) -> tuple[str, ...]:
    """The results the task's reference calls return, whole, in order; () when ``gold`` cannot say
    (a source without them). What a clipped conversation may have lost is judged against them."""
    read = getattr(gold, "reference_results", None)
    return tuple(read(task_id)) if callable(read) else ()


class WorkloadGoldSource:
    """Gold from the workload registry: ``bfcl/<id>`` -> ``workload_factory('bfcl')()``.

    Workload instances and their tool specs are cached: constructing one may load a dataset.
    """

    def __init__(self) -> None:
        self._workloads: dict[str, Workload] = {}
        self._specs: dict[str, Mapping[str, ToolSpec]] = {}
        self._results: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def _workload(self, task_id: str) -> Workload:
        name = task_id.split("/", 1)[0]
        with self._lock:
            if name not in self._workloads:
                self._workloads[name] = workload_factory(name)()
            return self._workloads[name]

    def task(self, task_id: str) -> Task:
        return self._workload(task_id).task(task_id)

    def reference_results(self, task_id: str) -> tuple[str, ...]:
        """The reference calls played in a fresh environment of the task (seed 0), once per task.
        A workload whose tools reach a live service is never played here: ()."""
        with self._lock:
            if task_id in self._results:
                return self._results[task_id]
        workload = self._workload(task_id)
        out: list[str] = []
        if not live_tools(workload):
            task = workload.task(task_id)
            env = workload.make_environment(task, seed=0)
            for turn, calls in enumerate(task.gold):
                for call in calls:
                    try:
                        out.append(str(env.call(call.name, dict(call.arguments))))
                    except Exception as exc:  # a reference call the environment refuses: its error is its result
                        out.append(f"Error: {exc}")
                env.end_turn(turn)
        with self._lock:
            self._results[task_id] = tuple(out)
        return self._results[task_id]

    def tool_specs(self, task_id: str) -> Mapping[str, ToolSpec]:
        name = task_id.split("/", 1)[0]
        workload = self._workload(task_id)
        with self._lock:
            if name not in self._specs:
                self._specs[name] = {s.name: s for s in workload.tool_specs()}
            return self._specs[name]


class StaticGoldSource:
    """Fixed tasks and specs (and, optionally, what each task's reference calls return), for tests
    and for workloads outside the registry."""

    def __init__(self, tasks: Sequence[Task], specs: Sequence[ToolSpec] = (),
                 results: Mapping[str, Sequence[str]] | None = None) -> None:
        self._tasks = {t.task_id: t for t in tasks}
        self._specs = {s.name: s for s in specs}
        self._results = {k: tuple(v) for k, v in (results or {}).items()}

    def reference_results(self, task_id: str) -> tuple[str, ...]:
        return self._results.get(task_id, ())

    def task(self, task_id: str) -> Task:
        if task_id not in self._tasks:
            raise KeyError(f"unknown task {task_id!r}; this gold source knows {sorted(self._tasks)}")
        return self._tasks[task_id]

    def tool_specs(self, task_id: str) -> Mapping[str, ToolSpec]:
        return self._specs

"""A task's identity: every field of it as plain JSON data, and the hashes over one task and a set
of them. What a doctor record, a search's freeze and a stored episode name their tasks by."""
from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.variant import canonical_json, content_hash


def task_record(task: Task) -> dict[str, Any]:
    """Every field of ``task`` as plain JSON data: whatever an episode is played or scored on
    (turns, offered and added tools, gold, answers, ``data`` such as a tasks file's ``state`` and
    ``expected_state``, cluster). Built from the dataclass's own fields, so a field added to Task
    is hashed without anyone remembering to. Data that is not JSON (an object, a NaN) is a
    ConfigError naming the task and the field: a hash over its repr could differ run to run."""
    return {f.name: _plain(getattr(task, f.name), f"{task.task_id}: {f.name}") for f in fields(Task)}


def task_hash(task: Task) -> str:
    return content_hash(task_record(task))


def tasks_hash(tasks: Sequence[Task]) -> str:
    """Hash of the frozen task set, every field of every task (``task_record``), in order: a
    changed split, clustering, tool list or scoring contract (a task's expected state) shows."""
    return content_hash([task_record(t) for t in tasks])


def _plain(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _not_json(where, value)
        return value
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), f"{where}.{f.name}") for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):  # unordered: its canonical form is sorted
        return sorted((_plain(v, where) for v in value), key=canonical_json)
    if isinstance(value, (datetime.date, datetime.time)):  # what YAML reads an unquoted date as
        return value.isoformat()
    raise _not_json(where, value)


def _not_json(where: str, value: Any) -> ConfigError:
    return ConfigError("workload", f"task {where} holds {type(value).__name__} {str(value)[:60]!r}, which is not JSON data, "
                       "so the tasks hash (doctor record, search freeze) cannot cover it",
                       "keep a task's fields to JSON data (strings, numbers, booleans, lists, mappings)")

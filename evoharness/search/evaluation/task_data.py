"""A task's identity: every field of it as plain JSON data, and the hashes over one task and a set
of them. What a doctor record, a search's freeze and a stored episode name their tasks by."""
from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
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
    return _hash(_fields(task), lambda: task_record(task))


def tasks_hash(tasks: Sequence[Task]) -> str:
    """Hash of the frozen task set, every field of every task (``task_record``), in order: a
    changed split, clustering, tool list or scoring contract (a task's expected state) shows."""
    return _hash([_fields(t) for t in tasks], lambda: [task_record(t) for t in tasks])


# A key of these types is written by json as true/false/null but by ``_plain`` as True/False/None:
# the fast encoding below is trusted only where neither shape can occur.
_KEY_SHAPES = ('"true":', '"false":', '"null":')


def _hash(value: Any, records: Callable[[], Any]) -> str:
    """``content_hash(records())``, computed by json's C encoder over the tasks as they are (a
    tuple is a list to it, a dataclass or mapping a dict): the same text the record walk gives for
    JSON data, in a fraction of its time, which every evaluation pays. Whatever the encoder cannot
    write the same way (a NaN, an object, a key that is not a string) takes the walk, which names it."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_as_json)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is None or any(shape in text for shape in _KEY_SHAPES):
        return content_hash(records())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _fields(task: Task) -> dict[str, Any]:
    return {f.name: getattr(task, f.name) for f in fields(Task)}


def _as_json(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in fields(value)}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    raise TypeError(type(value).__name__)  # a set's canonical order, and anything else, is the walk's


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

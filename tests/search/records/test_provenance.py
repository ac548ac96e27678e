"""tasks_hash: what the doctor's record and the search's freeze hash of a task set: every field of
every task, so a changed scoring contract (a task's data) shows."""
from __future__ import annotations

import datetime
from dataclasses import fields, replace
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.search.evaluation.task_data import task_record, tasks_hash

TASKS = [Task(f"w/{i}", "holdout", (({"role": "user", "content": f"Do {i}."},),), ("put",),
              gold=((ToolCall("put", {"value": str(i)}),),), data={"state": {"n": i}, "expected_state": {"n": i + 1}})
         for i in range(4)]

# one changed value per Task field: a field added to Task without an entry here fails the test below
CHANGED: dict[str, Any] = {
    "task_id": "w/other", "split": "dev", "turns": (({"role": "user", "content": "Do something else."},),),
    "tool_names": ("put", "get"), "gold": ((ToolCall("put", {"value": "x"}),),), "added_tools": {1: ("get",)},
    "answers": ("done",), "data": {"state": {"n": 0}, "expected_state": {"n": 2}}, "cluster": "w/pair",
}


def test_every_field_of_a_task_is_in_the_hash() -> None:
    assert {f.name for f in fields(Task)} == set(CHANGED)
    base = tasks_hash(TASKS)
    for name, value in CHANGED.items():
        edited = [replace(TASKS[0], **{name: value}), *TASKS[1:]]
        assert tasks_hash(edited) != base, name
    assert tasks_hash([replace(t) for t in TASKS]) == base  # a copy of the same tasks hashes alike


def test_a_changed_expected_state_changes_the_hash_and_a_changed_clustering_too() -> None:
    edited = [replace(TASKS[0], data={**TASKS[0].data, "expected_state": {"n": 99}}), *TASKS[1:]]
    pairs = [replace(t, cluster=f"w/pair_{i // 2}") for i, t in enumerate(TASKS)]
    apart = [replace(t, cluster=f"w/pair_{i % 2}") for i, t in enumerate(TASKS)]
    assert len({tasks_hash(TASKS), tasks_hash(edited), tasks_hash(pairs), tasks_hash(apart)}) == 4


def test_yaml_dates_and_sets_are_data_and_an_object_is_one_line() -> None:
    dated = replace(TASKS[0], data={"due": datetime.date(2024, 1, 2), "tags": frozenset({"b", "a"})})
    assert task_record(dated)["data"] == {"due": "2024-01-02", "tags": ["a", "b"]}
    with pytest.raises(ConfigError, match=r"task w/0: data.handle holds object .* not JSON data.*Fix: keep a task's fields"):
        tasks_hash([replace(TASKS[0], data={"handle": object()})])
    with pytest.raises(ConfigError, match="data.weight holds float 'nan'"):
        tasks_hash([replace(TASKS[0], data={"weight": float("nan")})])

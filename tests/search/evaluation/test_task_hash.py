"""The tasks hash's fast encoding gives, for every task, the hash of the record walk it replaced
(stored doctor records, search freezes and episode stores name tasks by it), and falls back to the
walk, with its named error, wherever json would write something else."""
from __future__ import annotations

import datetime
import enum
from types import MappingProxyType
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import SPLITS, Task
from evoharness.compiler.variant import content_hash
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
from evoharness.search.evaluation.task_data import task_hash, task_record, tasks_hash


class Level(enum.IntEnum):
    HIGH = 3


def walked(task: Task) -> str:
    return content_hash(task_record(task))


def task(data: Any, **extra: Any) -> Task:
    return Task(task_id="t/1", split="dev", turns=(({"role": "user", "content": "hi"},),), tool_names=("a",),
                gold=((ToolCall(name="a", arguments={"x": 1}),),), data=data, **extra)


def test_every_bfcl_task_hashes_as_the_walk_does() -> None:
    tasks = [t for split in SPLITS for t in BfclWorkload(categories=("base", "miss_param", "miss_func", "long_context")).tasks(split)]
    assert len(tasks) > 700
    assert all(task_hash(t) == walked(t) for t in tasks)
    assert tasks_hash(tasks) == content_hash([task_record(t) for t in tasks])


@pytest.mark.parametrize("data", [
    {True: 1, "a": 2},  # json writes the key "true", the walk "True"
    {None: 1},
    {False: {"n": None}},
    {1: "int key", 2.5: "float key"},
    {"when": datetime.date(2026, 1, 2), "at": datetime.time(3, 4)},
    {"set": {3, 1, 2}, "frozen": frozenset({"b", "a"})},
    MappingProxyType({"inner": MappingProxyType({"k": (1, (2, 3))})}),
    {"zero": -0.0, "big": 1e300, "int": 10**30, "level": Level.HIGH, "text": "é \u2028 \"quoted\""},
    {"string that looks like a key": 'x "true": y'},
])
def test_data_json_writes_otherwise_hashes_as_the_walk_does(data: Any) -> None:
    t = task(data, added_tools={1: ("b",)})
    assert task_hash(t) == walked(t)
    assert tasks_hash([t, t]) == content_hash([task_record(t), task_record(t)])


def test_a_bool_key_and_its_string_hash_apart() -> None:
    assert task_hash(task({True: 1})) != task_hash(task({"true": 1}))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object()])
def test_data_that_is_not_json_is_the_walks_named_error(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"task t/1: data\.x holds .*not JSON data"):
        task_hash(task({"x": bad}))
    with pytest.raises(ConfigError, match="not JSON data"):
        tasks_hash([task({"x": bad})])

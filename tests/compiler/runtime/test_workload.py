"""Task.cluster: a task names its cluster, or is a cluster of its own."""
from __future__ import annotations

import copy
import pickle
from dataclasses import FrozenInstanceError, replace

import pytest

from evoharness.compiler.runtime.workload import Task

TURNS = (({"role": "user", "content": "Hi."},),)


def test_a_task_without_a_cluster_is_its_own() -> None:
    task = Task("w/a", "dev", TURNS, ("ls",))
    assert task.cluster == "w/a"
    assert Task("w/a", "dev", TURNS, ("ls",), cluster="") == task  # "" is the default, spelled out
    assert Task("w/a", "dev", TURNS, ("ls",), cluster="w/a") == task


def test_a_named_cluster_is_kept_through_copies_and_replace_and_the_task_stays_frozen() -> None:
    task = Task("w/a", "dev", TURNS, ("ls",), cluster="w/scenario_3")
    assert task.cluster == "w/scenario_3" != Task("w/a", "dev", TURNS, ("ls",)).cluster
    assert copy.deepcopy(task) == task and pickle.loads(pickle.dumps(task)).cluster == "w/scenario_3"
    assert replace(task, task_id="w/b").cluster == "w/scenario_3"
    assert replace(Task("w/a", "dev", TURNS, ("ls",)), split="holdout").cluster == "w/a"
    with pytest.raises(FrozenInstanceError):
        task.cluster = "w/other"  # type: ignore[misc]

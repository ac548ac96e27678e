"""tasks_hash: what the doctor's record and the search's freeze hash of a task set."""
from __future__ import annotations

from dataclasses import replace

from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.variant import content_hash
from evoharness.search.records.provenance import tasks_hash

TASKS = [Task(f"w/{i}", "holdout", (({"role": "user", "content": f"Do {i}."},),), ("put",),
              gold=((ToolCall("put", {"value": str(i)}),),)) for i in range(4)]


def test_a_changed_clustering_changes_the_tasks_hash() -> None:
    pairs = [replace(t, cluster=f"w/pair_{i // 2}") for i, t in enumerate(TASKS)]
    apart = [replace(t, cluster=f"w/pair_{i % 2}") for i, t in enumerate(TASKS)]
    hashes = {tasks_hash(TASKS), tasks_hash(pairs), tasks_hash(apart)}
    assert len(hashes) == 3
    assert tasks_hash(pairs) == tasks_hash([replace(t, cluster=f"w/pair_{i // 2}") for i, t in enumerate(TASKS)])


def test_tasks_of_their_own_cluster_hash_as_before_clusters() -> None:
    """The default cluster adds nothing, so a workload with no clusters keeps its doctor record and freeze."""
    before = content_hash([[t.task_id, t.split, [list(map(dict, turn)) for turn in t.turns],
                            [[[c.name, dict(c.arguments)] for c in turn] for turn in t.gold]] for t in TASKS])
    assert tasks_hash(TASKS) == before
    assert tasks_hash([replace(t, cluster=t.task_id) for t in TASKS]) == before

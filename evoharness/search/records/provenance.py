"""What a run needs to be reproduced: versions, git revision, hashes of config and tasks (every
field of every task)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoharness.compiler.provenance import git_revision, package_versions
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.variant import content_hash
from evoharness.search.evaluation.task_data import tasks_hash


def provenance(config: Mapping[str, Any], tasks: Sequence[Task], *, packages: Sequence[str] = ()) -> dict[str, Any]:
    """``packages``: the distributions the workload declares (``Workload.packages``), versioned too."""
    return {
        "config_hash": content_hash(dict(config)),
        "tasks_hash": tasks_hash(tasks),
        "task_count": len(tasks),
        "git_revision": git_revision(),
        "versions": package_versions(packages),
    }


def split_strata(tasks: Mapping[str, Sequence[Task]]) -> dict[str, dict[str, int]]:
    """Per split, how many tasks each stratum holds (a workload labels a task's stratum in
    ``task.data["stratum"]``, e.g. BFCL's API classes; unlabelled tasks count as "-")."""
    out: dict[str, dict[str, int]] = {}
    for split, ts in tasks.items():
        counts: dict[str, int] = {}
        for t in ts:
            key = str((t.data or {}).get("stratum", "-"))
            counts[key] = counts.get(key, 0) + 1
        out[split] = dict(sorted(counts.items()))
    return out

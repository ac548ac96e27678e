"""The doctor's record: which workload it checked (a hash of its name, options, tasks and scorer)
and whether every gate passed. Evaluation reads it to warn about a workload nobody checked; the
search's freeze.json records it."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evoharness.compiler.atomic import write_json_atomic
from evoharness.compiler.configpath import portable_options
from evoharness.compiler.names import checked_name
from evoharness.compiler.runtime.workload import SPLITS, Task, Workload
from evoharness.compiler.variant import content_hash
from evoharness.search.evaluation.scorer import scorer_hash
from evoharness.search.evaluation.task_data import tasks_hash
from evoharness.search.records.versions import VERSIONS, versioned


def workload_hash(workload: Workload, options: Mapping[str, Any], *, tools: Sequence[str], max_turns: int) -> str:
    """What the doctor vouches for: the workload's name and options, every split's tasks, its
    scorer (and the code it names) and replayed tool outputs, and the harness limits its replay
    ran under (the tools the agent offers, its max_turns)."""
    tasks: list[Task] = [t for split in SPLITS for t in workload.tasks(split)]
    return content_hash({"name": workload.name, "options": portable_options(options), "tasks": tasks_hash(tasks),
                         "scorer": scorer_hash(workload), "tool_outputs": getattr(workload, "tool_outputs_hash", None),
                         "harness": {"tools": sorted(tools), "max_turns": int(max_turns)}})


def record_path(runs_dir: str | Path, name: str, digest: str) -> Path:
    """One record per checked workload and harness: two workloads of one name never overwrite each other."""
    return Path(runs_dir) / "doctor" / f"{checked_name('workload.name', name, example='bfcl')}-{digest[:16]}.json"


def write_record(path: Path, *, workload: str, digest: str, passed: bool, gates: Mapping[str, bool | None],
                 rows: Sequence[Mapping[str, Any]], checked: int, total: int) -> None:
    write_json_atomic(path, versioned("doctor", {"workload": workload, "workload_hash": digest, "passed": passed, "gates": dict(gates),
                                                 "splits": list(rows), "tasks_checked": checked, "tasks_total": total,
                                                 "created_at": datetime.now(UTC).isoformat()}))


def status(runs_dir: str | Path, name: str, digest: str | Callable[[], str], *, shipped: Path | None = None) -> dict[str, Any]:
    """The doctor's verdict on this exact workload and harness: passed true/false, or null when it
    never ran on it. ``digest`` may be the function that computes it (it reads every split's
    tasks): it is called only when there is a record of this workload to compare. ``shipped`` is
    the record a workload's package ships of its own doctor run (``Workload.doctor_record``): it
    stands in for a run on this machine while its hash is this one (same tasks, scorer code and
    benchmark version, agent tools and max_turns), and never over a record of a run here."""
    if callable(digest):
        folder = record_path(runs_dir, name, "0" * 16).parent  # the name checked before it is globbed
        if not (folder.is_dir() and any(folder.glob(f"{name}-*.json"))) and shipped is None:
            return {"passed": None, "record": None, "stale": False}
        digest = digest()
    path = record_path(runs_dir, name, digest)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        vouched = None if path.exists() else _shipped(shipped, name, digest)  # a damaged run here still outranks it
        if vouched is not None:
            return vouched
        others = sorted(path.parent.glob(f"{name}-*.json")) if path.parent.is_dir() else []
        return {"passed": None, "record": None, "stale": bool(others)}
    if not isinstance(rec, dict) or rec.get("workload_hash") != digest:
        return {"passed": None, "record": str(path), "stale": True}
    return {"passed": bool(rec.get("passed")), "record": str(path), "tasks_checked": rec.get("tasks_checked"),
            "tasks_total": rec.get("tasks_total")}


def _shipped(path: Path | None, name: str, digest: str) -> dict[str, Any] | None:
    """The shipped record's verdict when it is a passing doctor record of exactly this workload
    and harness; None otherwise (missing, unreadable or of other tasks: as if there were none)."""
    if path is None:
        return None
    try:
        rec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(rec, dict) and rec.get("schema_version") == VERSIONS["doctor"] and rec.get("workload") == name
            and rec.get("workload_hash") == digest and rec.get("passed") is True):
        return None
    return {"passed": True, "record": str(path), "shipped": True, "tasks_checked": rec.get("tasks_checked"),
            "tasks_total": rec.get("tasks_total")}


def warning(state: Mapping[str, Any], name: str) -> str | None:
    """None only when the doctor passed on every task of this workload and harness."""
    checked, total = state.get("tasks_checked"), state.get("tasks_total")
    if state.get("passed") is True and checked == total:
        return None
    if state.get("passed") is True:
        return (f"warning: workload {name!r} passed `evoharness doctor` on {checked} of its {total} tasks only "
                "(workload.limit); run it on all of them")
    if state.get("passed") is False:
        return f"warning: workload {name!r} failed its last `evoharness doctor` run ({state.get('record')}); scores may be wrong"
    return (f"warning: workload {name!r} as configured has no `evoharness doctor` run"
            f"{' (the last one checked other tasks, scorer or agent tools)' if state.get('stale') else ''}; run it to check the "
            "workload's gold, scorer and determinism")

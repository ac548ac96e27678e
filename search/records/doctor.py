"""The doctor's record: which workload it checked (a hash of its name, options, tasks and scorer)
and whether every gate passed. Evaluation reads it to warn about a workload nobody checked; the
search's freeze.json records it."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compiler.atomic import write_json_atomic
from compiler.names import checked_name
from compiler.runtime.workload import Task, Workload
from compiler.variant import content_hash
from search.evaluation.claim import scorer_hash
from search.records.provenance import tasks_hash
from search.records.versions import versioned

SPLITS = ("train", "dev", "holdout")


def workload_hash(workload: Workload, options: Mapping[str, Any]) -> str:
    """What the doctor vouches for: the workload's name and options, every split's tasks and its scorer."""
    tasks: list[Task] = [t for split in SPLITS for t in workload.tasks(split)]
    return content_hash({"name": workload.name, "options": dict(options), "tasks": tasks_hash(tasks),
                         "scorer": scorer_hash(workload), "tool_outputs": getattr(workload, "tool_outputs_hash", None)})


def record_path(runs_dir: str | Path, name: str) -> Path:
    return Path(runs_dir) / "doctor" / f"{checked_name('workload.name', name, example='bfcl')}.json"


def write_record(path: Path, *, workload: str, digest: str, passed: bool, gates: Mapping[str, bool], rows: Sequence[Mapping[str, Any]],
                 checked: int, total: int) -> None:
    write_json_atomic(path, versioned("doctor", {"workload": workload, "workload_hash": digest, "passed": passed, "gates": dict(gates),
                                                 "splits": list(rows), "tasks_checked": checked, "tasks_total": total,
                                                 "created_at": datetime.now(UTC).isoformat()}))


def status(runs_dir: str | Path, name: str, digest: str) -> dict[str, Any]:
    """The doctor's verdict on this exact workload: passed true/false, or null when it never ran on it."""
    path = record_path(runs_dir, name)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"passed": None, "record": None}
    if not isinstance(rec, dict) or rec.get("workload_hash") != digest:
        return {"passed": None, "record": str(path), "stale": True}
    return {"passed": bool(rec.get("passed")), "record": str(path), "tasks_checked": rec.get("tasks_checked"),
            "tasks_total": rec.get("tasks_total")}


def warning(state: Mapping[str, Any], name: str) -> str | None:
    if state.get("passed") is True:
        return None
    if state.get("passed") is False:
        return f"warning: workload {name!r} failed its last `evoharness doctor` run ({state.get('record')}); scores may be wrong"
    return (f"warning: workload {name!r} as configured has no `evoharness doctor` run"
            f"{' (the last one checked other tasks or another scorer)' if state.get('stale') else ''}; run it to check the "
            "workload's gold, scorer and determinism")

"""What a run needs to be reproduced: versions, git revision, hashes of config and tasks."""
from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from compiler.runtime.workload import Task
from compiler.variant import content_hash

PACKAGES = ("evoharness", "hydra-core", "omegaconf", "optuna", "litellm", "numpy", "jinja2", "networkx", "bfcl-eval")


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def git_revision(root: Path | None = None) -> str | None:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root or Path(__file__).parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def tasks_hash(tasks: Sequence[Task]) -> str:
    """Hash of the frozen task set: ids, turns and gold, so a changed split shows."""
    return content_hash([[t.task_id, t.split, [list(map(dict, turn)) for turn in t.turns], [[[c.name, dict(c.arguments)] for c in turn] for turn in t.gold]] for t in tasks])


def provenance(config: Mapping[str, Any], tasks: Sequence[Task]) -> dict[str, Any]:
    return {
        "config_hash": content_hash(dict(config)),
        "tasks_hash": tasks_hash(tasks),
        "task_count": len(tasks),
        "git_revision": git_revision(),
        "versions": package_versions(),
    }


def public_url(url: str) -> str:
    """A storage URL with any password masked, for records and reports."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a database URL (e.g. a journal file): nothing to hide
        return url

"""Facts about the code that ran, for any record: package versions and the git revision."""
from __future__ import annotations

import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

PACKAGES = ("evoharness", "hydra-core", "omegaconf", "optuna", "litellm", "numpy", "jinja2", "networkx")


def package_version(name: str) -> str:
    """The installed version of distribution ``name``, or "absent"."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def package_versions(extra: Sequence[str] = ()) -> dict[str, str]:
    """Versions of the packages every run uses, then ``extra`` (a workload's declared ``packages``)."""
    return {name: package_version(name) for name in dict.fromkeys([*PACKAGES, *extra])}


def git_revision(root: Path | None = None) -> str | None:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root or Path(__file__).parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None

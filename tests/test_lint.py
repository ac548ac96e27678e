"""The lint and type gates run in the test command, so CI keeps them: ruff (E501 at the declared
line length among its rules) over every Python tree, and mypy over the packages."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("evoharness", "hydra_plugins", "tests", "bench", "examples")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    proc = _run("ruff", "check", "--no-cache", *TREES)
    assert proc.returncode == 0, f"ruff check failed:\n{proc.stdout}\n{proc.stderr}"


def test_mypy_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", "/dev/null", "--config-file", str(ROOT / "pyproject.toml"),
                           "-p", "evoharness", "-p", "hydra_plugins"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mypy failed:\n{proc.stdout}\n{proc.stderr}"

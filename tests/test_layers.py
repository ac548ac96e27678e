"""The architecture contracts in pyproject.toml ([tool.importlinter]) hold: compiler never imports
search, the layers inside compiler and search point downwards, and no sibling modules import each
other in a cycle. Runs the real `lint-imports` so the pytest command is the CI gate."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.installed_view import build

ROOT = Path(__file__).resolve().parents[1]

# the console script's entry point, run with this interpreter so it works without the venv on PATH
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_import_contracts_are_kept(tmp_path: Path) -> None:
    if importlib.util.find_spec("importlinter") is None:
        pytest.fail("import-linter is not installed: pip install -e '.[dev]'")
    # --no-cache: write nothing into the repo (and nothing two xdist workers could race on)
    view = build(tmp_path / "site")  # grimp walks folders: the wheel's layout, not the editable hook
    proc = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=view, env={**os.environ, "PYTHONPATH": str(view)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"lint-imports failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert "0 broken" in proc.stdout, proc.stdout

"""The architecture contracts in pyproject.toml ([tool.importlinter]) hold: compiler never imports
search, the layers inside compiler and search point downwards, and no sibling modules import each
other in a cycle. Runs the real `lint-imports` so the pytest command is the CI gate."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the console script's entry point, run with this interpreter so it works without the venv on PATH
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_import_contracts_are_kept() -> None:
    if importlib.util.find_spec("importlinter") is None:
        pytest.fail("import-linter is not installed: pip install -e '.[dev]'")
    # --no-cache: nothing is written into the repository, nor raced on by two test workers
    proc = subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"lint-imports failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert "0 broken" in proc.stdout, proc.stdout

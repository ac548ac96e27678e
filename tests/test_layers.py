"""The architecture contracts in pyproject.toml ([tool.importlinter]) hold: compiler never imports
search, the layers inside compiler and search point downwards, and no sibling modules import each
other in a cycle. Runs the real `lint-imports` so the pytest command is the CI gate."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.installed_view import build, lint_imports


def test_import_contracts_are_kept(tmp_path: Path) -> None:
    if importlib.util.find_spec("importlinter") is None:
        pytest.fail("import-linter is not installed: pip install -e '.[dev]'")
    proc = lint_imports(build(tmp_path / "site"))  # grimp walks folders: the wheel's layout, not the editable hook
    assert proc.returncode == 0, f"lint-imports failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert "0 broken" in proc.stdout, proc.stdout

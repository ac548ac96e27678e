"""Each example is a plugin in a repository of its own: installed, it passes its own tests (the
evoharness.testing contract suites) run with `python -m pytest` in its folder, and it imports
nothing of evoharness but the plugin façade and the contract suites."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.install import EXAMPLES, install

NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "pyproject.toml").is_file())
ALLOWED = ("evoharness.plugin", "evoharness.testing")


@pytest.mark.parametrize("example", NAMES)
def test_the_example_passes_its_own_contract_tests(example: str, tmp_path: Path) -> None:
    source, site = install(example, tmp_path)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA"], cwd=source, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    # the contract suite ran, from the example's own tests
    passed = [line for line in proc.stdout.splitlines() if line.startswith("PASSED ")]
    assert any("test_gold_replay_passes" in line for line in passed), proc.stdout[-2000:]
    assert any("test_every_tool_a_task_names_or_calls_is_specified" in line for line in passed), proc.stdout[-2000:]


def evoharness_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of an evoharness module in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return [(line, m) for line, m in found if m == "evoharness" or m.startswith("evoharness.")]


def outside_the_facade(root: Path) -> list[str]:
    return [f"{path.relative_to(root)}:{line}: {module}" for path in sorted(root.rglob("*.py"))
            for line, module in evoharness_imports(path)
            if not any(module == a or module.startswith(a + ".") for a in ALLOWED)]


def test_the_examples_import_only_the_plugin_facade_and_the_contract_suites() -> None:
    assert NAMES == ["refunds", "tooltalk"]
    for name in NAMES:  # the scan reads the imports that are there: each example uses both
        modules = {m for path in (EXAMPLES / name).rglob("*.py") for _, m in evoharness_imports(path)}
        assert {"evoharness.plugin", "evoharness.testing"} <= modules, (name, modules)
    assert outside_the_facade(EXAMPLES) == []


def test_the_import_scan_finds_an_import_past_the_facade(tmp_path: Path) -> None:
    (tmp_path / "plugin.py").write_text("import evoharness.compiler.catalog\nfrom evoharness.plugin import tool\n"
                                        "from evoharness.search.mutators.base import register_mutator\nfrom . import x\n")
    assert outside_the_facade(tmp_path) == ["plugin.py:1: evoharness.compiler.catalog",
                                            "plugin.py:3: evoharness.search.mutators.base"]

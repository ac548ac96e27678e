"""The package laid out as a wheel installs it (evoharness/compiler/, evoharness/search/, ...),
built from wherever this interpreter imports it. The repository keeps compiler/, search/ and conf/
at its top level and an editable install maps them under ``evoharness`` with an import hook;
import-linter and mypy walk folders, so they check this copy instead: `lint-imports` run in the
repository says "Module 'evoharness.compiler' does not exist"; run it through this module:

    python -m tests.installed_view            # builds the copy in a temporary folder, runs lint-imports on it
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the console script's entry point, run with this interpreter so it works without the venv on PATH
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

PACKAGES = ("evoharness", "evoharness.compiler", "evoharness.search", "hydra_plugins.evoharness_nsga2",
            "hydra_plugins.evoharness_parallel")


def build(dest: Path) -> Path:
    """Copy every package's Python files under ``dest`` by its dotted name; return ``dest``."""
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations, f"{name} is not installed: pip install -e ."
        source = Path(next(iter(spec.submodule_search_locations)))
        target = dest.joinpath(*name.split("."))
        nested = {Path(*n.split(".")[1:]) for n in PACKAGES if n.startswith(name + ".")}
        for file in source.rglob("*.py"):
            relative = file.relative_to(source)
            if not any(relative.is_relative_to(n) for n in nested):
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, target / relative)
    return dest


def lint_imports(view: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """import-linter's own command on the copy at ``view``, with the repository's contracts.
    ``--no-cache``: nothing is written into the repository (nor raced on by two test workers)."""
    return subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--no-cache", str(ROOT / "pyproject.toml"), *args],
                          cwd=view, env={**os.environ, "PYTHONPATH": str(view)}, capture_output=True, text=True, timeout=300)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        proc = lint_imports(build(Path(folder)), *sys.argv[1:])
    print(proc.stdout, end="")
    print(proc.stderr, end="", file=sys.stderr)
    sys.exit(proc.returncode)

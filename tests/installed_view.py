"""The package laid out as a wheel installs it (evoharness/compiler/, evoharness/search/, ...),
built from wherever this interpreter imports it. The repository keeps compiler/, search/ and conf/
at its top level and an editable install maps them under ``evoharness`` with an import hook;
import-linter and mypy walk folders, so they check this copy instead."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

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

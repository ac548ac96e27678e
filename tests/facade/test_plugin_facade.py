"""evoharness.plugin is what plugins import: every name it exports resolves to the project's own
object and documents its parameters and its errors; pytest is imported only by evoharness.testing."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

import evoharness.plugin as facade

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"Workload", "Task", "Environment", "EpisodeScore", "Failure", "ToolSpec", "tool", "register_workload",
            "register_tool_catalog", "register_mutator", "register_model_provider", "ToolInfraError", "ToolCall", "Trajectory",
            "ConfigError", "Mutator", "MutationContext", "Proposal"}


def words(doc: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", doc))


def parameters(fn: Callable[..., Any]) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]


def function_problems(label: str, fn: Callable[..., Any]) -> list[str]:
    """A function's docstring names each parameter and has a Raises: section (its error contract)."""
    doc = inspect.getdoc(fn) or ""
    if not doc.strip():
        return [f"{label}: no docstring"]
    problems = [f"{label}: docstring does not name parameter {p!r}" for p in parameters(fn) if p not in words(doc)]
    return problems + ([] if re.search(r"^Raises:", doc, flags=re.M) else [f"{label}: docstring has no Raises: section"])


def class_problems(label: str, cls: type) -> list[str]:
    doc = inspect.getdoc(cls) or ""
    if not doc.strip() or doc == inspect.getdoc(object):
        return [f"{label}: no docstring of its own"]
    if dataclasses.is_dataclass(cls):  # its constructor's parameters are its fields
        return [f"{label}: docstring does not name field {f.name!r}" for f in dataclasses.fields(cls) if f.name not in words(doc)]
    if getattr(cls, "_is_protocol", False):  # each method an implementation must provide is documented
        return [p for name, member in vars(cls).items() if inspect.isfunction(member) and not name.startswith("_")
                for p in function_problems(f"{label}.{name}", member)]
    if issubclass(cls, BaseException) and "__init__" in vars(cls):
        return [f"{label}: docstring does not name parameter {p!r}" for p in parameters(cls.__init__) if p not in words(doc)]
    return []


def problems_of(name: str, obj: Any) -> list[str]:
    if inspect.isclass(obj):
        return class_problems(name, obj)
    if callable(obj):
        return function_problems(name, obj)
    return [f"{name}: not a class or a function ({type(obj).__name__}): document it at a definition"]


def test_all_is_explicit_complete_and_resolves() -> None:
    assert len(facade.__all__) == len(set(facade.__all__)), "a name is listed twice"
    assert REQUIRED <= set(facade.__all__), sorted(REQUIRED - set(facade.__all__))
    for name in facade.__all__:
        obj = getattr(facade, name)
        # re-exported, not re-implemented: the object is defined in the module that owns it
        assert getattr(obj, "__module__", "").startswith("evoharness.") and obj.__module__ != facade.__name__, name
    public = {n for n, v in vars(facade).items() if not n.startswith("_") and not inspect.ismodule(v) and n != "annotations"}
    assert public == set(facade.__all__), sorted(public ^ set(facade.__all__))


@pytest.mark.parametrize("name", facade.__all__)
def test_each_name_documents_its_parameters_and_errors(name: str) -> None:
    assert problems_of(name, getattr(facade, name)) == []


def test_the_check_finds_an_undocumented_parameter_and_a_missing_error_contract() -> None:
    def documented(path: str) -> None:
        """Read ``path``.

        Raises:
            KeyError: no such path.
        """

    def vague(path: str, mode: str) -> None:
        """Read path."""

    assert problems_of("documented", documented) == []
    assert problems_of("vague", vague) == ["vague: docstring does not name parameter 'mode'", "vague: docstring has no Raises: section"]

    @dataclasses.dataclass(frozen=True)
    class Half:
        """Has ``a``."""

        a: int
        b: int

    assert problems_of("Half", Half) == ["Half: docstring does not name field 'b'"]

    class Loose(Protocol):
        """A protocol whose method says nothing."""

        def run(self, task: str) -> None: ...

    assert problems_of("Loose", Loose) == ["Loose.run: no docstring"]


def test_importing_evoharness_and_the_facade_imports_no_pytest() -> None:
    code = "import sys, evoharness, evoharness.plugin; print(sorted(m for m in ('pytest', '_pytest') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_only_evoharness_testing_imports_pytest() -> None:
    importers = []
    for folder in ("evoharness", "hydra_plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "testing" in path.relative_to(ROOT).parts[:2]:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n.split(".")[0] in ("pytest", "_pytest") for n in names):
                    importers.append(str(path.relative_to(ROOT)))
    assert importers == []
    assert "pytest" in (ROOT / "evoharness" / "testing" / "__init__.py").read_text(encoding="utf-8")

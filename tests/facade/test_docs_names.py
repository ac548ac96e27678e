"""The docs a plugin author reads name only what exists: every backticked `register_*` decorator
and `evoharness.*` name in them, and every `from evoharness... import ...` and `@register_*` of
their code blocks, imports."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import evoharness.plugin as facade
from evoharness.compiler.catalog import CATALOGS
from evoharness.compiler.plugins import PLUGIN_GROUP
from evoharness.compiler.runtime.llm import MODEL_PROVIDERS
from evoharness.compiler.runtime.workload import WORKLOADS
from evoharness.search.mutators.base import MUTATORS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/workloads.md", "README.md")
# entry-point groups are names too, though not modules
GROUPS = {PLUGIN_GROUP, *(r.group for r in (WORKLOADS, CATALOGS, MODEL_PROVIDERS, MUTATORS))}
NAME = r"@?(?:evoharness(?:\.[A-Za-z_]\w*)+|register_\w+)"


def named(text: str) -> list[str]:
    """The names ``text`` refers to: backticked spans outside code blocks, imports and decorators inside them."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    found = [m.group(0) for span in re.findall(r"`([^`\n]+)`", prose) if (m := re.match(NAME, span.strip()))]
    for block in fenced:
        for module, names in re.findall(r"^\s*from\s+(evoharness[\w.]*)\s+import\s+([^\n#]+)", block, flags=re.M):
            found += [f"{module}.{n.strip().split(' as ')[0]}" for n in names.strip("() ").split(",") if n.strip()]
        found += re.findall(r"^\s*@(register_\w+)", block, flags=re.M)
    return found


def resolve(name: str) -> object:
    """The object ``name`` is: a façade name, a group, a module, or an attribute of the longest importable module prefix."""
    name = name.lstrip("@")
    if name in GROUPS:
        return name
    if "." not in name:
        return getattr(facade, name)
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


@pytest.mark.parametrize("doc", DOCS)
def test_every_name_the_doc_gives_exists(doc: str) -> None:
    names = sorted(set(named((ROOT / doc).read_text(encoding="utf-8"))))
    assert names, f"{doc} names nothing to check"
    missing = []
    for name in names:
        try:
            resolve(name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{name} ({type(exc).__name__}: {exc})")
    assert missing == []


def test_the_plugin_docs_import_the_facade_and_the_contract_suites() -> None:
    names = set(named((ROOT / "docs/workloads.md").read_text(encoding="utf-8")))
    assert {n for n in names if n.startswith("evoharness.plugin.")} and {n for n in names if n.startswith("evoharness.testing.")}


def test_the_scan_reads_spans_imports_and_decorators_and_refuses_a_made_up_name() -> None:
    text = ("Use `@register_catalog` or `evoharness.plugin.tool(group=...)`; `evoharness run` is a command.\n"
            "```python\nfrom evoharness.plugin import Task, tool as t\n@register_workload(\"x\")\ndef f(): ...\n```\n")
    assert named(text) == ["@register_catalog", "evoharness.plugin.tool", "evoharness.plugin.Task", "evoharness.plugin.tool",
                           "register_workload"]
    with pytest.raises(AttributeError):
        resolve("@register_catalog")
    assert resolve("evoharness.plugin.tool") is facade.tool and resolve("evoharness.mutators") == "evoharness.mutators"

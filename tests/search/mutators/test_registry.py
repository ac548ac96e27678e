"""The mutator registry: every decorated built-in is known and lazily imported; errors are one line."""
from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.plugins import NamedRegistry
from evoharness.search.mutators import base
from evoharness.search.mutators.base import MUTATORS, known_mutators, make_mutator, register_mutator

REPO = Path(__file__).resolve().parents[3]
SOURCE = {m.group(1): f"evoharness.search.mutators.{path.stem}"
          for path in sorted((REPO / "evoharness" / "search" / "mutators").glob("*.py"))
          for m in re.finditer(r'^@register_mutator\("([^"]+)"\)', path.read_text(), re.MULTILINE)}


def test_the_source_scan_finds_the_builtins() -> None:
    assert len(SOURCE) >= 17 and SOURCE["identity"] == "evoharness.search.mutators.edits"
    assert SOURCE["teacher_gap_rewriter"] == "evoharness.search.mutators.llm"


def test_every_decorated_mutator_is_a_builtin_of_its_module() -> None:
    assert MUTATORS.builtins == SOURCE
    assert set(known_mutators()) >= set(SOURCE)


@pytest.mark.parametrize("name", sorted(SOURCE))
def test_each_builtin_resolves_to_the_factory_its_module_decorated(name: str) -> None:
    factory = MUTATORS.get(name)
    assert (factory.__module__, factory.__name__) == (SOURCE[name], name)


@pytest.mark.parametrize("name", ["nope", "Identity", "llm", "rule-miner"])
def test_an_unknown_mutator_is_a_one_line_error(name: str) -> None:
    with pytest.raises(KeyError) as info:
        make_mutator(name)
    message = info.value.args[0]
    assert "\n" not in message and message.startswith(f"unknown mutator {name!r}; known: ")
    assert all(repr(known) in message for known in SOURCE)
    assert "register one with @register_mutator" in message and "'evoharness.mutators'" in message


def test_listing_or_making_an_offline_mutator_does_not_import_the_llm_mutators() -> None:
    probe = ("import sys; from evoharness.search.mutators.base import known_mutators, make_mutator; n = len(known_mutators()); "
             "make_mutator('identity'); print(n, 'evoharness.search.mutators.edits' in sys.modules, "
             "'evoharness.search.mutators.llm' in sys.modules, "
             "'evoharness.compiler.runtime.models' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(len(SOURCE)), "True", "False", "False"]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> NamedRegistry[Any]:
    """The mutator registry as a process starts with it, so that a test's registrations and entry
    points do not outlive the test."""
    registry: NamedRegistry[Any] = NamedRegistry("mutator", builtins=MUTATORS.builtins, decorator="@register_mutator")
    monkeypatch.setattr(base, "MUTATORS", registry)
    return registry


class Noop:
    name = "noop"

    def __init__(self, **params: Any) -> None:
        self.params = params

    def propose(self, ctx: Any, *, rng: Any) -> list[Any]:
        return []


def test_register_mutator_adds_one_make_mutator_builds(fresh: NamedRegistry[Any]) -> None:
    assert "noop" not in known_mutators()
    register_mutator("noop")(Noop)
    assert "noop" in known_mutators() and set(known_mutators()) >= set(SOURCE)
    made = make_mutator("noop", level=3)
    assert isinstance(made, Noop) and made.params == {"level": 3}


def test_an_installed_distribution_adds_a_mutator_by_entry_point(fresh: NamedRegistry[Any], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"evo_fake_mutators_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "from evoharness.search.mutators.base import register_mutator\n"
        "from tests.search.mutators.test_registry import Noop\n"
        "register_mutator('plugin_noop')(Noop)\n")
    info = tmp_path / "evo_fake_mutators-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evo-fake-mutators\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[evoharness.mutators]\nplugin_noop = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "plugin_noop" in known_mutators() and module not in sys.modules
    assert isinstance(make_mutator("plugin_noop"), Noop)
    sys.modules.pop(module, None)

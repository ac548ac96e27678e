"""NamedRegistry: decorator, lazy built-ins (attribute or registering module), entry points, errors."""
from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.catalog import CATALOGS
from evoharness.compiler.plugins import NamedRegistry
from evoharness.compiler.runtime.llm import MODEL_PROVIDERS
from evoharness.compiler.runtime.workload import WORKLOADS


@dataclass
class Fake:
    registry: NamedRegistry[Any]
    modules: dict[str, str]  # role -> the module's (unique) name

    def imported(self) -> set[str]:
        return {role for role, module in self.modules.items() if module in sys.modules}


def write_dist(root: Path, group: str, entry_points: dict[str, str]) -> None:
    """An installed distribution as importlib.metadata finds it on sys.path: a .dist-info folder."""
    info = root / f"evo_fake_{uuid.uuid4().hex[:8]}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {info.name.split('-')[0]}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    """A registry with one entry of each origin, its modules on disk and not yet imported."""
    tag = uuid.uuid4().hex[:8]  # unique module and group names: sys.modules outlives the test
    modules = {role: f"evo_fake_{role}_{tag}" for role in ("holder", "attr", "registering", "ep_attr", "ep_registering")}
    group = f"evoharness.fakes_{tag}"
    sources = {
        "holder": (f"from evoharness.compiler.plugins import NamedRegistry\n"
                   f"REG = NamedRegistry('fake', builtins={{'attr': '{modules['attr']}:VALUE', 'nested': '{modules['attr']}:Holder.value',"
                   f" 'registering': '{modules['registering']}', 'sibling': '{modules['registering']}'}},"
                   f" decorator='@register_fake', group='{group}')\n"),
        "attr": "VALUE = 'from attribute'\nclass Holder:\n    value = 'from nested attribute'\n",
        "registering": (f"from {modules['holder']} import REG\n"
                        "REG.register('registering')('from registering module')\n"
                        "REG.register('sibling')('sibling from registering module')\n"),
        "ep_attr": "VALUE = 'from entry point attribute'\n",
        "ep_registering": f"from {modules['holder']} import REG\nREG.register('ep_registering')('from entry point module')\n",
    }
    for role, source in sources.items():
        (tmp_path / f"{modules[role]}.py").write_text(source)
    write_dist(tmp_path, group, {"ep_attr": f"{modules['ep_attr']}:VALUE", "ep_registering": modules["ep_registering"],
                                 "attr": f"{modules['ep_attr']}:VALUE"})  # a built-in's name: the built-in wins
    monkeypatch.syspath_prepend(str(tmp_path))
    holder = __import__(modules["holder"])
    holder.REG.register("decorated")("from decorator")
    yield Fake(holder.REG, {k: v for k, v in modules.items() if k != "holder"})
    for module in modules.values():
        sys.modules.pop(module, None)


@pytest.mark.parametrize("name, expected, imports", [
    ("decorated", "from decorator", set()),
    ("attr", "from attribute", {"attr"}),
    ("nested", "from nested attribute", {"attr"}),
    ("registering", "from registering module", {"registering"}),
    ("sibling", "sibling from registering module", {"registering"}),
    ("ep_attr", "from entry point attribute", {"ep_attr"}),
    ("ep_registering", "from entry point module", {"ep_registering"}),
])
def test_get_imports_only_the_module_of_the_entry(fake: Fake, name: str, expected: str, imports: set[str]) -> None:
    assert fake.imported() == set()
    assert fake.registry.get(name) == expected
    assert fake.imported() == imports
    assert fake.registry.get(name) == expected  # a second lookup answers from the entries


def test_names_lists_every_origin_without_importing(fake: Fake) -> None:
    assert fake.registry.names() == ["attr", "decorated", "ep_attr", "ep_registering", "nested", "registering", "sibling"]
    assert "ep_registering" in fake.registry and "nope" not in fake.registry
    assert fake.imported() == set()


@pytest.mark.parametrize("name", ["nope", "Attr", "", "ep attr"])
def test_unknown_name_is_a_one_line_error_naming_the_known_and_how_to_add(fake: Fake, name: str) -> None:
    with pytest.raises(KeyError) as info:
        fake.registry.get(name)
    message = info.value.args[0]
    assert "\n" not in message
    assert message.startswith(f"unknown fake {name!r}; known: ")
    assert all(repr(known) in message for known in fake.registry.names())
    assert "@register_fake" in message and fake.registry.group in message
    assert fake.imported() == set()


def test_entry_points_are_read_once_and_only_for_a_name_not_found_otherwise(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str | None] = []
    real = metadata.entry_points

    def counting(**kwargs: Any) -> Any:
        reads.append(kwargs.get("group"))
        return real(**kwargs)

    monkeypatch.setattr(metadata, "entry_points", counting)
    assert fake.registry.get("attr") == "from attribute" and fake.registry.get("decorated") == "from decorator"
    assert reads == []
    assert fake.registry.get("ep_attr") == "from entry point attribute"
    with pytest.raises(KeyError):
        fake.registry.get("nope")
    assert reads == [fake.registry.group]


def test_an_entry_registered_before_its_builtin_module_is_imported_keeps_the_users_entry(fake: Fake) -> None:
    fake.registry.register("sibling")("user's sibling")
    assert fake.registry.get("registering") == "from registering module"  # imports the module that also registers sibling
    assert fake.registry.get("sibling") == "user's sibling"


def test_a_builtin_module_that_does_not_register_its_name_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"evo_fake_empty_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: NamedRegistry[Any] = NamedRegistry("fake", builtins={"ghost": module}, decorator="@register_fake")
    with pytest.raises(ImportError, match=f"'ghost': importing {module} did not register it with @register_fake"):
        registry.get("ghost")
    sys.modules.pop(module, None)


@pytest.mark.parametrize("registry, group, builtin", [
    (WORKLOADS, "evoharness.workloads", "bfcl"),
    (CATALOGS, "evoharness.tool_catalogs", "bfcl"),
    (MODEL_PROVIDERS, "evoharness.model_providers", "sim"),
])
def test_each_extension_point_has_its_entry_point_group(registry: NamedRegistry[Any], group: str, builtin: str) -> None:
    assert registry.group == group
    assert builtin in registry.builtins and builtin in registry.names()


def test_an_entry_point_whose_module_is_gone_is_one_line_naming_it() -> None:
    from evoharness.compiler.errors import ConfigError

    reg: NamedRegistry[object] = NamedRegistry("workload", builtins={}, decorator="@register_workload")
    reg._plugins = {"ghost": "no_such_module_for_evoharness:thing"}  # what an uninstalled package leaves in metadata
    with pytest.raises(ConfigError) as err:
        reg.lookup("ghost", path="workload.name")
    message = str(err.value)
    assert message.startswith("workload.name: workload 'ghost' (entry point in group 'evoharness.workloads' "
                              "'no_such_module_for_evoharness:thing') cannot be imported: ModuleNotFoundError")
    assert "\n" not in message and "Fix: reinstall or uninstall" in message


def test_builtins_are_this_distributions_own_entry_points_and_a_plugin_cannot_take_their_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tag = uuid.uuid4().hex[:8]
    (tmp_path / f"evo_fake_impostor_{tag}.py").write_text("def make(**_):\n    return 'impostor'\n")
    write_dist(tmp_path, "evoharness.workloads", {"bfcl": f"evo_fake_impostor_{tag}:make", f"extra_{tag}": f"evo_fake_impostor_{tag}:make"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh: NamedRegistry[Any] = NamedRegistry("workload", decorator="@register_workload")  # reads the installed metadata
    assert fresh.builtins["bfcl"] == "evoharness.compiler.workloads.bfcl.workload:BfclWorkload"
    assert fresh.builtins["tasks"] == "evoharness.compiler.workloads.tasks.workload:tasks_workload"
    assert f"extra_{tag}" not in fresh.builtins and fresh.plugins()[f"extra_{tag}"] == f"evo_fake_impostor_{tag}:make"
    assert fresh.get(f"extra_{tag}")() == "impostor"
    assert fresh.get("bfcl").__name__ == "BfclWorkload"  # the built-in, not the other distribution's entry of that name

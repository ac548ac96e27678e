"""`promote` moves a slot only to a snapshot the next compile can release: the snapshot is merged
into the release config and compiled before the slot moves. One that does not fit the schema, does
not compile or names a path as its component is refused in one line naming the field, and the
slot, the registry's files and its history stay as they were."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evoharness.compiler.release.registry import Registry
from evoharness.compiler.release.snapshot import Snapshot, definition_hash, make_snapshot
from evoharness.conf import CONF_DIR
from evoharness.search.cli.registry import promote_main


def base_definition() -> dict[str, Any]:
    agent = yaml.safe_load((Path(CONF_DIR) / "agent" / "bfcl_agent.yaml").read_text(encoding="utf-8"))
    agent.pop("defaults", None)
    return {"agent": agent, "tool_overrides": {}, "model": {"route": "sim/small", "temperature": 0.0}}


def written(tmp: Path, name: str, definition: dict[str, Any], component: str = "bfcl_agent") -> tuple[Path, str]:
    """A snapshot file as anyone can write one: hashed, but not built through make_snapshot's checks."""
    digest = definition_hash(component, "agent", definition)
    snapshot = Snapshot(component=component, content_hash=digest, author="manual", created_at="2026-01-01T00:00:00Z",
                        definition=definition, provenance={"claim": {"verdict": "win"}})
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(snapshot.to_dict(), indent=2), encoding="utf-8")
    return path, digest


def unreleasable(kind: str) -> tuple[dict[str, Any], str]:
    d = base_definition()
    if kind == "tools":
        d["agent"]["tools"] = "*"
        return d, "bfcl_agent"
    if kind == "temperature":
        d["model"]["temperature"] = "hot"
        return d, "bfcl_agent"
    d["agent"]["name"] = "../../x"
    return d, "../../x"


@pytest.fixture()
def registry(tmp_path: Path) -> Registry:
    """A registry whose default slot already ships a good snapshot."""
    reg = Registry(tmp_path / "registry")
    reg.promote(reg.write_snapshot(make_snapshot("bfcl_agent", base_definition(), author="baseline")))
    return reg


def state(reg: Registry) -> tuple[bytes, list[str]]:
    return reg.promotions_path.read_bytes(), sorted(p.name for p in reg.snapshot_dir.iterdir())


@pytest.mark.parametrize("kind, field", [("tools", "agent.tools: Invalid value assigned"),
                                         ("temperature", "model.temperature: Value 'hot' of type 'str' could not be converted"),
                                         ("component", "its component '../../x' is not a plain name")])
@pytest.mark.parametrize("flags", [[], ["--force"], ["--class", "fast"]], ids=["plain", "force", "other-slot"])
def test_an_unreleasable_snapshot_is_refused_and_the_slot_does_not_move(tmp_path: Path, registry: Registry,
                                                                       capsys: pytest.CaptureFixture[str], kind: str, field: str,
                                                                       flags: list[str]) -> None:
    definition, component = unreleasable(kind)
    path, digest = written(tmp_path, kind, definition, component)
    shipped, before = registry.promoted("bfcl_agent"), state(registry)
    assert promote_main([str(path), "--registry", str(registry.root), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: snapshot {digest[:12]} cannot be released: ") and err.count("\n") == 1, err
    assert field in err
    assert state(registry) == before  # the slot file did not move, and the snapshot was not stored
    assert registry.promoted("bfcl_agent") == shipped and registry.history("bfcl_agent", "fast") == ()


def test_a_tool_override_compile_would_refuse_is_refused_unless_the_release_config_has_the_tool(
        tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]) -> None:
    d = base_definition()
    d["tool_overrides"] = {"zap": {"rules": ["zap only what the user names"]}}
    path, digest = written(tmp_path, "zap", d)
    before = state(registry)
    assert promote_main([str(path), "--registry", str(registry.root)]) == 2
    err = capsys.readouterr().err
    assert f"snapshot {digest[:12]} cannot be released: tool.overrides.zap: overrides a tool that is not in the catalog" in err
    assert state(registry) == before
    # the overrides the release is compiled with, given after the ref, are the config it is checked against
    added = "+tool.definitions.zap={description: Zap a file.}"
    assert promote_main([str(path), "--registry", str(registry.root), added]) == 0, capsys.readouterr().err
    assert registry.promoted("bfcl_agent").content_hash == digest


def test_a_releasable_snapshot_is_promoted(tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]) -> None:
    d = base_definition()
    d["agent"]["tool_format"] = "bash"
    path, digest = written(tmp_path, "bash", d)
    assert promote_main([str(path), "--registry", str(registry.root), "--class", "fast"]) == 0
    assert capsys.readouterr().out.startswith(f"promoted: slot fast of bfcl_agent is snapshot {digest[:12]} ")


def test_a_bad_release_override_is_one_line(tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = written(tmp_path, "ok", base_definition())
    before = state(registry)
    assert promote_main([str(path), "--registry", str(registry.root), "tool=nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not compose: tool=nope: no such option in config group 'tool'" in err
    assert promote_main([str(path), "--registry", str(registry.root), "--nope"]) == 2
    assert "unrecognized arguments: --nope" in capsys.readouterr().err
    assert state(registry) == before


def test_the_registry_refuses_a_component_that_names_a_path() -> None:
    from evoharness.compiler.release.snapshot import RegistryError

    definition, component = unreleasable("component")
    with pytest.raises(RegistryError, match="is not a plain name"):
        make_snapshot(component, definition, author="manual")

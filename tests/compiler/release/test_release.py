"""Release merge: a promoted snapshot compiles to exactly the variant it was written from."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from evoharness.compiler.config_compile import compile_config, to_plain
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.release.merge import apply_promoted, promoted_for, snapshot_from_config
from evoharness.compiler.release.registry import Registry
from evoharness.compiler.release.snapshot import make_snapshot
from evoharness.compiler.schema import register_configs
from evoharness.compiler.variant import compile_agent

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def compose(tmp_path: Path) -> Iterator[Any]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "evoharness" / "conf"), version_base="1.3"):
        yield lambda *overrides: hydra_compose(config_name="config", overrides=[f"registry_dir={tmp_path}", *overrides])
    GlobalHydra.instance().clear()


def mutated(cfg: DictConfig) -> dict[str, Any]:
    """A definition that differs from the base in every released part."""
    agent = to_plain(cfg.agent)
    agent["tool_format"] = "bash"
    agent["prompt_sections"].pop("style")
    agent["prompt_sections"]["checks"] = "Re-read every path before you call {{ tool_names | length }} tools."
    agent["workflow"][2]["enabled"] = True
    model = {**to_plain(cfg.model), "route": "sim/medium", "temperature": 0.3}
    overrides = {"cd": {"rules": ["pass folder as a bare name, never a path"], "description_append": "Relative names only."}}
    return {"agent": agent, "tool_overrides": overrides, "model": model}


def built_variant_hash(cfg: DictConfig, definition: dict[str, Any]) -> str:
    tool = {**to_plain(cfg.tool), "overrides": definition["tool_overrides"]}
    return compile_agent(definition["agent"], tool=tool, model=definition["model"]).content_hash


def promote_definition(cfg: DictConfig, definition: dict[str, Any], slot: str = "default", author: str = "rule_miner") -> str:
    variant_hash = built_variant_hash(cfg, definition)
    reg = Registry(str(cfg.registry_dir))
    snapshot = make_snapshot("bfcl_agent", definition, author=author, provenance={"variant_hash": variant_hash})
    reg.write_snapshot(snapshot)
    reg.promote(snapshot.content_hash, slot=slot)
    return variant_hash


def test_nothing_promoted_or_release_off_leaves_the_config_alone(compose: Any, tmp_path: Path) -> None:
    cfg = compose()
    assert apply_promoted(cfg) is cfg and promoted_for(cfg) is None
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "reading the release must not create the registry"
    promote_definition(cfg, mutated(cfg))
    off = compose("release_slot=null")
    assert apply_promoted(off) is off
    assert apply_promoted(compose("release_slot=fast")).agent.tool_format == "json"


def test_promote_then_compile_gives_exactly_the_snapshot_variant(compose: Any) -> None:
    cfg = compose()
    base_hash = compile_config(cfg).content_hash
    before = OmegaConf.to_container(cfg)
    expected = promote_definition(cfg, mutated(cfg))
    released = apply_promoted(cfg)
    assert compile_config(released).content_hash == expected != base_hash
    assert OmegaConf.to_container(cfg) == before, "apply_promoted must not mutate its input"
    assert released.model.route == "sim/medium" and "style" not in released.agent.prompt_sections
    assert (compile_config(apply_promoted(cfg)).content_hash
            == Registry(str(cfg.registry_dir)).promoted("bfcl_agent").provenance["variant_hash"])  # type: ignore[union-attr]


def test_a_partial_definition_fills_schema_defaults_the_same_way(compose: Any) -> None:
    cfg = compose()
    definition = {
        "agent": {"name": "bfcl_agent", "prompt_sections": {"role": "You call tools."}, "tools": ["cd", "ls"]},
        "tool_overrides": {},
        "model": {"route": "sim/large"},
    }
    base_hash = compile_config(cfg).content_hash
    expected = promote_definition(cfg, definition)
    assert compile_config(apply_promoted(cfg)).content_hash == expected != base_hash


def test_slots_are_released_independently(compose: Any) -> None:
    cfg = compose()
    fast = copy.deepcopy(mutated(cfg))
    fast["model"]["route"] = "sim/small"
    default_hash = promote_definition(cfg, mutated(cfg))
    fast_hash = promote_definition(cfg, fast, slot="fast")
    assert default_hash != fast_hash
    assert compile_config(apply_promoted(compose())).content_hash == default_hash
    assert compile_config(apply_promoted(compose("release_slot=fast"))).content_hash == fast_hash


def test_tampered_promoted_snapshot_is_an_error_not_a_fallback(compose: Any) -> None:
    cfg = compose()
    promote_definition(cfg, mutated(cfg))
    reg = Registry(str(cfg.registry_dir))
    path = reg.path_of(reg.history("bfcl_agent")[-1].hash)
    data = json.loads(path.read_text())
    data["definition"]["model"]["route"] = "openai/gpt-4o"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"^release_slot=default: snapshot [0-9a-f]{64} was modified after it was written "
                                          r".* Fix: .*release_slot=null"):
        apply_promoted(cfg)


def test_definition_that_does_not_fit_the_schema_is_a_config_error(compose: Any) -> None:
    cfg = compose()
    definition = mutated(cfg)
    definition["agent"]["colour"] = "red"
    reg = Registry(str(cfg.registry_dir))
    reg.promote(reg.write_snapshot(make_snapshot("bfcl_agent", definition, author="manual")))
    with pytest.raises(ConfigError, match="release_slot=default: promoted snapshot [0-9a-f]{12} does not fit the config schema.*colour"):
        apply_promoted(cfg)


def test_command_line_overrides_win_over_the_release(compose: Any) -> None:
    promote_definition(compose(), mutated(compose()))
    argv = ["agent.max_turns=5", "+agent.vars.team=ops", "+tool.overrides.ls={rules: [list first]}", "model.temperature=0.9",
            "workload.limit=3"]
    cfg = compose(*argv)
    released = apply_promoted(cfg, argv)
    assert released.agent.max_turns == 5 and released.agent.vars.team == "ops" and released.agent.tool_format == "bash"
    assert released.model.temperature == 0.9 and released.model.route == "sim/medium"
    assert set(released.tool.overrides) == {"cd", "ls"} and list(released.tool.overrides.ls.rules) == ["list first"]
    chosen = compose("model=sim_large")
    released = apply_promoted(chosen, ["model=sim_large"])
    assert released.model.route == "sim/large" and released.agent.tool_format == "bash"
    dropped = apply_promoted(compose("~agent.prompt_sections.policy"), ["~agent.prompt_sections.policy"])
    assert "policy" not in dropped.agent.prompt_sections and "checks" in dropped.agent.prompt_sections


def test_snapshot_from_config_round_trips_through_the_release(compose: Any) -> None:
    candidate = compose("agent.tool_format=both", "model=sim_medium", "+tool.overrides.ls.rules=[use -a for hidden files]")
    snapshot = snapshot_from_config(candidate, author="tool_format", metrics={"dev": {"pass_rate": 0.5}},
                                    provenance={"study": "s", "trial": 4})
    assert snapshot.component == "bfcl_agent" and snapshot.author == "tool_format"
    assert snapshot.provenance["variant_hash"] == compile_config(candidate).content_hash
    assert {"config_hash", "git_revision", "study", "trial"} <= set(snapshot.provenance)
    assert snapshot_from_config(candidate, author="again").content_hash == snapshot.content_hash
    reg = Registry(str(candidate.registry_dir))
    reg.promote(reg.write_snapshot(snapshot))
    assert compile_config(apply_promoted(compose())).content_hash == snapshot.provenance["variant_hash"]


def test_snapshot_command_then_promote_cli_then_release(tmp_path: Path) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    snapshot_cmd = (
        "import sys; from evoharness.compiler.hydra_run import run_hydra; "
        "from evoharness.search.cli.registry import snapshot_task, snapshot_validate;"
        "sys.exit(run_hydra('snapshot', sys.argv[1:], snapshot_task, snapshot_validate))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", snapshot_cmd, f"runs_dir={tmp_path}", "agent.tool_format=bash"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    digest = proc.stdout.split()[-2]
    promote_cmd = "import sys; from evoharness.search.cli.registry import promote_main; sys.exit(promote_main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", promote_cmd, digest[:8], "--registry", str(tmp_path / "registry")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"promoted: slot default of bfcl_agent is snapshot {digest[:12]} (variant ")
    assert proc.stdout.rstrip().endswith("; the next `evoharness compile` ships it")
    snapshot = Registry(tmp_path / "registry").load(digest)
    assert snapshot.definition["agent"]["tool_format"] == "bash" and snapshot.provenance["overrides"][-1] == "agent.tool_format=bash"

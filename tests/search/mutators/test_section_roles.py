"""Mutators find a prompt section by the role it declares (rules, style, identity), not by a name
they assume: an agent whose sections are called anything gets the same edits."""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.search.genome import Genome, initial_pools
from evoharness.search.mutators.base import MutationContext, Proposal, make_mutator
from tests.search.mutators.test_mutators import Record, ev, fixture_ctx


def renamed(roles: dict[str, str] | None) -> MutationContext:
    """The fixture's agent with its sections renamed (policy -> house_rules, style -> voice, role -> persona)."""
    ctx, _ = fixture_ctx()
    names = {"policy": "house_rules", "style": "voice", "role": "persona"}
    agent: dict[str, Any] = {**ctx.agent, "prompt_sections": {names.get(k, k): v for k, v in ctx.agent["prompt_sections"].items()}}
    if roles is not None:
        agent["section_roles"] = roles
    pools = initial_pools(agent, models=["sim_medium"], temperatures=[0.0], base_model="base", base_temperature=0.0)
    evidence = (ev("files/1", Record("wrong_value", "mv", "destination", "x", "y", 0)),
                ev("files/2", Record("wrong_value", "mv", "destination", "x", "z", 0)))
    return replace(ctx, agent=agent, pools=pools, front=(Genome(),), evidence=evidence)


def sections_edited(ctx: MutationContext, name: str, **params: Any) -> set[str]:
    out = make_mutator(name, **params).propose(ctx, rng=random.Random(0))
    return {p.key for p in out if isinstance(p, Proposal) and p.kind == "section" and p.key}


ROLES = {"house_rules": "rules", "voice": "style", "persona": "identity"}


@pytest.mark.parametrize("mutator, params, role_section", [
    ("rule_miner", {"targets": "section"}, "house_rules"),
    ("prompt_prefix", {}, "house_rules"),
    ("prompt_suffix", {}, "voice"),
])
def test_mutators_edit_the_section_of_their_role(mutator: str, params: dict[str, Any], role_section: str) -> None:
    assert sections_edited(renamed(ROLES), mutator, **params) == {role_section}
    # undeclared, the unfamiliar names imply no role: nothing is edited rather than a wrong section
    assert sections_edited(renamed(None), mutator, **params) == set()


def test_an_explicit_section_still_wins() -> None:
    assert sections_edited(renamed(ROLES), "prompt_suffix", section="persona") == {"persona"}


def test_bad_roles_are_a_config_error() -> None:
    from hydra import compose, initialize_config_dir

    from evoharness.compiler.config_compile import compile_config
    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR

    register_configs()
    for override, expected in [("+agent.section_roles.nope=rules", "agent.section_roles.nope: names no prompt section"),
                               ("+agent.section_roles.policy=law", "agent.section_roles.policy: unknown role 'law'")]:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(config_name="config", overrides=[override])
        with pytest.raises(ConfigError, match=expected):
            compile_config(cfg)

"""The genome-to-variant mapping is pure: table tests against the compiler."""
from __future__ import annotations

from typing import Any

import pytest

from evoharness.compiler.variant import compile_agent
from evoharness.search.genome import BASELINE, Genome, PoolEntry, Pools, genome_to_config, initial_pools
from evoharness.search.genome_edits import authors, describe
from evoharness.search.genome_params import genome_to_params, param_space, params_to_genome
from evoharness.search.pool_growth import with_pool_entry
from tests.compiler.fixtures import configs

MODELS = {"base": {"route": "sim/small", "temperature": 0.0}, "sim_large": {"route": "sim/large", "temperature": 0.0}}


def pools() -> tuple[dict[str, Any], dict[str, Any], Pools]:
    agent, tool, _ = configs()
    agent["workflow"][2]["enabled"] = False  # verify: optional and off in the baseline
    p = initial_pools(agent, models=["sim_large"], temperatures=[0.0, 0.7], base_model="base", base_temperature=0.0)
    p, _ = with_pool_entry(p, "section", "style", PoolEntry("Be concise. Name the tool you used.", "prompt_suffix"))
    p, _ = with_pool_entry(p, "tool", "mv", PoolEntry({"rules": ["copy destination exactly"]}, "rule_miner"))
    p, _ = with_pool_entry(p, "step", "double_check", PoolEntry({"name": "double_check", "instructions": "Check twice.", "after": ["act"],
                                                                 "trigger": "before_final"}, "workflow_step_append"))
    p, _ = with_pool_entry(p, "toolset", None, PoolEntry(["ls", "mv"], "tool_detach"))
    return agent, tool, p


def variant(g: Genome) -> Any:
    agent, tool, p = pools()
    a, t, m = genome_to_config(g, p, agent=agent, tool=tool, models=MODELS)
    return compile_agent(a, tool=t, model=m)


def test_baseline_genome_is_the_base_config() -> None:
    agent, tool, _ = pools()
    base = compile_agent(agent, tool=tool, model=MODELS["base"])
    assert variant(BASELINE).content_hash == base.content_hash


TABLE: list[tuple[str, Genome, Any]] = [
    ("section", Genome(sections={"style": 1}), lambda v: "Name the tool you used." in v.system_prompt),
    ("tool rule", Genome(tools={"mv": 1}), lambda v: "- mv: copy destination exactly" in v.system_prompt),
    ("optional step on", Genome(steps={"verify": True}), lambda v: [s.name for s in v.workflow].count("verify") == 1),
    ("appended step on", Genome(steps={"double_check": True}), lambda v: v.step_messages("before_final")[0][0] == "double_check"),
    ("toolset", Genome(toolset=1), lambda v: [t.name for t in v.tools] == ["ls", "mv"]),
    ("format", Genome(tool_format="bash"), lambda v: v.tool_format == "bash" and "### mv" in v.system_prompt),
    ("model", Genome(model=1), lambda v: v.model.route == "sim/large"),
    ("temperature", Genome(temperature=1), lambda v: v.model.temperature == 0.7),
]


@pytest.mark.parametrize("name,genome,check", TABLE, ids=[t[0] for t in TABLE])
def test_each_gene_reaches_the_variant(name: str, genome: Genome, check: Any) -> None:
    v = variant(genome)
    assert check(v), name
    assert v.content_hash != variant(BASELINE).content_hash


def test_appended_step_stays_off_in_the_baseline() -> None:
    v = variant(BASELINE)
    assert "double_check" not in [s.name for s in v.workflow] and "verify" not in [s.name for s in v.workflow]


@pytest.mark.parametrize(
    "genome,needle",
    [
        (Genome(sections={"style": 5}), "outside its pool"),
        (Genome(sections={"nope": 1}), "has no pool"),
        (Genome(model=9), "outside its pool"),
        (Genome(steps={"act": False}), "not optional"),
        (Genome(tool_format="xml"), "tool_format"),
    ],
)
def test_invalid_genomes_raise_naming_the_gene(genome: Genome, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        variant(genome)


def test_params_round_trip_and_space() -> None:
    agent, _, p = pools()
    space = param_space(p)
    assert space["section.style"] == (0, 1) and "section.role" not in space  # single-entry pools are not searched
    assert space["step.verify"] == (False, True) and space["model"] == (0, 1) and space["tool_format"] == ("json", "bash", "both")
    g = Genome(sections={"style": 1}, tools={"mv": 1}, steps={"verify": True, "double_check": False}, toolset=1, tool_format="both",
               model=1, temperature=1)
    params = genome_to_params(g, p, base_format="json", base_steps={"verify": False})
    assert set(params) == set(space)
    assert params_to_genome(params) == g
    assert variant(params_to_genome(params)).content_hash == variant(g).content_hash


def test_pools_are_append_only_and_deduplicated() -> None:
    _, _, p = pools()
    same, added = with_pool_entry(p, "section", "style", PoolEntry("Be concise. Name the tool you used.", "other"))
    assert not added and same is p
    again, added = with_pool_entry(p, "step", "double_check", PoolEntry({"name": "double_check", "instructions": "changed"}, "x"))
    assert not added and again.steps["double_check"].value["instructions"] == "Check twice."
    assert Pools.from_dict(p.to_dict()) == p


def test_authors_and_description_name_the_mutators() -> None:
    _, _, p = pools()
    g = Genome(sections={"style": 1}, tools={"mv": 1}, model=1, steps={"double_check": True})
    assert authors(g, p) == ("prompt_suffix", "rule_miner", "workflow_step_append")
    text = describe(g, p, base_format="json", base_steps={"verify": False})
    assert "model=sim_large" in text and "tool mv#1 (rule_miner)" in text and "+step double_check (workflow_step_append)" in text
    assert describe(BASELINE, p, base_format="json", base_steps={}) == "baseline"


def test_a_required_step_made_switchable_stays_on_in_the_baseline() -> None:
    agent, tool, p = pools()
    p, _ = with_pool_entry(p, "step", "act", PoolEntry({"name": "act", "instructions": "Call the tools in order.", "after": ["plan"],
                                                        "optional": True}, "workflow_step_remove"))
    base_steps = {s["name"]: bool(s.get("enabled", True)) for s in agent["workflow"]}
    params = genome_to_params(BASELINE, p, base_format="json", base_steps=base_steps)
    assert params["step.act"] is True
    g = params_to_genome(params)
    a, t, m = genome_to_config(g, p, agent=agent, tool=tool, models=MODELS)
    assert compile_agent(a, tool=t, model=m).content_hash == variant(BASELINE).content_hash
    names = [s["name"] for s in agent["workflow"]]
    assert authors(g, p, names) == ()  # switched to its base state: nobody's edit
    assert authors(Genome(steps={"act": False}), p, names) == ("workflow_step_remove",)
    assert "-step act" in describe(Genome(steps={"act": False}), p, base_format="json", base_steps=base_steps)

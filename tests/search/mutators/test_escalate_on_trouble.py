"""escalate_on_trouble: an escalation proposed from the anchor's own troubled episodes, as a genome
slot that compiles into the variant's escalation (the target model's config looked up by name)."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from evoharness.compiler.runtime.workload import Failure
from evoharness.compiler.variant import compile_agent
from evoharness.search.genome import Genome, PoolEntry, Pools, genome_to_config, initial_pools
from evoharness.search.genome_edits import describe
from evoharness.search.genome_params import genome_to_params, param_space, params_to_genome
from evoharness.search.mutators.base import FailedEpisode, MutationContext, make_mutator
from evoharness.search.optimise.mutation import support
from evoharness.search.pool_growth import live_len, retire_one, with_pool_entry
from evoharness.testing.mutation_case import DESK_AGENT, order_desk_case

CHEAP = Genome(model=1)  # the order desk's pools: model 0 is the incumbent's ("base"), 1 is sim_large


def episode(task: str, genome: Genome, *, error: bool = False, spent: bool = False) -> FailedEpisode:
    failures = [Failure("wrong_value", "refund", "amount", 1.0, 2.0, 0)]
    if spent:
        failures.append(Failure("non_termination", turn=0))
    return FailedEpisode(task_id=task, tool_errors=("refund: the amount is above the order total",) if error else (),
                         failures=tuple(failures), genome=genome)


def context(evidence: list[FailedEpisode], *, front: tuple[Genome, ...] = (CHEAP,), agent: dict | None = None) -> MutationContext:
    case = order_desk_case()
    pools = case.context.pools
    if agent is not None:
        pools = initial_pools(agent, models=["sim_large"], temperatures=[0.0], base_model="base", base_temperature=0.0)
    # no prices unless a test gives them: the target is then the incumbent's model
    return replace(case.context, agent=agent or case.context.agent, pools=pools, front=front, evidence=tuple(evidence), prices={})


def propose(ctx: MutationContext, **params: object) -> list:
    return list(make_mutator("escalate_on_trouble", **params).propose(ctx, rng=random.Random(0)))


def without_review() -> dict:
    agent = {**DESK_AGENT, "workflow": [s for s in DESK_AGENT["workflow"] if s["name"] != "confirm"]}
    return agent


def test_tool_errors_of_a_cheap_anchor_are_handed_to_the_incumbents_model_with_the_counts_in_the_note() -> None:
    evidence = [episode(f"t/{i}", CHEAP, error=i < 3) for i in range(5)]
    made = propose(context(evidence, agent=without_review()))
    assert [p.entry.value for p in made] == [{"model": "base", "on": ["tool_error"], "from": "sim_large"}]
    assert made[0].kind == "escalation" and made[0].key is None and made[0].entry.author == "escalate_on_trouble"
    assert "3 of its 5 failed train episodes failed after a tool error" in made[0].entry.note
    # below min_episodes: nothing; the same records without errors: nothing
    assert propose(context(evidence, agent=without_review()), min_episodes=4) == []
    assert propose(context([episode(f"t/{i}", CHEAP) for i in range(5)], agent=without_review())) == []


def test_several_triggers_give_all_of_them_and_the_most_frequent_alone() -> None:
    evidence = [episode(f"t/{i}", CHEAP, error=i < 4, spent=i >= 3) for i in range(6)]
    made = propose(context(evidence, agent=without_review()))
    assert [p.entry.value["on"] for p in made] == [["tool_error", "max_turns"], ["tool_error"]]
    assert "3 of its 6 failed train episodes ran out of model calls" in made[0].entry.note


def test_review_is_a_trigger_only_for_an_anchor_that_sends_a_check_before_its_final_answer() -> None:
    evidence = [episode(f"t/{i}", CHEAP) for i in range(3)]
    assert propose(context(evidence, agent=without_review())) == []
    made = propose(context(evidence))  # the order desk's optional "confirm" step is a before_final check, on by default
    assert [p.entry.value for p in made] == [{"model": "base", "on": ["review"], "from": "sim_large"}]
    # a turn that ran out of calls never reached its final check: it is not the review's failure
    spent = [episode(f"s/{i}", CHEAP, spent=True) for i in range(3)]
    assert [p.entry.value["on"] for p in propose(context(spent))] == [["max_turns"]]
    mixed = propose(context(evidence + spent))
    assert [p.entry.value["on"] for p in mixed] == [["max_turns", "review"], ["max_turns"]]  # alone: never review
    assert "3 of its 6 failed train episodes failed although the check before the final answer was sent" in mixed[0].entry.note
    off = replace(CHEAP, steps={"confirm": False})
    assert propose(context([replace(e, genome=off) for e in evidence], front=(off,))) == []


def test_the_anchors_own_episodes_are_read_and_the_target_is_never_its_own_model() -> None:
    other = Genome(model=1, temperature=1)
    evidence = [episode(f"t/{i}", CHEAP, error=True) for i in range(2)] + [episode(f"o/{i}", other) for i in range(9)]
    assert "2 of its 2 failed" in propose(context(evidence, agent=without_review()))[0].entry.note
    # without prices, an anchor on the incumbent's model has nowhere known to be stronger to go
    on_base = [replace(e, genome=Genome()) for e in evidence[:2]]
    assert propose(context(on_base, front=(Genome(),), agent=without_review())) == []
    assert propose(context(evidence, agent=without_review()), to="sim_large") == []  # the anchor runs on it
    with pytest.raises(ValueError, match="params.to='gpt9' is not one of the search's models"):
        propose(context(evidence, agent=without_review()), to="gpt9")


def test_with_prices_the_targets_are_the_dearer_models_cheapest_first() -> None:
    # the order desk's incumbent runs on sim/small; the search's models are priced per input token
    prices = {"base": 1e-7, "sim_large": 3e-6, "sim_medium": 6e-7}
    on_base = [episode(f"t/{i}", Genome(), error=True) for i in range(3)]
    ctx = replace(context(on_base, front=(Genome(),), agent=without_review()), prices=prices)
    assert [p.entry.value["model"] for p in propose(ctx)] == ["sim_medium", "sim_large"]
    assert [p.entry.value["model"] for p in propose(ctx, models=1)] == ["sim_medium"]
    on_large = [replace(e, genome=CHEAP) for e in on_base]  # the dearest model: nothing is stronger by price
    assert propose(replace(context(on_large, agent=without_review()), prices=prices)) == []
    # two models at one price are one target: the first listed
    same = replace(ctx, prices={"base": 1e-7, "sim_large": 3e-6, "sim_medium": 3e-6})
    assert [p.entry.value["model"] for p in propose(same)] == ["sim_large"]
    # a model without a price: the incumbent's is the only target, and an anchor on it has none
    assert propose(replace(ctx, prices={"base": 1e-7, "sim_large": 3e-6})) == []


def test_an_escalation_applies_to_the_model_it_was_made_for_and_never_to_its_own_route() -> None:
    case = order_desk_case()  # pools.models: base (sim/small), sim_large
    value = {"model": "sim_medium", "on": ["tool_error"], "from": "base"}
    pools, _ = with_pool_entry(case.context.pools, "escalation", None, PoolEntry(value, "escalate_on_trouble"))

    def escalation_of(g: Genome) -> object:
        return genome_to_config(g, pools, agent=case.context.agent, tool=case.tool, models=case.models)[0]["escalation"]["model"]

    assert escalation_of(Genome(escalation=1))["route"] == "sim/medium"  # made for base: applies
    assert escalation_of(Genome(model=1, escalation=1)) is None  # recombined with sim_large: a step down, left out
    # and the front says so, rather than describing a handover that is not compiled
    assert describe(Genome(model=1, escalation=1), pools, base_format="json", base_steps={}).endswith(
        "escalation#1 (left out: made for base) (escalate_on_trouble)")
    assert "escalation#1 (to sim_medium on tool_error)" in describe(Genome(escalation=1), pools, base_format="json", base_steps={})
    # the agent's own escalation on a genome whose model is that very route: nothing to hand over
    own = {**case.context.agent, "escalation": {"model": {"route": "sim/large"}, "on": ["tool_error"]}}
    a_own = genome_to_config(Genome(model=1), pools, agent=own, tool=case.tool, models=case.models)[0]
    a_base = genome_to_config(Genome(), pools, agent=own, tool=case.tool, models=case.models)[0]
    assert a_own["escalation"]["model"] is None and a_base["escalation"]["model"]["route"] == "sim/large"
    assert "escalation" not in genome_to_config(Genome(), pools, agent=case.context.agent, tool=case.tool, models=case.models)[0]


def test_support_counts_the_anchors_episodes_the_triggers_answer() -> None:
    evidence = [episode(f"t/{i}", CHEAP, error=i < 3) for i in range(5)]
    ctx = context(evidence, agent=without_review())
    made = propose(ctx)
    assert support(made[0], ctx) == 3


def test_the_slot_compiles_to_the_named_models_config_and_its_hash_moves() -> None:
    case = order_desk_case()
    pools, added = with_pool_entry(case.context.pools, "escalation", None,
                                   PoolEntry({"model": "sim_large", "on": ["tool_error"]}, "escalate_on_trouble", "why"))
    assert added and len(pools.escalations) == 2 and pools.escalations[0].value == {}  # the desk agent has none of its own
    agent, tool, model = genome_to_config(Genome(escalation=1), pools, agent=case.context.agent, tool=case.tool, models=case.models)
    assert agent["escalation"] == {"model": case.models["sim_large"], "on": ["tool_error"]}
    variant = compile_agent(agent, tool=tool, model=model)
    assert variant.escalation is not None and variant.escalation.model.route == "sim/large"
    assert variant.escalation.on == ("tool_error",)
    base = compile_agent(*genome_to_config(Genome(), pools, agent=case.context.agent, tool=case.tool, models=case.models)[:1],
                         tool=tool, model=model)
    assert base.escalation is None and base.content_hash != variant.content_hash
    assert describe(Genome(escalation=1), pools, base_format="json", base_steps={}) == (
        "escalation#1 (to sim_large on tool_error) (escalate_on_trouble)")
    # a genome on the target's own model hands nothing over: it compiles to that model's plain variant
    same, t2, m2 = genome_to_config(Genome(model=1, escalation=1), pools, agent=case.context.agent, tool=case.tool,
                                    models=case.models)
    assert same["escalation"]["model"] is None
    plain = genome_to_config(Genome(model=1), pools, agent=case.context.agent, tool=case.tool, models=case.models)
    assert compile_agent(same, tool=t2, model=m2).content_hash == compile_agent(plain[0], tool=plain[1], model=plain[2]).content_hash
    # an entry naming a model the search has no config for is refused, not compiled to something else
    bad, _ = with_pool_entry(pools, "escalation", None, PoolEntry({"model": "gpt9", "on": ["tool_error"]}, "x"))
    with pytest.raises(ValueError, match="escalation model 'gpt9' has no model config"):
        genome_to_config(Genome(escalation=2), bad, agent=case.context.agent, tool=case.tool, models=case.models)


def test_the_slot_is_an_optuna_parameter_round_trips_and_retires_like_a_policy() -> None:
    case = order_desk_case()
    pools = case.context.pools
    assert "escalation" not in param_space(pools)  # only the baseline's
    for i, on in enumerate((["tool_error"], ["max_turns"], ["review"])):
        pools, _ = with_pool_entry(pools, "escalation", None, PoolEntry({"model": "sim_large", "on": on}, "m", str(i)))
    assert param_space(pools)["escalation"] == (0, 1, 2, 3)
    g = Genome(escalation=2)
    assert params_to_genome(genome_to_params(g, pools, base_format="json", base_steps={})).escalation == 2
    assert Genome.from_dict(g.to_dict()) == g and "escalation" not in Genome().to_dict()
    retired, ok = retire_one(pools, "escalation", None, keep=[1])
    assert ok and retired.escalations[2].retired and live_len(retired, "escalation", None) == 3
    assert param_space(retired)["escalation"] == (0, 1, 3)
    assert Pools.from_dict(retired.to_dict()) == retired


def test_pools_stored_before_the_slot_existed_take_no_escalation_entry() -> None:
    case = order_desk_case()
    old = case.context.pools.to_dict()
    del old["escalations"]
    pools = Pools.from_dict(old)
    grown, added = with_pool_entry(pools, "escalation", None, PoolEntry({"model": "sim_large", "on": ["tool_error"]}, "m"))
    assert not added and grown.escalations == ()  # index 0 must stay the baseline: the entry would have become it

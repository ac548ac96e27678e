"""context_clip: clip lengths proposed from the anchor's measured tool output, as a genome slot of
its own that compiles into the variant's context policy."""
from __future__ import annotations

import copy
import random
from dataclasses import replace

import pytest

from evoharness.compiler.variant import compile_agent
from evoharness.search.genome import Genome, PoolEntry, Pools, genome_to_config
from evoharness.search.genome_params import genome_to_params, param_space, params_to_genome
from evoharness.search.mutators.base import ToolLoad, make_mutator
from evoharness.search.mutators.context import clip_lengths
from evoharness.search.pool_growth import with_pool_entry
from evoharness.testing.mutation_case import order_desk_case

HEAVY = ToolLoad(calls=12, chars=54_000, longest=9_800, episodes=5)


def propose(load: dict[str, ToolLoad], seed: int = 0, **params: object) -> list:
    case = order_desk_case()
    ctx = replace(case.context, load=load)
    return list(make_mutator("context_clip", **params).propose(ctx, rng=random.Random(seed)))


def test_the_heaviest_tools_output_gets_a_clip_below_its_longest_result() -> None:
    made = propose({"find_order": HEAVY, "refund": ToolLoad(3, 240, 90, 5)})
    assert len(made) == 1 and made[0].kind == "context" and made[0].key is None
    limit = made[0].entry.value["tool_result_chars"]["find_order"]
    assert limit in clip_lengths(HEAVY) and limit < HEAVY.longest
    note = made[0].entry.note
    assert "find_order" in note and "54,000" in note and "9,800" in note and "5 train episodes" in note


def test_proposals_follow_the_measured_output_not_a_fixed_text() -> None:
    light = ToolLoad(3, 240, 90, 5)
    assert propose({}) == [] and propose({"refund": light}) == []  # nothing measured, nothing long: nothing to clip
    other = propose({"cancel_order": ToolLoad(4, 40_000, 30_000, 5), "find_order": ToolLoad(2, 600, 400, 5)})
    assert [p.entry.value["tool_result_chars"].keys() for p in other] == [{"cancel_order"}]
    # a tool the anchor's toolset does not offer is not clipped: its calls were another member's
    assert propose({"order_status": ToolLoad(4, 40_000, 30_000, 5)}) == []
    assert {n for s in range(20) for p in propose({"find_order": HEAVY}, seed=s)
            for n in p.entry.value["tool_result_chars"].values()} == set(clip_lengths(HEAVY))
    # a tool under min_share of the output is left whole, however long its longest result
    assert propose({"find_order": HEAVY, "refund": ToolLoad(1, 5_000, 5_000, 5)}, tools=2, min_share=0.2)[0].entry.value == {
        "tool_result_chars": {"find_order": propose({"find_order": HEAVY})[0].entry.value["tool_result_chars"]["find_order"]}}


def test_a_clip_stacks_on_the_anchors_policy_and_compiles() -> None:
    case = order_desk_case()
    pools, added = with_pool_entry(case.context.pools, "context", None,
                                   PoolEntry({"tool_result_chars": {"refund": 300}}, "context_clip"))
    assert added
    ctx = replace(case.context, pools=pools, front=(Genome(toolset=1, context=1),), load={"find_order": HEAVY, "refund": HEAVY})
    made = list(make_mutator("context_clip").propose(ctx, rng=random.Random(0)))
    clips = made[0].entry.value["tool_result_chars"]
    assert clips["refund"] == 300 and "find_order" in clips and len(made) == 1  # refund is clipped already
    grown, _ = with_pool_entry(pools, "context", None, made[0].entry)
    agent, tool, model = genome_to_config(Genome(toolset=1, context=2), grown, agent=case.context.agent, tool=case.tool,
                                          models=case.models)
    variant = compile_agent(agent, tool=tool, model=model)
    assert dict(variant.context.tool_result_chars) == clips
    a0, t0, m0 = genome_to_config(Genome(toolset=1), grown, agent=case.context.agent, tool=case.tool, models=case.models)
    plain = compile_agent(a0, tool=t0, model=m0)
    assert not plain.context and plain.content_hash != variant.content_hash


@pytest.mark.parametrize(("params", "message"), [({"tools": 0}, "tools"), ({"min_share": 1.0}, "min_share"),
                                                 ({"min_share": float("nan")}, "min_share"), ({"min_share": -0.1}, "min_share")])
def test_bad_parameters_are_refused(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_mutator("context_clip", **params)


def test_the_slot_round_trips_and_leaves_old_genomes_and_pools_as_they_were() -> None:
    case = order_desk_case()
    assert "context" not in Genome().to_dict() and Genome.from_dict(Genome().to_dict()) == Genome()
    assert Genome.from_dict(Genome(context=2).to_dict()) == Genome(context=2)
    pools = case.context.pools
    assert "context" not in param_space(pools)  # one choice: no parameter, so an old study's space is unchanged
    grown, _ = with_pool_entry(pools, "context", None, PoolEntry({"tool_result_chars": {"refund": 300}}, "context_clip"))
    assert param_space(grown)["context"] == (0, 1)
    params = genome_to_params(Genome(context=1), grown, base_format="json", base_steps={})
    assert params["context"] == 1 and params_to_genome(params).context == 1
    assert Pools.from_dict(grown.to_dict()) == grown
    old = copy.deepcopy(pools.to_dict())
    old.pop("contexts", None)  # pools written before the slot existed
    agent, _, _ = genome_to_config(Genome(), Pools.from_dict(old), agent=case.context.agent, tool=case.tool, models=case.models)
    assert agent.get("context") in (None, {})


def test_a_clip_for_a_tool_the_toolset_leaves_out_does_nothing_rather_than_stopping_the_search() -> None:
    case = order_desk_case()
    pools, _ = with_pool_entry(case.context.pools, "context", None,
                               PoolEntry({"tool_result_chars": {"order_status": 4900, "refund": 300}}, "context_clip"))
    # toolset 1 (find_order, refund, cancel_order) leaves order_status out
    agent, tool, model = genome_to_config(Genome(toolset=1, context=1), pools, agent=case.context.agent, tool=case.tool,
                                          models=case.models)
    assert agent["context"] == {"tool_result_chars": {"refund": 300}}
    assert dict(compile_agent(agent, tool=tool, model=model).context.tool_result_chars) == {"refund": 300}


def test_a_clip_for_every_tool_is_only_ever_tightened() -> None:
    case = order_desk_case()
    pools, _ = with_pool_entry(case.context.pools, "context", None, PoolEntry({"tool_result_chars": {"*": 300}}, "context_clip"))
    ctx = replace(case.context, pools=pools, front=(Genome(context=1),), load={"find_order": HEAVY})
    assert list(make_mutator("context_clip").propose(ctx, rng=random.Random(0))) == []  # every length it has is above 300
    loose = replace(ctx, pools=with_pool_entry(case.context.pools, "context", None,
                                               PoolEntry({"tool_result_chars": {"*": 5000}}, "context_clip"))[0])
    for seed in range(10):
        made = list(make_mutator("context_clip").propose(loose, rng=random.Random(seed)))
        assert made and made[0].entry.value["tool_result_chars"]["find_order"] < 5000


def test_a_stored_load_of_another_shape_is_skipped() -> None:
    assert propose({"find_order": ToolLoad(calls=0, chars=54_000, longest=9_800, episodes=5)}) == []


def test_a_full_context_slot_retires_its_oldest_unpicked_entry() -> None:
    from evoharness.search.pool_growth import live_len, retire_one

    pools = order_desk_case().context.pools
    for n in (4000, 3000, 2000):
        pools, _ = with_pool_entry(pools, "context", None, PoolEntry({"tool_result_chars": {"find_order": n}}, "context_clip"))
    assert live_len(pools, "context", None) == 4
    pools, retired = retire_one(pools, "context", None, keep=[1])  # entry 1 is a front member's pick
    assert retired and pools.contexts[2].retired and not pools.contexts[1].retired
    assert param_space(pools)["context"] == (0, 1, 3) and live_len(pools, "context", None) == 3

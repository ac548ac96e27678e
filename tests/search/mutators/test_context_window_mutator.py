"""context_window: a verbatim window proposed from how many user turns the anchor's episodes played
and how much tool output they re-sent; only ever narrowed; compiles into the context policy."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from evoharness.compiler.variant import compile_agent
from evoharness.search.genome import Genome, PoolEntry, genome_to_config
from evoharness.search.mutators.base import ToolLoad, make_mutator
from evoharness.search.pool_growth import with_pool_entry
from evoharness.testing.mutation_case import order_desk_case


def propose(load: dict[str, ToolLoad], front: tuple[Genome, ...] = (Genome(toolset=1),), pools: object = None, **params: object) -> list:
    case = order_desk_case()
    ctx = replace(case.context, load=load, front=front, **({"pools": pools} if pools is not None else {}))
    return list(make_mutator("context_window", **params).propose(ctx, rng=random.Random(0)))


def test_long_conversations_with_heavy_output_get_a_window_of_two_then_one() -> None:
    made = propose({"find_order": ToolLoad(12, 54_000, 9_800, episodes=5, turns=20)})
    assert [p.entry.value["keep_turns"] for p in made] == [2, 1] and all(p.kind == "context" for p in made)
    assert "5 train episodes played 4.0 user turns and held 10,800 characters" in made[0].entry.note


@pytest.mark.parametrize("load", [
    {"find_order": ToolLoad(12, 54_000, 9_800, episodes=5, turns=10)},  # two turns each: little to leave out
    {"find_order": ToolLoad(12, 5_000, 900, episodes=5, turns=20)},  # 1,000 characters per episode: little to save
    {"find_order": ToolLoad(12, 54_000, 9_800, episodes=5, turns=0)},  # recorded before turns were kept
    {},
])
def test_short_or_light_episodes_or_unknown_turns_get_none(load: dict[str, ToolLoad]) -> None:
    assert propose(load) == []


def test_a_window_is_only_narrowed_and_compiles() -> None:
    case = order_desk_case()
    pools, _ = with_pool_entry(case.context.pools, "context", None, PoolEntry({"tool_result_chars": {}, "keep_turns": 2}, "context_window"))
    heavy = {"find_order": ToolLoad(12, 54_000, 9_800, episodes=5, turns=20)}
    made = propose(heavy, front=(Genome(toolset=1, context=1),), pools=pools)
    assert [p.entry.value["keep_turns"] for p in made] == [1]
    agent, tool, model = genome_to_config(Genome(context=1), pools, agent=case.context.agent, tool=case.tool, models=case.models)
    assert compile_agent(agent, tool=tool, model=model).context.keep_turns == 2
    for bad in ({"min_turns": 1}, {"min_turns": float("nan")}, {"min_chars": 0}):
        with pytest.raises(ValueError):
            make_mutator("context_window", **bad)


def test_the_front_names_what_a_context_policy_sends() -> None:
    from evoharness.search.genome_edits import describe

    case = order_desk_case()
    pools, _ = with_pool_entry(case.context.pools, "context", None,
                               PoolEntry({"tool_result_chars": {"find_order": 15900}, "keep_turns": 2}, "context_clip"))
    pools, _ = with_pool_entry(pools, "context", None, PoolEntry({"keep_turns": 1}, "context_window"))
    assert describe(Genome(context=1), pools, base_format="json", base_steps={}) == (
        "context#1 (clip find_order to 15,900; keep 2 turns) (context_clip)")
    assert describe(Genome(context=2), pools, base_format="json", base_steps={}) == "context#2 (keep 1 turn) (context_window)"

"""turn_limit: a higher max_turns proposed from the turns that ran out of model calls, as a genome
slot that compiles into the variant's max_turns."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.workload import Failure
from evoharness.compiler.variant import compile_agent
from evoharness.search.genome import BASELINE, Genome, PoolEntry, Pools, genome_to_config
from evoharness.search.genome_edits import describe
from evoharness.search.genome_params import genome_to_params, param_space, params_to_genome
from evoharness.search.mutators.base import FailedEpisode, MutationContext, make_mutator
from evoharness.search.optimise.mutation import support
from evoharness.search.pool_growth import with_pool_entry
from evoharness.testing.mutation_case import order_desk_case


def spent(task: str, genome: Genome, *, out_of_calls: bool) -> FailedEpisode:
    failures = [Failure("wrong_value", "refund", "amount", 1.0, 2.0, 0)] + ([Failure("non_termination", turn=0)] if out_of_calls else [])
    return FailedEpisode(task_id=task, failures=tuple(failures), genome=genome)


def context(n_spent: int, n_other: int = 2, genome: Genome = BASELINE) -> MutationContext:
    evidence = [spent(f"s/{i}", genome, out_of_calls=True) for i in range(n_spent)]
    evidence += [spent(f"o/{i}", genome, out_of_calls=False) for i in range(n_other)]
    return replace(order_desk_case().context, front=(genome,), evidence=tuple(evidence))


def propose(ctx: MutationContext, **params: object) -> list:
    return list(make_mutator("turn_limit", **params).propose(ctx, rng=random.Random(0)))


def test_turns_out_of_calls_raise_the_limit_with_the_count_in_the_note() -> None:
    made = propose(context(3))
    assert [(p.kind, p.key, p.entry.value) for p in made] == [("max_turns", None, 16)]  # the desk agent's 8, doubled
    assert "raise max_turns from 8 to 16: 3 of its 5 failed train episodes ran out of model calls" in made[0].entry.note
    assert propose(context(1)) == [] and propose(context(0, 6)) == []  # below min_episodes; nothing ran out
    assert [p.entry.value for p in propose(context(3), factor=1.5, most=10)] == [10]
    assert support(made[0], context(3)) == 3


def test_the_limit_stacks_on_the_anchors_and_stops_at_most() -> None:
    case = order_desk_case()
    pools, _ = with_pool_entry(case.context.pools, "max_turns", None, PoolEntry(16, "turn_limit"))
    on16 = Genome(max_turns=1)
    ctx = replace(context(3, genome=on16), pools=pools)
    assert [p.entry.value for p in propose(ctx)] == [32]
    assert propose(ctx, most=16) == []


@pytest.mark.parametrize("params", [{"factor": 1.0}, {"factor": float("nan")}, {"factor": True}, {"most": 0}, {"min_episodes": -1}])
def test_bad_parameters_are_refused_by_name(params: dict) -> None:
    with pytest.raises((ConfigError, ValueError)):
        make_mutator("turn_limit", **params)


def test_the_slot_compiles_round_trips_and_its_hash_moves() -> None:
    case = order_desk_case()
    pools, added = with_pool_entry(case.context.pools, "max_turns", None, PoolEntry(16, "turn_limit", "why"))
    assert added and [e.value for e in pools.turn_limits] == [8, 16]
    agent, tool, model = genome_to_config(Genome(max_turns=1), pools, agent=case.context.agent, tool=case.tool, models=case.models)
    assert agent["max_turns"] == 16 and case.context.agent["max_turns"] == 8
    base = genome_to_config(Genome(), pools, agent=case.context.agent, tool=case.tool, models=case.models)
    assert compile_agent(agent, tool=tool, model=model).max_turns == 16
    assert compile_agent(agent, tool=tool, model=model).content_hash != compile_agent(base[0], tool=base[1], model=base[2]).content_hash
    assert param_space(pools)["max_turns"] == (0, 1)
    g = Genome(max_turns=1)
    assert params_to_genome(genome_to_params(g, pools, base_format="json", base_steps={})).max_turns == 1
    assert Genome.from_dict(g.to_dict()) == g and "max_turns" not in Genome().to_dict()
    assert Pools.from_dict(pools.to_dict()) == pools
    assert describe(g, pools, base_format="json", base_steps={}) == "max_turns=16 (turn_limit)"

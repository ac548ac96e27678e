"""The offline mutators propose from their evidence, in many wordings: different failure records
give different proposals, the rng (and only the rng) picks the wording, and no proposal is a fixed
function of the simulated model's cue words."""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from evoharness.compiler.runtime.workload import Failure
from evoharness.compiler.sim.features import ProcedureStep
from evoharness.search.genome import Genome, PoolEntry, Pools
from evoharness.search.mutators.base import FailedEpisode, MutationContext, Proposal, make_mutator
from evoharness.search.mutators.wordings import STEP_KINDS
from evoharness.search.pool_growth import with_pool_entry
from evoharness.testing import order_desk_case

# The order desk: find_order and order_status only read; refund and cancel_order change state.
VALUES = ("Z-90817", "73.25", "quux4711@example.org")


def episodes(*failures: Failure, n: int = 3) -> tuple[FailedEpisode, ...]:
    return tuple(FailedEpisode(f"desk/{i}", detail="the scorer's words", failures=failures) for i in range(n))


PROPAGATION = episodes(Failure("propagation", "refund", "order_id", "Z-90817", "Z-9081", 0))
STOPPED = episodes(Failure("premature_stop", "cancel_order", None, {"order_id": "Z-90817"}, None, 1),
                   Failure("missed_call", "cancel_order", None, None, None, 1))
SKIPPED_READ = episodes(Failure("missed_call", "order_status", None, {"order_id": "Z-90817"}, None, 0))
WRONG_CALLS = episodes(Failure("unneeded_call", "refund", None, None, {"amount": 73.25}, 0))
UNRECOVERED = episodes(Failure("no_recovery", "refund", None, None, "amount 73.25 is more than the total", 0))


def context(evidence: tuple[FailedEpisode, ...], *, toolset: list[str] | None = None) -> MutationContext:
    ctx = order_desk_case().context
    if toolset is None:
        return replace(ctx, evidence=evidence, front=(Genome(),))
    pools = replace(ctx.pools, toolsets=(*ctx.pools.toolsets, PoolEntry(toolset, "test")))
    return replace(ctx, pools=pools, evidence=evidence, front=(Genome(toolset=len(pools.toolsets) - 1),))


def propose(name: str, ctx: MutationContext, seed: int = 0, **params: Any) -> list[Proposal]:
    out = make_mutator(name, **params).propose(ctx, rng=random.Random(seed))
    assert all(isinstance(p, Proposal) for p in out)
    return [p for p in out if isinstance(p, Proposal)]


def grow(pools: Pools, p: Proposal) -> Pools:
    grown, added = with_pool_entry(pools, p.kind, p.key, p.entry)
    assert added
    return grown


def step_kind(p: Proposal) -> str:
    return next(k for k, kind in STEP_KINDS.items() if p.entry.value["instructions"] in {w for _, w in kind.wordings})


def target(p: Proposal) -> tuple[str, str | None, str]:
    return (p.kind, p.key, repr(p.entry.value))


# -- different evidence, different proposals ------------------------------------------------

@pytest.mark.parametrize("name, a, b, toolset, what_a, what_b", [
    ("workflow_step_append", PROPAGATION, STOPPED, None, "arguments", "completion"),
    ("rule_miner", PROPAGATION, STOPPED, None, "`order_id`", "`cancel_order`"),
    ("tool_rule_add", PROPAGATION, STOPPED, None, "`refund`", "`cancel_order`"),
    ("tool_description_append", PROPAGATION, STOPPED, None, "refund", "cancel_order"),
    ("tool_detach", WRONG_CALLS, episodes(Failure("unneeded_call", "cancel_order", None, None, None, 0)), None,
     "cancel_order", "refund"),  # what stays offered
    ("tool_attach", episodes(Failure("missed_call", "refund", None, None, None, 0)), SKIPPED_READ, ["find_order"], "refund",
     "order_status"),
])
def test_different_evidence_gives_different_proposals(name: str, a: tuple[FailedEpisode, ...], b: tuple[FailedEpisode, ...],
                                                      toolset: list[str] | None, what_a: str, what_b: str) -> None:
    for seed in range(5):  # whatever the rng draws
        pa, pb = propose(name, context(a, toolset=toolset), seed), propose(name, context(b, toolset=toolset), seed)
        assert pa and pb and [target(p) for p in pa] != [target(p) for p in pb]
        if name == "workflow_step_append":
            assert {step_kind(p) for p in pa} == {what_a} and {step_kind(p) for p in pb} == {what_b}
        else:
            ta, tb = repr([target(p) for p in pa]), repr([target(p) for p in pb])
            assert what_a in ta and what_b in tb and what_b not in ta and what_a not in tb


@pytest.mark.parametrize("evidence, kind", [(PROPAGATION, "arguments"), (STOPPED, "completion"), (SKIPPED_READ, "look_first"),
                                            (WRONG_CALLS, "plan"), (UNRECOVERED, "recovery")])
def test_each_failure_class_gets_its_step_kind(evidence: tuple[FailedEpisode, ...], kind: str) -> None:
    made = propose("workflow_step_append", context(evidence))
    assert len(made) == 2 and len({p.entry.value["instructions"] for p in made}) == 2 and len({p.key for p in made}) == 2
    for p in made:  # two wordings of the one kind, each a step of its own
        assert step_kind(p) == kind and p.entry.note.startswith(STEP_KINDS[kind].label)
        assert p.entry.value["trigger"] in ("prompt", "before_final") and p.entry.value["optional"] is True


@pytest.mark.parametrize("wordings", [1, 3, 9])
def test_wordings_sets_how_many_of_a_kind_and_never_more_than_it_has(wordings: int) -> None:
    made = propose("workflow_step_append", context(PROPAGATION), wordings=wordings)
    assert len(made) == min(wordings, len(STEP_KINDS["arguments"].wordings))
    assert len({p.entry.value["instructions"] for p in made}) == len(made) and {step_kind(p) for p in made} == {"arguments"}


def test_a_missed_call_is_a_skipped_read_only_when_the_tool_only_reads() -> None:
    writes = episodes(Failure("missed_call", "refund", None, None, None, 0))
    assert [step_kind(p) for p in propose("workflow_step_append", context(writes), wordings=1)] == ["completion"]
    assert [step_kind(p) for p in propose("workflow_step_append", context(SKIPPED_READ), wordings=1)] == ["look_first"]
    # a catalog that marks no tool as changing state says nothing about which tools only read
    ctx = context(SKIPPED_READ)
    unmarked = {name: replace(spec, mutates_state=False) for name, spec in ctx.tools.items()}
    assert [step_kind(p) for p in propose("workflow_step_append", replace(ctx, tools=unmarked), wordings=1)] == ["completion"]


def test_the_kind_follows_the_most_failed_episodes_and_kinds_sets_how_many() -> None:
    ctx = context(episodes(*PROPAGATION[0].failures, n=2) + UNRECOVERED + episodes(*STOPPED[0].failures, n=1))
    assert [step_kind(p) for p in propose("workflow_step_append", ctx, wordings=1)] == ["recovery"]  # 3 episodes against 2 and 1
    both = propose("workflow_step_append", ctx, kinds=2, wordings=1)
    assert [step_kind(p) for p in both] == ["recovery", "arguments"] and len({p.key for p in both}) == 2


def test_a_kind_the_anchor_has_is_passed_over_and_names_are_never_reused() -> None:
    ctx = context(PROPAGATION + episodes(*STOPPED[0].failures, n=1))
    [first] = propose("workflow_step_append", ctx, wordings=1)
    assert step_kind(first) == "arguments"
    pools = grow(ctx.pools, first)
    # pooled but not on the anchor: another wording of the same kind, under another name
    [again] = propose("workflow_step_append", replace(ctx, pools=pools), wordings=1)
    assert step_kind(again) == "arguments" and again.key != first.key
    assert again.entry.value["instructions"] != first.entry.value["instructions"]
    # on the anchor: the next kind the evidence calls for
    [q] = propose("workflow_step_append", replace(ctx, pools=pools, front=(Genome(steps={str(first.key): True}),)), wordings=1)
    assert step_kind(q) == "completion" and q.key not in {first.key, *(s["name"] for s in ctx.agent["workflow"])}


def test_without_failure_records_no_step_is_proposed() -> None:
    assert propose("workflow_step_append", context(())) == []
    unmapped = episodes(Failure("non_termination", turn=3), Failure("wrong_state", None, "balance", 1, 2, 0))
    assert propose("workflow_step_append", context(unmapped)) == []


# -- notes name the failures, identifiers only ------------------------------------------------

@pytest.mark.parametrize("name", ["workflow_step_append", "rule_miner", "tool_rule_add", "tool_description_append"])
def test_notes_name_the_failures_they_address(name: str) -> None:
    ctx = context(PROPAGATION + episodes(Failure("wrong_value", "refund", "amount", 73.25, 7.0, 0), n=1))
    for p in propose(name, ctx):
        assert "refund.order_id" in p.entry.note and "propagation" in p.entry.note, p.entry.note
        assert not [v for v in VALUES if v in p.entry.note + repr(p.entry.value)]
    [step] = propose("workflow_step_append", ctx, wordings=1)
    assert "4 failed episode(s): propagation 3 (refund.order_id), wrong_value 1 (refund.amount)" in step.entry.note


def test_generic_and_fallback_notes_say_no_failure_records_were_read() -> None:
    ctx = context(())
    for name in ("prompt_prefix", "prompt_suffix", "section_rewriter", "tool_rule_add", "tool_description_append"):
        [p] = propose(name, ctx)
        assert "no failure records" in p.entry.note, (name, p.entry.note)


# -- wordings: drawn with the rng, the same for the same seed ---------------------------------

@pytest.mark.parametrize("name, evidence", [
    ("workflow_step_append", PROPAGATION), ("workflow_step_append", STOPPED), ("rule_miner", PROPAGATION),
    ("tool_rule_add", STOPPED), ("tool_description_append", PROPAGATION), ("prompt_prefix", ()), ("prompt_suffix", ()),
    ("section_rewriter", ()),
])
def test_wordings_vary_with_the_seed_and_repeat_with_it(name: str, evidence: tuple[FailedEpisode, ...]) -> None:
    ctx = context(evidence)
    texts = {repr([p.entry.value for p in propose(name, ctx, seed)]) for seed in range(10)}
    assert len(texts) >= 2, f"{name} says the same thing whatever the rng draws"
    assert all(propose(name, ctx, seed) == propose(name, ctx, seed) for seed in range(3))


def test_a_rule_present_in_any_wording_is_not_added_again() -> None:
    ctx = context(PROPAGATION)
    for seed in range(6):
        [tool, section] = propose("rule_miner", ctx, seed)
        grown = grow(grow(ctx.pools, tool), section)
        anchored = replace(ctx, pools=grown, front=(Genome(tools={"refund": 1}, sections={"policy": 1}),))
        assert propose("rule_miner", anchored, seed + 1) == []  # another seed would draw another wording of the same rule


# -- the simulator's cue words ----------------------------------------------------------------

def verify_type(p: Proposal) -> bool:
    """Whether the simulated model reads the step as its verify type (its own test, docs/sim-model.md)."""
    return ProcedureStep(str(p.entry.value["name"]), str(p.entry.value["instructions"])).is_verify


def test_steps_are_not_a_fixed_function_of_the_simulators_cue_word() -> None:
    """Evidence without a wrong argument seldom gets a verify-type step: the cue word is one
    wording among several of one kind, not what the mutator reaches for."""
    seeds = range(20)
    for evidence in (STOPPED, SKIPPED_READ, WRONG_CALLS, UNRECOVERED):
        steps = [p for seed in seeds for p in propose("workflow_step_append", context(evidence), seed)]
        assert len(steps) == 2 * len(seeds) and sum(map(verify_type, steps)) <= len(steps) // 3, [p.key for p in steps]
    # with wrong arguments too the cue is one draw among several, and the step is an argument check either way
    steps = [p for seed in seeds for p in propose("workflow_step_append", context(PROPAGATION), seed)]
    assert 0 < sum(map(verify_type, steps)) < len(steps) and {step_kind(p) for p in steps} == {"arguments"}

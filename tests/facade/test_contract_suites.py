"""The contract suites fail what breaks the contract: each check is called on an entry that
breaks it, and raises."""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from evoharness.plugin import EpisodeScore, PoolEntry, Proposal, Task, ToolCall, ToolSpec, Trajectory
from evoharness.search.mutators.base import MUTATORS
from evoharness.testing import MutatorContract, WorkloadContract, order_desk_case
from evoharness.testing.mutation_case import MutationCase

SPEC = ToolSpec("put", "Store a value.", {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
                mutates_state=True)
TASK = Task("lax/0", "dev", (({"role": "user", "content": "Store 1."},),), ("put",), gold=((ToolCall("put", {"value": "1"}),),))


class Env:
    def __init__(self) -> None:
        self.stored: list[str] = []

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if name != "put" or set(arguments) != {"value"}:
            raise TypeError(f"bad call {name}({dict(arguments)})")
        self.stored.append(str(arguments["value"]))
        return "ok"

    def end_turn(self, turn: int) -> None:
        pass

    def snapshot(self) -> Mapping[str, Any]:
        return {"stored": list(self.stored)}


class Lax:
    """Passes any episode, and answers an unknown split with no tasks."""

    name = "lax"

    def tool_specs(self) -> Sequence[ToolSpec]:
        return (SPEC,)

    def tasks(self, split: str) -> Sequence[Task]:
        return (TASK,) if split == "dev" else ()

    def task(self, task_id: str) -> Task:
        if task_id != TASK.task_id:
            raise KeyError(task_id)
        return TASK

    def make_environment(self, task: Task, *, seed: int) -> Env:
        return Env()

    def score(self, task: Task, trajectory: Trajectory, environment: Any) -> EpisodeScore:
        return EpisodeScore(passed=True, score=1.0)


def test_the_workload_suite_fails_a_lenient_scorer_and_an_empty_unknown_split() -> None:
    suite, lax = WorkloadContract(), Lax()
    suite.test_gold_replay_passes(lax, [TASK])  # the gold passes, as it should
    with pytest.raises(AssertionError):
        suite.test_do_nothing_fails_tasks_whose_gold_has_calls(lax, [TASK])
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        suite.test_an_unknown_split_is_an_error_not_an_empty_list(lax)
    with pytest.raises(AssertionError, match="is empty"):
        suite.test_splits_hold_their_own_tasks_with_unique_prefixed_ids(lax, {s: lax.tasks(s) for s in ("train", "dev", "holdout")})


def test_the_workload_suite_fails_a_cluster_that_spans_two_splits_or_is_no_string() -> None:
    suite = WorkloadContract()
    twin = replace(TASK, task_id="lax/1", split="holdout", cluster="lax/pair")
    apart = {"train": (), "dev": (replace(TASK, cluster="lax/pair"),), "holdout": (twin,)}
    with pytest.raises(AssertionError, match=r"cluster 'lax/pair' spans two splits: lax/0 in dev, lax/1 in holdout"):
        suite.test_every_task_names_a_cluster_that_stays_in_one_split(apart)
    suite.test_every_task_names_a_cluster_that_stays_in_one_split({**apart, "holdout": (replace(twin, cluster="lax/1"),)})
    for bad in (" ", 7):
        with pytest.raises(AssertionError, match=r"lax/0: cluster"):
            suite.test_every_task_names_a_cluster_that_stays_in_one_split({"dev": (replace(TASK, cluster=bad),)})


class Leaky:
    """Copies a failure's expected value into the policy section, and drops the section's text."""

    name = "leaky"

    def propose(self, ctx: Any, *, rng: random.Random) -> list[Proposal]:
        value = next(f.expected for e in ctx.evidence for f in e.failures if f.expected is not None)
        return [Proposal("section", "policy", PoolEntry(f"Use {value}.", "leaky"))]


class NamesAnother(Leaky):
    def propose(self, ctx: Any, *, rng: random.Random) -> list[Proposal]:
        return [replace(p, entry=replace(p.entry, author="someone_else")) for p in super().propose(ctx, rng=rng)]


@pytest.fixture
def registered() -> Any:
    before = dict(MUTATORS._entries)
    MUTATORS.register("leaky")(Leaky)
    MUTATORS.register("names_another")(NamesAnother)
    yield
    MUTATORS._entries.clear()
    MUTATORS._entries.update(before)


@pytest.mark.usefixtures("registered")
def test_the_mutator_suite_fails_a_leak_a_gutted_section_and_a_wrong_author() -> None:
    suite, case = MutatorContract(), order_desk_case()
    with pytest.raises(AssertionError, match="leaked a task value"):
        suite.test_entries_name_their_author_and_a_slot_and_carry_no_task_value("leaky", case)
    no_values = MutationCase(context=case.context, tool=case.tool, models=case.models, task_values=(), name="no_values")
    with pytest.raises(AssertionError):  # shorter than the text it replaces
        suite.test_entries_name_their_author_and_a_slot_and_carry_no_task_value("leaky", no_values)
    with pytest.raises(AssertionError):
        suite.test_entries_name_their_author_and_a_slot_and_carry_no_task_value("names_another", no_values)


def test_a_mutator_suite_without_a_mutator_says_what_to_set() -> None:
    with pytest.raises(TypeError, match="set mutator"):
        MutatorContract.named_mutator()

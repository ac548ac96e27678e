"""The Workload contract (evoharness.testing.WorkloadContract), run against the project's own
workloads: the registered "bfcl" workload (default and all categories) and ToyWorkload below, a
small key-value workload written only against the protocol, which shows the suite is not
BFCL-specific. The examples run the same suite from their own tests (tests/examples).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from evoharness.compiler.runtime.trajectory import ToolCall, Trajectory
from evoharness.compiler.runtime.workload import EpisodeScore, Task, Workload, register_workload, workload_factory
from evoharness.compiler.toolspec import ToolSpec
from evoharness.compiler.workloads.bfcl.workload import CATEGORIES
from evoharness.testing import WorkloadContract
from evoharness.testing.workload_contract import SPLITS

# --------------------------------------------------------------------------------------------
# A second implementation: a key-value store, written against the protocol only.
# --------------------------------------------------------------------------------------------

TOY_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("put", "Store a value under a key.", {
        "type": "object",
        "properties": {"key": {"type": "string", "description": "Key."}, "value": {"type": "string", "description": "Value."}},
        "required": ["key", "value"],
    }, mutates_state=True, group="KeyValue"),
    ToolSpec("get", "Read the value stored under a key.", {
        "type": "object", "properties": {"key": {"type": "string", "description": "Key."}}, "required": ["key"],
    }, group="KeyValue"),
    ToolSpec("delete", "Remove a key.", {
        "type": "object", "properties": {"key": {"type": "string", "description": "Key."}}, "required": ["key"],
    }, mutates_state=True, group="KeyValue"),
)


def _user(text: str) -> tuple[Mapping[str, Any], ...]:
    return ({"role": "user", "content": text},)


TOY_NAME = "contract_toy"  # a name of its own in the workload registry

TOY_TASKS: tuple[Task, ...] = (
    Task(f"{TOY_NAME}/store_colour", "train", (_user("Remember that my favourite colour is blue."),), ("put", "get"),
         gold=((ToolCall("put", {"key": "colour", "value": "blue"}),),)),
    Task(f"{TOY_NAME}/rename_key", "dev", (_user("What is stored under a?"), _user("Move it to b.")), ("put", "get"),
         gold=((ToolCall("get", {"key": "a"}),), (ToolCall("put", {"key": "b", "value": "1"}), ToolCall("delete", {"key": "a"}))),
         added_tools={1: ("delete",)}, data={"initial": {"a": "1"}}),
    Task(f"{TOY_NAME}/chat_then_store", "holdout", (_user("Hello!"), _user("Store x=y.")), ("put",),
         gold=((), (ToolCall("put", {"key": "x", "value": "y"}),))),
)


class ToyEnvironment:
    def __init__(self, task: Task, *, seed: int) -> None:
        self.task, self.seed = task, seed
        self.store: dict[str, str] = dict(task.data.get("initial", {}))
        self.turn = 0
        self.turn_states: list[dict[str, str]] = []
        self.executed: list[tuple[int, str, dict[str, Any]]] = []

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        spec = next((s for s in TOY_SPECS if s.name == name), None)
        if spec is None:
            raise LookupError(f"unknown tool {name!r}")
        if set(arguments) != set(spec.properties()):
            raise TypeError(f"{name}() takes {sorted(spec.properties())}, got {sorted(arguments)}")
        self.executed.append((self.turn, name, dict(arguments)))
        key = str(arguments["key"])
        if name == "put":
            self.store[key] = str(arguments["value"])
            return "ok"
        if key not in self.store:
            raise KeyError(f"no key {key!r}")
        return self.store.pop(key) if name == "delete" else self.store[key]

    def end_turn(self, turn: int) -> None:
        if turn != self.turn:
            raise ValueError(f"end_turn({turn}) at turn {self.turn}")
        self.turn_states.append(dict(self.store))
        self.turn += 1

    def snapshot(self) -> Mapping[str, Any]:
        return {"store": dict(self.store)}


class ToyWorkload:
    name = TOY_NAME

    def tool_specs(self) -> Sequence[ToolSpec]:
        return TOY_SPECS

    def tasks(self, split: str) -> Sequence[Task]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}")
        return tuple(t for t in TOY_TASKS if t.split == split)

    def task(self, task_id: str) -> Task:
        for t in TOY_TASKS:
            if t.task_id == task_id:
                return t
        raise KeyError(f"unknown task {task_id!r}")

    def make_environment(self, task: Task, *, seed: int) -> ToyEnvironment:
        return ToyEnvironment(task, seed=seed)

    def score(self, task: Task, trajectory: Trajectory, environment: Any) -> EpisodeScore:
        gold = ToyEnvironment(task, seed=trajectory.seed)
        for turn, calls in enumerate(task.gold):
            for call in calls:
                gold.call(call.name, call.arguments)
            gold.end_turn(turn)
        turns_ok = []
        for turn in range(len(task.turns)):
            reads = [(c.name, dict(c.arguments)) for c in task.gold[turn] if c.name == "get"]
            made = [(n, a) for t, n, a in environment.executed if t == turn]
            state_ok = turn < len(environment.turn_states) and environment.turn_states[turn] == gold.turn_states[turn]
            turns_ok.append(state_ok and all(r in made for r in reads))
        valid = next((i for i, ok in enumerate(turns_ok) if not ok), len(turns_ok))
        return EpisodeScore(passed=all(turns_ok), score=valid / len(turns_ok), delivered=all(turns_ok),
                            detail="" if all(turns_ok) else f"turn {valid}: state or reads differ from gold")


register_workload(TOY_NAME)(ToyWorkload)


# --------------------------------------------------------------------------------------------
# The cases: add a workload factory here and it gets the whole contract.
# --------------------------------------------------------------------------------------------

WORKLOAD_CASES: list[Any] = [
    pytest.param(lambda: workload_factory("bfcl")(), id="bfcl"),
    pytest.param(lambda: workload_factory("bfcl")(categories=CATEGORIES), id="bfcl-all-categories"),
    pytest.param(lambda: workload_factory(TOY_NAME)(), id="toy"),
]


class TestWorkloadContract(WorkloadContract):
    # Known defects in a workload's data, by task id.
    known_defects = {
        # bfcl-eval data: holds out `tail` until turn 3 but its gold calls `tail` in turn 1
        # (also in test_bfcl_scoring.MISS_FUNC_DEFECTS)
        "bfcl/multi_turn_miss_func_49": "gold calls 'tail' in turn 1, before it is offered",
    }

    @pytest.fixture(scope="class", params=WORKLOAD_CASES)
    @classmethod
    def workload(cls, request: pytest.FixtureRequest) -> Workload:
        factory: Callable[[], Workload] = request.param
        return factory()


def test_a_contract_without_a_workload_name_says_what_to_set() -> None:
    with pytest.raises(TypeError, match="set workload_name"):
        WorkloadContract.build_workload()

"""The Workload protocol's contract, checked against every implementation in WORKLOAD_CASES.

In the style of Optuna's sampler contract suites: each test takes the ``workload`` fixture, which
is parametrised over factories, so a new workload gets the whole suite by adding one line to
WORKLOAD_CASES. The cases are the registered "bfcl" workload (default and all categories) and
ToyWorkload below, a small key-value workload written only against the protocol, which shows the
suite is not BFCL-specific.

Episodes are replayed here the way evoharness.compiler.runtime.loop plays them: a call to a tool the task does
not offer (yet) never reaches the environment, a call that raises is recorded as an error, and
every turn is ended with ``end_turn`` in order. Environment-heavy tests use a few tasks per split
(SAMPLE_PER_SPLIT, spread over the split) to keep the suite fast.
"""
from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from evoharness.compiler.catalog import validate_parameters
from evoharness.compiler.runtime.trajectory import ToolCall, ToolCallRecord, Trajectory
from evoharness.compiler.runtime.workload import SPLITS, EpisodeScore, Task, Workload, register_workload, workload_factory
from evoharness.compiler.toolspec import ToolSpec
from evoharness.compiler.variant import content_hash
from evoharness.compiler.workloads.bfcl.workload import CATEGORIES

SAMPLE_PER_SPLIT = 8
Calls = Sequence[Sequence[ToolCall]]

# Known defects in a workload's data, by task id: excluded from the checks they break, and
# required to still be there (remove an entry once the data is fixed).
KNOWN_DEFECTS: Mapping[str, str] = {
    # bfcl-eval data: holds out `tail` until turn 3 but its gold calls `tail` in turn 1
    # (also in test_bfcl_scoring.MISS_FUNC_DEFECTS)
    "bfcl/multi_turn_miss_func_49": "gold calls 'tail' in turn 1, before it is offered",
}


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
# The cases: add a workload factory here and it gets every test below.
# --------------------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _example(name: str) -> None:
    if str(EXAMPLES / name) not in sys.path:
        sys.path.insert(0, str(EXAMPLES / name))


def _refunds() -> Workload:
    """workload=tasks on the order-desk example: tool functions and a JSONL tasks file."""
    _example("refunds")
    tools = [f"refunds_shop.tools.{n}" for n in ("find_order", "order_status", "refund", "cancel_order")]
    return workload_factory("tasks")(path=str(EXAMPLES / "refunds" / "refunds_shop" / "tasks.jsonl"), tools=tools)


def _tooltalk() -> Workload:
    """The external plugin's workload (examples/tooltalk), registered by importing the plugin."""
    _example("tooltalk")
    import evoharness_tooltalk  # noqa: F401

    return workload_factory("tooltalk")()


WORKLOAD_CASES: list[Any] = [
    pytest.param(lambda: workload_factory("bfcl")(), id="bfcl"),
    pytest.param(lambda: workload_factory("bfcl")(categories=CATEGORIES), id="bfcl-all-categories"),
    pytest.param(lambda: workload_factory(TOY_NAME)(), id="toy"),
    pytest.param(_refunds, id="tasks-file"),
    pytest.param(_tooltalk, id="tooltalk-plugin"),
]


@pytest.fixture(scope="module", params=WORKLOAD_CASES)
def workload(request: pytest.FixtureRequest) -> Workload:
    factory: Callable[[], Workload] = request.param
    return factory()


@pytest.fixture(scope="module")
def all_tasks(workload: Workload) -> dict[str, Sequence[Task]]:
    return {split: workload.tasks(split) for split in SPLITS}


@pytest.fixture(scope="module")
def sample(all_tasks: dict[str, Sequence[Task]]) -> list[Task]:
    """A few tasks per split, spread evenly over it (so every category of a mixed split shows)."""
    chosen: list[Task] = []
    for tasks in all_tasks.values():
        step = max(1, len(tasks) // SAMPLE_PER_SPLIT)
        chosen += list(tasks[::step][:SAMPLE_PER_SPLIT])
    return chosen


def offered_at(task: Task, turn: int) -> list[str]:
    names = list(task.tool_names)
    for added_turn in sorted(task.added_tools):
        if added_turn <= turn:
            names += [n for n in task.added_tools[added_turn] if n not in names]
    return names


def replay(workload: Workload, task: Task, calls: Calls, *, seed: int = 0, env: Any = None) -> tuple[Any, Trajectory]:
    """Play scripted calls per turn the way the runtime loop does; every turn is ended."""
    env = env if env is not None else workload.make_environment(task, seed=seed)
    records: list[ToolCallRecord] = []
    for turn in range(len(task.turns)):
        offered = offered_at(task, turn)
        for call in calls[turn] if turn < len(calls) else ():
            result: str | None
            if call.name not in offered:
                result, error = None, f"unknown tool {call.name!r}; available: {', '.join(offered)}"
            else:
                try:
                    result, error = env.call(call.name, dict(call.arguments)), None
                except Exception as exc:
                    result, error = None, f"{type(exc).__name__}: {exc}"
                else:
                    assert isinstance(result, str), f"{task.task_id}: {call.name} returned {type(result).__name__}, not str"
            records.append(ToolCallRecord(turn, call.name, dict(call.arguments), result, error))
        env.end_turn(turn)
    trajectory = Trajectory(
        task_id=task.task_id, sample=0, seed=seed, variant_hash="contract", status="completed", tool_calls=tuple(records),
        # a turn's reference answer, where the task has one, is what a replay says
        responses=tuple((task.answers[i] if i < len(task.answers) else None) or "Done." for i in range(len(task.turns))),
        final_state=json.loads(json.dumps(env.snapshot(), default=str)),
    )
    return env, trajectory


def nothing(task: Task) -> list[list[ToolCall]]:
    return [[] for _ in task.turns]


# --------------------------------------------------------------------------------------------
# The contract
# --------------------------------------------------------------------------------------------


def test_is_a_workload_with_a_plain_name(workload: Workload) -> None:
    assert isinstance(workload, Workload)
    assert isinstance(workload.name, str) and workload.name and "/" not in workload.name


def test_registered_factory_without_arguments_resolves_every_task(workload: Workload, sample: list[Task]) -> None:
    """evoharness.compiler.sim.gold builds ``workload_factory(<task id prefix>)()`` and asks it for any task."""
    default = workload_factory(workload.name)()
    assert default.name == workload.name
    for task in sample:
        assert default.task(task.task_id) == task


def test_tool_specs_have_unique_names_and_valid_schemas(workload: Workload) -> None:
    specs = list(workload.tool_specs())
    assert specs and all(isinstance(s, ToolSpec) for s in specs)
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)
    for spec in specs:
        validate_parameters(f"tools.{spec.name}.parameters", spec.parameters)  # raises ConfigError
        assert spec.name.strip() and spec.description.strip(), spec


def test_splits_hold_their_own_tasks_with_unique_prefixed_ids(workload: Workload, all_tasks: dict[str, Sequence[Task]]) -> None:
    ids: list[str] = []
    for split, tasks in all_tasks.items():
        assert tasks, f"split {split!r} is empty"
        assert all(isinstance(t, Task) and t.split == split for t in tasks)
        assert all(t.task_id.startswith(f"{workload.name}/") for t in tasks)
        assert workload.tasks(split) == tasks  # stable across calls
        ids += [t.task_id for t in tasks]
    assert len(ids) == len(set(ids)), "a task id repeats (within or across splits)"


def test_an_unknown_split_is_an_error_not_an_empty_list(workload: Workload) -> None:
    with pytest.raises((ValueError, KeyError)):
        workload.tasks("no_such_split")


def test_task_round_trips_and_unknown_ids_raise_key_error(workload: Workload, all_tasks: dict[str, Sequence[Task]]) -> None:
    for tasks in all_tasks.values():
        for task in tasks:
            assert workload.task(task.task_id) == task
    with pytest.raises(KeyError):
        workload.task(f"{workload.name}/no_such_task_0")


def test_tasks_are_well_formed_and_hashable(workload: Workload, all_tasks: dict[str, Sequence[Task]]) -> None:
    for tasks in all_tasks.values():
        for task in tasks:
            assert task.turns, task.task_id
            assert all(isinstance(m, Mapping) and "role" in m and "content" in m for turn in task.turns for m in turn), task.task_id
            assert not task.gold or len(task.gold) == len(task.turns), task.task_id
            assert all(isinstance(c, ToolCall) and isinstance(c.arguments, Mapping) for turn in task.gold for c in turn), task.task_id
            assert set(task.added_tools) <= set(range(len(task.turns))), task.task_id
            assert task.tool_names and len(set(task.tool_names)) == len(task.tool_names), task.task_id
            # the search hashes the frozen task set (turns and gold) and deep-copies tasks
            content_hash([[dict(m) for m in turn] for turn in task.turns])
            content_hash([[[c.name, dict(c.arguments)] for c in turn] for turn in task.gold])
            assert copy.deepcopy(task) == task


def test_every_tool_a_task_names_or_calls_is_specified(workload: Workload, all_tasks: dict[str, Sequence[Task]]) -> None:
    specs = {s.name: s for s in workload.tool_specs()}
    problems: dict[str, str] = {}
    for tasks in all_tasks.values():
        for task in tasks:
            named = [*task.tool_names, *(n for names in task.added_tools.values() for n in names)]
            if unknown := [n for n in named if n not in specs]:
                problems[task.task_id] = f"offers unspecified tools {unknown}"
            for turn, calls in enumerate(task.gold):
                for call in calls:
                    spec = specs.get(call.name)
                    if spec is None:
                        problems[task.task_id] = f"gold calls unspecified tool {call.name!r}"
                    elif not set(call.arguments) <= set(spec.properties()):
                        problems[task.task_id] = f"gold {call.name}{dict(call.arguments)} passes arguments outside its schema"
                    elif missing := [r for r in spec.required() if r not in call.arguments]:
                        problems[task.task_id] = f"gold {call.name} misses required {missing}"
                    elif call.name not in offered_at(task, turn):
                        problems[task.task_id] = f"gold calls {call.name!r} in turn {turn}, before it is offered"
    known = {i: d for i, d in KNOWN_DEFECTS.items() if any(t.task_id == i for ts in all_tasks.values() for t in ts)}
    assert {i: problems.get(i) for i in known} == known, "a known defect changed or was fixed: update KNOWN_DEFECTS"
    assert {i: d for i, d in problems.items() if i not in known} == {}


def test_same_seed_gives_equal_environments_and_replays(workload: Workload, sample: list[Task]) -> None:
    for task in sample:
        a, b = workload.make_environment(task, seed=7), workload.make_environment(task, seed=7)
        assert a.snapshot() == b.snapshot(), task.task_id
        _, ta = replay(workload, task, task.gold, seed=7, env=a)
        _, tb = replay(workload, task, task.gold, seed=7, env=b)
        assert ta.tool_calls == tb.tool_calls, task.task_id  # same results and errors, call by call
        assert a.snapshot() == b.snapshot(), task.task_id


def test_environments_are_independent_and_snapshots_are_copies(workload: Workload, sample: list[Task]) -> None:
    """No state shared between episodes (bfcl-eval's own executor keeps instances in globals),
    and a snapshot taken earlier does not change when the episode goes on."""
    for task in sample:
        other = workload.make_environment(task, seed=0)
        env = workload.make_environment(task, seed=0)
        before = env.snapshot()
        frozen = copy.deepcopy(before)
        replay(workload, task, task.gold, env=env)
        assert before == frozen, f"{task.task_id}: an earlier snapshot changed as the episode went on"
        assert other.snapshot() == frozen, f"{task.task_id}: playing one environment changed another"


def test_gold_replay_passes(workload: Workload, sample: list[Task]) -> None:
    failures = {}
    for task in sample:
        if task.task_id in KNOWN_DEFECTS:
            continue
        env, trajectory = replay(workload, task, task.gold)
        errors = [(c.name, c.error) for c in trajectory.tool_calls if c.error]
        score = workload.score(task, trajectory, env)
        if errors or not (score.passed and score.score == 1.0 and score.delivered and score.safety_violations == 0):
            failures[task.task_id] = (errors, score)
    assert not failures, failures


def test_do_nothing_fails_tasks_whose_gold_has_calls(workload: Workload, sample: list[Task]) -> None:
    with_calls = [t for t in sample if any(t.gold)]
    assert with_calls
    for task in with_calls:
        env, trajectory = replay(workload, task, nothing(task))
        score = workload.score(task, trajectory, env)
        assert not score.passed and score.score < 1.0, (task.task_id, score)


def test_scores_are_in_the_unit_interval_for_any_trajectory(workload: Workload, sample: list[Task]) -> None:
    bogus = ToolCall("no_such_tool__contract", {"x": 1})
    for task in sample:
        scripts: dict[str, list[list[ToolCall]]] = {
            "gold": [list(turn) for turn in task.gold],
            "nothing": nothing(task),
            "first turn only": [list(task.gold[0]) if task.gold else []] + [[] for _ in task.turns[1:]],
            "gold twice": [list(turn) * 2 for turn in task.gold],
            "unknown tool first": [[bogus, *turn] for turn in task.gold] or [[bogus]],
        }
        for label, calls in scripts.items():
            env, trajectory = replay(workload, task, calls)
            score = workload.score(task, trajectory, env)
            assert isinstance(score, EpisodeScore), (task.task_id, label)
            assert math.isfinite(score.score) and 0.0 <= score.score <= 1.0, (task.task_id, label, score)
            assert score.safety_violations >= 0, (task.task_id, label, score)
            assert all(math.isfinite(v) for v in score.named.values()), (task.task_id, label, score)
            assert workload.score(task, trajectory, env) == score, f"{task.task_id} ({label}): scoring again changed the score"


def test_a_failing_call_raises_an_exception_and_leaves_the_environment_usable(workload: Workload, sample: list[Task]) -> None:
    """``call`` raises on tool failure and the loop reports it: an Exception, never a crash
    (SystemExit / KeyboardInterrupt would escape the loop's handler), and nothing changes."""
    for task in sample:
        env = workload.make_environment(task, seed=0)
        before = copy.deepcopy(env.snapshot())
        with pytest.raises(Exception):  # noqa: B017 (any Exception: the loop catches Exception)
            env.call("no_such_tool__contract", {})
        with pytest.raises(Exception):  # noqa: B017
            env.call(task.tool_names[0], {"no_such_argument__contract": 1})
        assert env.snapshot() == before, task.task_id
        for turn in range(len(task.turns)):
            env.end_turn(turn)

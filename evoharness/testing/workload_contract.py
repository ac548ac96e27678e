"""The Workload protocol's contract, as a class a plugin's tests subclass.

Episodes are replayed the way the runtime loop plays them: a call to a tool the task does not
offer (yet) never reaches the environment, a call that raises is recorded as an error, and every
turn is ended with ``end_turn`` in order. Environment-heavy tests use a few tasks per split
(``sample_per_split``, spread over the split) to keep the suite fast.
"""
from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

from evoharness.compiler.catalog import validate_parameters
from evoharness.compiler.plugins import load_plugins
from evoharness.compiler.runtime.trajectory import ToolCall, ToolCallRecord, Trajectory
from evoharness.compiler.runtime.workload import SPLITS, EpisodeScore, Task, Workload, workload_factory
from evoharness.compiler.toolspec import ToolSpec
from evoharness.compiler.variant import content_hash

Calls = Sequence[Sequence[ToolCall]]


def offered_at(task: Task, turn: int) -> list[str]:
    """The tools ``task`` offers at ``turn``: its start tools plus those added up to that turn."""
    names = list(task.tool_names)
    for added_turn in sorted(task.added_tools):
        if added_turn <= turn:
            names += [n for n in task.added_tools[added_turn] if n not in names]
    return names


def replay(workload: Workload, task: Task, calls: Calls, *, seed: int = 0, env: Any = None) -> tuple[Any, Trajectory]:
    """Play scripted ``calls`` per turn the way the runtime loop does, ending every turn; return
    the environment and the trajectory, whose responses are the task's reference answers."""
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
        responses=tuple((task.answers[i] if i < len(task.answers) else None) or "Done." for i in range(len(task.turns))),
        final_state=json.loads(json.dumps(env.snapshot(), default=str)),
    )
    return env, trajectory


def nothing(task: Task) -> list[list[ToolCall]]:
    """A script that makes no call in any turn."""
    return [[] for _ in task.turns]


class WorkloadContract:
    """The Workload contract suite. Subclass it in a test module (its name starting with ``Test``)
    and name the workload; every test below then runs against it::

        class TestMyWorkload(WorkloadContract):
            workload_name = "my_bench"
            workload_options = {"subset": "small"}
            plugins = ("my_bench.plugin",)

    Attributes:
        workload_name: The registered workload to build (required, unless ``workload`` is overridden).
        workload_options: Keyword arguments for its factory, as ``workload.options`` would give them.
        plugins: Modules to import first, as the ``plugins`` config key names them; installed
            ``evoharness.plugins`` entry points are loaded too, as every command loads them.
        known_defects: Task id -> the problem its data has, excluded from the checks it breaks
            and required to still be there (remove an entry once the data is fixed).
        sample_per_split: How many tasks per split the environment-heavy tests play.

    Raises:
        TypeError: from the ``workload`` fixture, when ``workload_name`` is not set.

    Override ``build_workload`` to build the workload otherwise, or the class-scoped ``workload``
    fixture to parametrise over several.
    """

    workload_name: ClassVar[str] = ""
    workload_options: ClassVar[Mapping[str, Any]] = {}
    plugins: ClassVar[Sequence[str]] = ()
    known_defects: ClassVar[Mapping[str, str]] = {}
    sample_per_split: ClassVar[int] = 8

    @classmethod
    def build_workload(cls) -> Workload:
        """Import the plugins, then build ``workload_name`` with ``workload_options``.

        Raises:
            TypeError: ``workload_name`` is not set.
        """
        if not cls.workload_name:
            raise TypeError(f"{cls.__name__} names no workload: set workload_name = '<registered name>' on the class")
        load_plugins(tuple(cls.plugins))
        return workload_factory(cls.workload_name)(**dict(cls.workload_options))

    @pytest.fixture(scope="class")
    @classmethod
    def workload(cls) -> Workload:
        return cls.build_workload()

    @pytest.fixture(scope="class")
    @classmethod
    def all_tasks(cls, workload: Workload) -> dict[str, Sequence[Task]]:
        return {split: workload.tasks(split) for split in SPLITS}

    @pytest.fixture(scope="class")
    @classmethod
    def sample(cls, all_tasks: dict[str, Sequence[Task]]) -> list[Task]:
        """A few tasks per split, spread evenly over it (so every category of a mixed split shows)."""
        chosen: list[Task] = []
        for tasks in all_tasks.values():
            step = max(1, len(tasks) // cls.sample_per_split)
            chosen += list(tasks[::step][:cls.sample_per_split])
        return chosen

    def test_is_a_workload_with_a_plain_name(self, workload: Workload) -> None:
        assert isinstance(workload, Workload)
        assert isinstance(workload.name, str) and workload.name and "/" not in workload.name

    def test_registered_factory_without_arguments_resolves_every_task(self, workload: Workload, sample: list[Task]) -> None:
        """The simulated model builds ``workload_factory(<task id prefix>)()`` and asks it for any task."""
        default = workload_factory(workload.name)()
        assert default.name == workload.name
        for task in sample:
            assert default.task(task.task_id) == task

    def test_tool_specs_have_unique_names_and_valid_schemas(self, workload: Workload) -> None:
        specs = list(workload.tool_specs())
        assert specs and all(isinstance(s, ToolSpec) for s in specs)
        names = [s.name for s in specs]
        assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)
        for spec in specs:
            validate_parameters(f"tools.{spec.name}.parameters", spec.parameters)  # raises ConfigError
            assert spec.name.strip() and spec.description.strip(), spec

    def test_splits_hold_their_own_tasks_with_unique_prefixed_ids(self, workload: Workload,
                                                                  all_tasks: dict[str, Sequence[Task]]) -> None:
        ids: list[str] = []
        for split, tasks in all_tasks.items():
            assert tasks, f"split {split!r} is empty"
            assert all(isinstance(t, Task) and t.split == split for t in tasks)
            assert all(t.task_id.startswith(f"{workload.name}/") for t in tasks)
            assert workload.tasks(split) == tasks  # stable across calls
            ids += [t.task_id for t in tasks]
        assert len(ids) == len(set(ids)), "a task id repeats (within or across splits)"

    def test_every_task_names_a_cluster_that_stays_in_one_split(self, all_tasks: dict[str, Sequence[Task]]) -> None:
        """``Task.cluster`` is a non-empty string, and a cluster's tasks share a split: a cluster
        with tasks in train and holdout would let the search fit on the evidence its claim reads."""
        where: dict[str, tuple[str, str]] = {}  # cluster -> (split, the first task seen in it)
        for split, tasks in all_tasks.items():
            for task in tasks:
                assert isinstance(task.cluster, str) and task.cluster.strip(), f"{task.task_id}: cluster {task.cluster!r}"
                first = where.setdefault(task.cluster, (split, task.task_id))
                assert first[0] == split, (f"cluster {task.cluster!r} spans two splits: {first[1]} in {first[0]}, "
                                           f"{task.task_id} in {split}")

    def test_an_unknown_split_is_an_error_not_an_empty_list(self, workload: Workload) -> None:
        with pytest.raises((ValueError, KeyError)):
            workload.tasks("no_such_split")

    def test_task_round_trips_and_unknown_ids_raise_key_error(self, workload: Workload, all_tasks: dict[str, Sequence[Task]]) -> None:
        for tasks in all_tasks.values():
            for task in tasks:
                assert workload.task(task.task_id) == task
        with pytest.raises(KeyError):
            workload.task(f"{workload.name}/no_such_task_0")

    def test_tasks_are_well_formed_and_hashable(self, all_tasks: dict[str, Sequence[Task]]) -> None:
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

    def test_every_tool_a_task_names_or_calls_is_specified(self, workload: Workload, all_tasks: dict[str, Sequence[Task]]) -> None:
        specs = {s.name: s for s in workload.tool_specs()}
        problems: dict[str, str] = {}
        for tasks in all_tasks.values():
            for task in tasks:
                named = [*task.tool_names, *(n for names in task.added_tools.values() for n in names)]
                if unknown := [n for n in named if n not in specs]:
                    problems[task.task_id] = f"offers unspecified tools {unknown}"
                for turn, calls in enumerate(task.gold):
                    for call in calls:
                        if problem := _gold_problem(specs.get(call.name), call, offered_at(task, turn), turn):
                            problems[task.task_id] = problem
        known = {i: d for i, d in self.known_defects.items() if any(t.task_id == i for ts in all_tasks.values() for t in ts)}
        assert {i: problems.get(i) for i in known} == known, "a known defect changed or was fixed: update known_defects"
        assert {i: d for i, d in problems.items() if i not in known} == {}

    def test_same_seed_gives_equal_environments_and_replays(self, workload: Workload, sample: list[Task]) -> None:
        for task in sample:
            a, b = workload.make_environment(task, seed=7), workload.make_environment(task, seed=7)
            assert a.snapshot() == b.snapshot(), task.task_id
            _, ta = replay(workload, task, task.gold, seed=7, env=a)
            _, tb = replay(workload, task, task.gold, seed=7, env=b)
            assert ta.tool_calls == tb.tool_calls, task.task_id  # same results and errors, call by call
            assert a.snapshot() == b.snapshot(), task.task_id

    def test_environments_are_independent_and_snapshots_are_copies(self, workload: Workload, sample: list[Task]) -> None:
        """No state shared between episodes, and a snapshot taken earlier does not change when the episode goes on."""
        for task in sample:
            other = workload.make_environment(task, seed=0)
            env = workload.make_environment(task, seed=0)
            before = env.snapshot()
            frozen = copy.deepcopy(before)
            replay(workload, task, task.gold, env=env)
            assert before == frozen, f"{task.task_id}: an earlier snapshot changed as the episode went on"
            assert other.snapshot() == frozen, f"{task.task_id}: playing one environment changed another"

    def test_gold_replay_passes(self, workload: Workload, sample: list[Task]) -> None:
        failures = {}
        for task in sample:
            if task.task_id in self.known_defects:
                continue
            env, trajectory = replay(workload, task, task.gold)
            errors = [(c.name, c.error) for c in trajectory.tool_calls if c.error]
            score = workload.score(task, trajectory, env)
            if errors or not (score.passed and score.score == 1.0 and score.delivered and score.safety_violations == 0):
                failures[task.task_id] = (errors, score)
        assert not failures, failures

    def test_do_nothing_fails_tasks_whose_gold_has_calls(self, workload: Workload, sample: list[Task]) -> None:
        with_calls = [t for t in sample if any(t.gold)]
        assert with_calls, "no sampled task has reference calls: the scorer cannot be told from a do-nothing one"
        for task in with_calls:
            env, trajectory = replay(workload, task, nothing(task))
            score = workload.score(task, trajectory, env)
            assert not score.passed and score.score < 1.0, (task.task_id, score)

    def test_scores_are_in_the_unit_interval_for_any_trajectory(self, workload: Workload, sample: list[Task]) -> None:
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

    def test_a_failing_call_raises_an_exception_and_leaves_the_environment_usable(self, workload: Workload, sample: list[Task]) -> None:
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


def _gold_problem(spec: ToolSpec | None, call: ToolCall, offered: Sequence[str], turn: int) -> str | None:
    if spec is None:
        return f"gold calls unspecified tool {call.name!r}"
    if not set(call.arguments) <= set(spec.properties()):
        return f"gold {call.name}{dict(call.arguments)} passes arguments outside its schema"
    if missing := [r for r in spec.required() if r not in call.arguments]:
        return f"gold {call.name} misses required {missing}"
    if call.name not in offered:
        return f"gold calls {call.name!r} in turn {turn}, before it is offered"
    return None

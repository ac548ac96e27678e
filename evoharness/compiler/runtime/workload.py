"""The Workload protocol: tasks, a seeded environment per episode, and a scorer.

A workload is registered by name (evoharness.compiler.plugins.NamedRegistry).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from evoharness.compiler.plugins import NamedRegistry
from evoharness.compiler.runtime.trajectory import ToolCall, Trajectory
from evoharness.compiler.toolspec import ToolSpec

# The three splits every workload divides its tasks into: the search fits on train, picks its
# champion on dev, and reports the champion's claim on holdout, which nothing before it has seen.
Split = Literal["train", "dev", "holdout"]
SPLITS: tuple[Split, ...] = get_args(Split)


def checked_split(split: object) -> Split:
    """``split`` as a Split; anything else is a ValueError naming the splits there are."""
    for s in SPLITS:
        if split == s:
            return s
    raise ValueError(f"unknown split {split!r}; use one of {list(SPLITS)}")


@dataclass(frozen=True)
class Task:
    """One task of a workload: the user turns an episode plays, the tools it offers, and what
    its scorer compares against.

    Attributes:
        task_id: Unique across the workload's splits, ``"<workload>/<id>"``.
        split: ``"train"``, ``"dev"`` or ``"holdout"``.
        turns: The user messages of each turn, as chat messages with ``role`` and ``content``;
            a turn may be empty.
        tool_names: The tools offered at the start of the episode (names of ``Workload.tool_specs``).
        gold: The reference calls of each turn (one tuple of ``ToolCall`` per turn), or ``()``.
        added_tools: Turn index -> the tools added at that turn.
        answers: The reference final answer of each turn (``None`` where a turn has none), or ``()``.
        data: Anything else the workload needs; ``data["stratum"]`` labels the task's kind.
        cluster: The group of tasks the task belongs to, such as the variants of one scenario:
            tasks of one cluster are not independent evidence, so the claim statistics count
            clusters, and all of a cluster's tasks must share a split. Left out (or ``""``), it is
            the task's own ``task_id``: the task is a cluster of one. ``dataclasses.replace``
            keeps it, a new ``task_id`` included.

    Raises:
        Never raises: the fields are not checked here; ``evoharness.testing.WorkloadContract``
        checks a workload's tasks.
    """

    task_id: str  # globally unique, "<workload>/<id>", e.g. "bfcl/multi_turn_base_0"
    split: Split
    turns: tuple[tuple[Mapping[str, Any], ...], ...]  # user messages per turn (a turn may be empty)
    tool_names: tuple[str, ...]  # tools offered at the start of the episode
    gold: tuple[tuple[ToolCall, ...], ...] = ()  # reference calls per turn, keyword arguments
    added_tools: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # turn -> tools added
    answers: tuple[str | None, ...] = ()  # reference final answer per turn, for scorers that read the answer
    data: Mapping[str, Any] = field(default_factory=dict)  # workload-specific payload
    cluster: str = ""  # the task's cluster (e.g. its scenario); "" means the task's own id

    def __post_init__(self) -> None:
        if not self.cluster:  # a task named with no cluster is a cluster of one
            object.__setattr__(self, "cluster", self.task_id)


# What a failed episode got wrong, as a workload's scorer reports it (docs/workloads.md).
FAILURE_KINDS = (
    "wrong_tool",  # another tool was called where the reference calls `tool` (`got`: the tool called)
    "wrong_value",  # `tool`'s `argument` had a value other than `expected`
    "propagation",  # a wrong value where `expected` had appeared verbatim in an earlier tool result
    "missing_argument",  # `argument` was left out of the call
    "extra_argument",  # `argument` was passed where the reference passes none
    "missed_call",  # the reference calls `tool`; the episode never did
    "premature_stop",  # the turn's answer came before its remaining calls (from `tool` on)
    "no_recovery",  # a call to `tool` returned an error and was never redone correctly (`got`: the error)
    "unneeded_call",  # a state-changing call the reference does not make, or any call where none is needed
    "forbidden_tool",  # a call to a tool the episode did not offer
    "unknown_tool",  # a call to a name no tool has
    "non_termination",  # the episode hit its turn limit before its last turn was played
    "wrong_answer",  # the turn's final answer lacks the reference answer (`expected`)
    "wrong_state",  # the final state's `argument` (a key) differs from the expected state
)


@dataclass(frozen=True)
class Failure:
    """One thing a failed episode got wrong. ``expected`` and ``got`` may carry task values: they
    are for the practitioner's report; mutators read only ``kind``, ``tool`` and ``argument``.

    Attributes:
        kind: One of ``FAILURE_KINDS`` (``wrong_tool``, ``wrong_value``, ``missed_call``, ...;
            docs/workloads.md lists them with their meaning).
        tool: The tool the failure is about, or None.
        argument: The argument (or, for ``wrong_state``, the state key) it is about, or None.
        expected: The reference value, for the report only.
        got: The value the episode produced, for the report only.
        turn: The user turn it happened in, or None.

    Raises:
        ValueError: ``kind`` is not one of ``FAILURE_KINDS``.
    """

    kind: str  # one of FAILURE_KINDS
    tool: str | None = None
    argument: str | None = None
    expected: Any = None
    got: Any = None
    turn: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAILURE_KINDS:
            raise ValueError(f"failure kind {self.kind!r} is unknown; use one of {FAILURE_KINDS}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "tool": self.tool, "argument": self.argument, "expected": self.expected, "got": self.got,
                "turn": self.turn}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Failure:
        return cls(kind=str(d["kind"]), tool=d.get("tool"), argument=d.get("argument"), expected=d.get("expected"),
                   got=d.get("got"), turn=d.get("turn"))


@dataclass(frozen=True)
class EpisodeScore:
    """A workload's verdict on one episode.

    Attributes:
        passed: The task's contract is met.
        score: A number in [0, 1].
        named: Named sub-scores (finite numbers).
        safety_violations: Forbidden or policy-violating writes (0 or more).
        delivered: The contract gate: an undelivered episode counts as 0 and not passed,
            whatever ``score`` says.
        detail: The first failure reason, one line for people; mutators never read it.
        failures: What went wrong, as ``Failure`` records: what the mutators read.

    Raises:
        Never raises: ``evoharness.testing.WorkloadContract`` checks the ranges.
    """

    passed: bool  # the task's contract is met
    score: float  # in [0, 1]
    named: Mapping[str, float] = field(default_factory=dict)  # named sub-scores
    safety_violations: int = 0  # forbidden / policy-violating writes
    delivered: bool = True  # contract gate: tool called, final state reached, nothing forbidden
    detail: str = ""  # first failure reason, for people (mutators read ``failures``)
    failures: tuple[Failure, ...] = ()  # what went wrong where the episode lost its reward


class Environment(Protocol):
    """A live episode environment, made by ``Workload.make_environment`` for one episode.
    ``call`` raises on tool failure; the loop reports it to the model as a tool error.

    Raises:
        Exception: from ``call``, on any tool failure (never SystemExit or KeyboardInterrupt).
        ToolInfraError: from ``call``, when the failure is the infrastructure's: the episode is skipped.
    """

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run tool ``name`` with the model's keyword ``arguments`` and return its output as text.

        Raises:
            Exception: the tool failed (an unknown tool, bad arguments, a refused action); the
                environment stays usable and unchanged by the failed call.
            ToolInfraError: a live service or a tool-output snapshot failed; the episode is skipped.
        """
        ...

    def end_turn(self, turn: int) -> None:
        """Close user turn ``turn``; called once per turn, in order, from 0.

        Raises:
            Never raises for turns given in order.
        """
        ...

    def snapshot(self) -> Mapping[str, Any]:
        """The environment's state as JSON-able data, for records; a copy later calls do not change.

        Raises:
            Never raises.
        """
        ...


@runtime_checkable
class Workload(Protocol):
    """What an agent is evaluated on: tasks in splits, a fresh environment per episode, a scorer.
    Registered by name with ``register_workload``; its factory is called with
    ``workload.options`` as keyword arguments, and with none by the simulated model.
    ``evoharness.testing.WorkloadContract`` checks an implementation.

    Attributes:
        name: The registry name; task ids are ``"<name>/<id>"``.

    Raises:
        TypeError: from the factory, for an unknown option.
        ValueError: from the factory, for a bad option value (reported as one
            ``workload.options: ...`` line).
    """

    name: str

    def tool_specs(self) -> Sequence[ToolSpec]:
        """Every tool a task may offer, with unique names and valid parameter schemas.

        Raises:
            Never raises.
        """
        ...

    def tasks(self, split: str) -> Sequence[Task]:
        """The tasks of ``split`` (``"train"``, ``"dev"`` or ``"holdout"``), the same on every call.

        Raises:
            ValueError: ``split`` is not a split (``checked_split`` gives the one-line message);
                never an empty list for it.
        """
        ...

    def task(self, task_id: str) -> Task:
        """The task ``task_id`` of any split, as ``tasks`` returns it.

        Raises:
            KeyError: no task has that id.
        """
        ...

    def make_environment(self, task: Task, *, seed: int) -> Environment:
        """A fresh environment for one episode of ``task``; the same ``seed`` gives the same start,
        and no state is shared with other environments.

        Raises:
            Never raises for a task of its own: an exception here stops the evaluation (raise
            ToolInfraError from ``Environment.call`` to skip an episode instead).
        """
        ...

    def score(self, task: Task, trajectory: Trajectory, environment: Environment) -> EpisodeScore:
        """Score the episode ``trajectory`` of ``task``, played in ``environment``; scoring again
        gives the same score.

        Raises:
            Never raises for a trajectory the loop produced, whatever calls it holds.
        """
        ...


def live_tools(workload: Workload) -> tuple[str, ...]:
    """The workload's tools that call a live service as configured (``Workload.live_tools``, optional)."""
    return tuple(str(t) for t in (getattr(workload, "live_tools", ()) or ()))


def shipped_doctor_record(workload: Workload) -> Path | None:
    """The record of a doctor run the workload's package ships (``Workload.doctor_record``,
    optional): it vouches only for the tasks, scorer and harness its hash names."""
    found = getattr(workload, "doctor_record", None)
    return Path(found) if found else None


WorkloadFactory = Callable[..., Workload]

WORKLOADS: NamedRegistry[WorkloadFactory] = NamedRegistry("workload", decorator="@register_workload")


def register_workload(name: str) -> Callable[[WorkloadFactory], WorkloadFactory]:
    """Decorator: make ``workload.name=<name>`` build its workload with the decorated factory (a
    ``Workload`` class, or a function returning one), called with ``workload.options`` as keyword
    arguments. A later registration of the same name replaces the earlier one.

    Args:
        name: The workload's name; its task ids start with ``"<name>/"``.

    Raises:
        Never raises here; an unknown name in a config is a ConfigError naming the registered ones.
    """
    return WORKLOADS.register(name)


def workload_factory(name: str) -> WorkloadFactory:
    return WORKLOADS.get(name)

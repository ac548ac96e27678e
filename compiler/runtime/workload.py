"""The Workload protocol: tasks, a seeded environment per episode, and a scorer.

A workload is registered by name (evoharness.compiler.plugins.NamedRegistry).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    task_id: str  # globally unique, "<workload>/<id>", e.g. "bfcl/multi_turn_base_0"
    split: Split
    turns: tuple[tuple[Mapping[str, Any], ...], ...]  # user messages per turn (a turn may be empty)
    tool_names: tuple[str, ...]  # tools offered at the start of the episode
    gold: tuple[tuple[ToolCall, ...], ...] = ()  # reference calls per turn, keyword arguments
    added_tools: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # turn -> tools added
    answers: tuple[str | None, ...] = ()  # reference final answer per turn, for scorers that read the answer
    data: Mapping[str, Any] = field(default_factory=dict)  # workload-specific payload


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
    are for the practitioner's report; mutators read only ``kind``, ``tool`` and ``argument``."""

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
    passed: bool  # the task's contract is met
    score: float  # in [0, 1]
    named: Mapping[str, float] = field(default_factory=dict)  # named sub-scores
    safety_violations: int = 0  # forbidden / policy-violating writes
    delivered: bool = True  # contract gate: tool called, final state reached, nothing forbidden
    detail: str = ""  # first failure reason, for people (mutators read ``failures``)
    failures: tuple[Failure, ...] = ()  # what went wrong where the episode lost its reward


class Environment(Protocol):
    """A live episode environment. ``call`` raises on tool failure; the loop reports it."""

    def call(self, name: str, arguments: Mapping[str, Any]) -> str: ...

    def end_turn(self, turn: int) -> None: ...

    def snapshot(self) -> Mapping[str, Any]: ...


@runtime_checkable
class Workload(Protocol):
    name: str

    def tool_specs(self) -> Sequence[ToolSpec]: ...

    def tasks(self, split: str) -> Sequence[Task]: ...  # split as a config names it: checked_split refuses another

    def task(self, task_id: str) -> Task: ...

    def make_environment(self, task: Task, *, seed: int) -> Environment: ...

    def score(self, task: Task, trajectory: Trajectory, environment: Environment) -> EpisodeScore: ...


WorkloadFactory = Callable[..., Workload]

WORKLOADS: NamedRegistry[WorkloadFactory] = NamedRegistry("workload", decorator="@register_workload")


def register_workload(name: str) -> Callable[[WorkloadFactory], WorkloadFactory]:
    return WORKLOADS.register(name)


def workload_factory(name: str) -> WorkloadFactory:
    return WORKLOADS.get(name)

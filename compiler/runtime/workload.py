"""The Workload protocol: tasks, a seeded environment per episode, and a scorer.

A workload is registered by name (compiler.plugins.NamedRegistry).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from compiler.plugins import NamedRegistry
from compiler.runtime.trajectory import ToolCall, Trajectory
from compiler.toolspec import ToolSpec


@dataclass(frozen=True)
class Task:
    task_id: str  # globally unique, "<workload>/<id>", e.g. "bfcl/multi_turn_base_0"
    split: str  # train | dev | holdout
    turns: tuple[tuple[Mapping[str, Any], ...], ...]  # user messages per turn (a turn may be empty)
    tool_names: tuple[str, ...]  # tools offered at the start of the episode
    gold: tuple[tuple[ToolCall, ...], ...] = ()  # reference calls per turn, keyword arguments
    added_tools: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # turn -> tools added
    data: Mapping[str, Any] = field(default_factory=dict)  # workload-specific payload


@dataclass(frozen=True)
class EpisodeScore:
    passed: bool  # the task's contract is met
    score: float  # in [0, 1]
    named: Mapping[str, float] = field(default_factory=dict)  # named sub-scores
    safety_violations: int = 0  # forbidden / policy-violating writes
    delivered: bool = True  # contract gate: tool called, final state reached, nothing forbidden
    detail: str = ""  # first failure reason, for evidence-driven mutators


class Environment(Protocol):
    """A live episode environment. ``call`` raises on tool failure; the loop reports it."""

    def call(self, name: str, arguments: Mapping[str, Any]) -> str: ...

    def end_turn(self, turn: int) -> None: ...

    def snapshot(self) -> Mapping[str, Any]: ...


@runtime_checkable
class Workload(Protocol):
    name: str

    def tool_specs(self) -> Sequence[ToolSpec]: ...

    def tasks(self, split: str) -> Sequence[Task]: ...

    def task(self, task_id: str) -> Task: ...

    def make_environment(self, task: Task, *, seed: int) -> Environment: ...

    def score(self, task: Task, trajectory: Trajectory, environment: Environment) -> EpisodeScore: ...


WorkloadFactory = Callable[..., Workload]

WORKLOADS: NamedRegistry[WorkloadFactory] = NamedRegistry(
    "workload", builtins={"bfcl": "compiler.workloads.bfcl.workload:BfclWorkload"}, decorator="@register_workload"
)


def register_workload(name: str) -> Callable[[WorkloadFactory], WorkloadFactory]:
    return WORKLOADS.register(name)


def workload_factory(name: str) -> WorkloadFactory:
    return WORKLOADS.get(name)

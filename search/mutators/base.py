"""The Mutator protocol: evidence in, pool growth (or control re-evaluations) out.

Mutators run between search rounds. A mutator never edits a variant in place: it proposes new
pool entries (a section text, a tool edit, a step, a tool list, a model, a temperature), each
recording the mutator as its author, or asks for a control re-evaluation of a known genome
(identity), which is evaluated with fresh samples so that it measures noise instead of being
skipped as a duplicate.
"""
from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from compiler.toolspec import ToolSpec
from search.genome import Genome, PoolEntry, Pools, with_pool_entry


@dataclass(frozen=True)
class Evidence:
    """One failed train episode of a front member."""

    task_id: str
    detail: str  # the scorer's first failure reason (names tool and argument when it can)
    tool_errors: tuple[str, ...] = ()  # "tool: error" for calls that raised
    genome: Genome = field(default_factory=Genome)


TeacherRunner = Callable[[Sequence[str]], Mapping[str, Sequence[str]]]  # task ids -> teacher's call lines


@dataclass(frozen=True)
class MutationContext:
    agent: Mapping[str, Any]  # the baseline agent config
    tools: Mapping[str, ToolSpec]  # the baseline's tools after catalog overrides
    pools: Pools
    front: tuple[Genome, ...]  # current Pareto front (train)
    evidence: tuple[Evidence, ...]
    models: tuple[str, ...]  # model config names the search may use
    round: int
    run_teacher: TeacherRunner | None = None  # runs a stronger route on task ids (teacher-gap rewriter)
    cache_dir: str | None = None  # model response cache for LLM-backed mutators


@dataclass(frozen=True)
class Proposal:
    kind: str  # section | tool | step | toolset | model | temperature
    key: str | None  # section / tool / step name; None for the list-valued slots
    entry: PoolEntry


@dataclass(frozen=True)
class Control:
    genome: Genome
    author: str


class Mutator(Protocol):
    name: str

    def propose(self, ctx: MutationContext, *, rng: random.Random) -> Sequence[Proposal | Control]: ...


MutatorFactory = Callable[..., Mutator]
_REGISTRY: dict[str, MutatorFactory] = {}
_BUILTIN_MODULES = ("search.mutators.edits", "search.mutators.structure", "search.mutators.evidence", "search.mutators.llm")


def register_mutator(name: str) -> Callable[[MutatorFactory], MutatorFactory]:
    def decorate(factory: MutatorFactory) -> MutatorFactory:
        _REGISTRY[name] = factory
        return factory

    return decorate


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def make_mutator(name: str, **params: Any) -> Mutator:
    _load_builtins()
    if name not in _REGISTRY:
        raise KeyError(f"unknown mutator {name!r}; known: {sorted(_REGISTRY)}; register one with @register_mutator")
    return _REGISTRY[name](**params)


def known_mutators() -> tuple[str, ...]:
    _load_builtins()
    return tuple(sorted(_REGISTRY))


def grow_pools(
    pools: Pools, proposals: Sequence[Proposal | Control], *, cap: Callable[[Pools, str, str | None], bool] | None = None
) -> tuple[Pools, list[Proposal], list[Control]]:
    """Apply proposals in order; duplicates of pooled values, and entries for a slot ``cap`` says is
    full (checked against the pools as they grow), are dropped. Controls pass through."""
    added: list[Proposal] = []
    controls: list[Control] = []
    for p in proposals:
        if isinstance(p, Control):
            controls.append(p)
            continue
        if cap is not None and not cap(pools, p.kind, p.key):
            continue
        pools, ok = with_pool_entry(pools, p.kind, p.key, p.entry)
        if ok:
            added.append(p)
    return pools, added, controls

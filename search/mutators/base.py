"""The Mutator protocol: evidence in, pool growth (or control re-evaluations) out.

Mutators run between search rounds. A mutator never edits a variant in place: it proposes new
pool entries (a section text, a tool edit, a step, a tool list, a model, a temperature), each
recording the mutator as its author, or asks for a control re-evaluation of a known genome
(identity), which is evaluated with fresh samples so that it measures noise instead of being
skipped as a duplicate.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evoharness.compiler.plugins import NamedRegistry
from evoharness.compiler.runtime.workload import Failure
from evoharness.compiler.toolspec import ToolSpec
from evoharness.search.genome import Genome, PoolEntry, Pools, SlotKind, with_pool_entry


def _slot(pools: Pools, kind: SlotKind, key: str | None) -> tuple[PoolEntry, ...]:
    if kind == "section":
        return tuple(pools.sections.get(key or "", ()))
    if kind == "tool":
        return tuple(pools.tools.get(key or "", ()))
    if kind == "step":
        return ()  # a step's pooling rule is with_pool_entry's
    return tuple(getattr(pools, {"toolset": "toolsets", "model": "models", "temperature": "temperatures"}[kind]))


@dataclass(frozen=True)
class Evidence:
    """One failed train episode of a front member."""

    task_id: str
    detail: str  # the scorer's first failure reason, for people (mutators read ``failures``)
    tool_errors: tuple[str, ...] = ()  # "tool: error" for calls that raised
    genome: Genome = field(default_factory=Genome)
    failures: tuple[Failure, ...] = ()  # the scorer's structured records: kind, tool, argument, ...


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
    on_cost: Callable[[str, float], None] | None = None  # (mutator, USD) for each paid model call a mutator makes


@dataclass(frozen=True)
class Proposal:
    kind: SlotKind
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
# The built-ins are entry points in pyproject.toml, each naming the module whose import registers it,
# so that making one mutator imports only its module (the LLM mutators pull in the model client).
MUTATORS: NamedRegistry[MutatorFactory] = NamedRegistry("mutator", decorator="@register_mutator")


def register_mutator(name: str) -> Callable[[MutatorFactory], MutatorFactory]:
    return MUTATORS.register(name)


def make_mutator(name: str, **params: Any) -> Mutator:
    return MUTATORS.get(name)(**params)


def known_mutators() -> tuple[str, ...]:
    return tuple(MUTATORS.names())


def grow_pools(
    pools: Pools, proposals: Sequence[Proposal | Control], *, cap: Callable[[Pools, SlotKind, str | None], bool] | None = None,
    room: Callable[[Pools, SlotKind, str | None], Pools] | None = None,
) -> tuple[Pools, list[Proposal], list[Control]]:
    """Apply proposals in order; duplicates of pooled values, and entries for a slot ``cap`` says is
    full (checked against the pools as they grow, after ``room`` had its chance to make room), are
    dropped. Controls pass through."""
    added: list[Proposal] = []
    controls: list[Control] = []
    for p in proposals:
        if isinstance(p, Control):
            controls.append(p)
            continue
        if any(e.value == p.entry.value for e in _slot(pools, p.kind, p.key)):
            continue  # a duplicate: never worth retiring an entry for
        if room is not None:
            pools = room(pools, p.kind, p.key)
        if cap is not None and not cap(pools, p.kind, p.key):
            continue
        pools, ok = with_pool_entry(pools, p.kind, p.key, p.entry)
        if ok:
            added.append(p)
    return pools, added, controls

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
    """One failed train episode of a front member.

    Attributes:
        task_id: The task that failed.
        detail: The scorer's first failure reason, for people; a mutator never parses it.
        tool_errors: ``"tool: error"`` for the calls that raised (values masked by the caller where needed).
        genome: The front member that failed.
        failures: The scorer's structured ``Failure`` records; read only ``kind``, ``tool`` and ``argument``.
    """

    task_id: str
    detail: str  # the scorer's first failure reason, for people (mutators read ``failures``)
    tool_errors: tuple[str, ...] = ()  # "tool: error" for calls that raised
    genome: Genome = field(default_factory=Genome)
    failures: tuple[Failure, ...] = ()  # the scorer's structured records: kind, tool, argument, ...


TeacherRunner = Callable[[Sequence[str]], Mapping[str, Sequence[str]]]  # task ids -> teacher's call lines


@dataclass(frozen=True)
class MutationContext:
    """What a mutator sees between rounds. It must not change any of it: it returns proposals.

    Attributes:
        agent: The baseline agent config (sections, tools, workflow, ...).
        tools: The baseline's tools after catalog overrides, by name.
        pools: The pools the search samples from (``pools.sections[name]`` holds ``PoolEntry`` values).
        front: The current Pareto front (train), best first.
        evidence: The failed train episodes of the front.
        models: The model config names the search may use.
        round: The search round about to run.
        run_teacher: Runs a stronger route on task ids (for teacher-gap mutators), or None.
        cache_dir: The model response cache for LLM-backed mutators, or None.
        on_cost: Called with (mutator, USD) for each paid model call a mutator makes, or None.
    """

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
    """A new pool entry a mutator proposes; the search adds it unless it duplicates a pooled value.

    Attributes:
        kind: The slot kind: ``"section"``, ``"tool"``, ``"step"``, ``"toolset"``, ``"model"`` or ``"temperature"``.
        key: The section, tool or step name; None for the list-valued slots (toolset, model, temperature).
        entry: The ``PoolEntry``; its ``author`` is the mutator's registered name.
    """

    kind: SlotKind
    key: str | None  # section / tool / step name; None for the list-valued slots
    entry: PoolEntry


@dataclass(frozen=True)
class Control:
    """A request to re-evaluate a known genome with fresh samples, to measure noise.

    Attributes:
        genome: The genome to evaluate again.
        author: The mutator asking for it.
    """

    genome: Genome
    author: str


class Mutator(Protocol):
    """Evidence in, pool growth out. Registered by name with ``register_mutator``; its factory is
    called with the config's ``params`` as keyword arguments. ``evoharness.testing.MutatorContract``
    checks an implementation.

    Attributes:
        name: The registered name; every entry it proposes names it as ``author``.

    Raises:
        ValueError: from the factory, for a bad parameter (name the parameter and its value).
    """

    name: str

    def propose(self, ctx: MutationContext, *, rng: random.Random) -> Sequence[Proposal | Control]:
        """Proposals for the next round, drawn only from ``ctx`` and ``rng`` (the same seed gives
        the same proposals); ``ctx`` is left unchanged and no task value (``Failure.expected`` or
        ``got``) appears in an entry.

        Raises:
            Exception: only for a fault the search must stop on (a model route that fails); a
                mutator with nothing to propose returns an empty sequence.
        """
        ...


MutatorFactory = Callable[..., Mutator]
# The built-ins are entry points in pyproject.toml, each naming the module whose import registers it,
# so that making one mutator imports only its module (the LLM mutators pull in the model client).
MUTATORS: NamedRegistry[MutatorFactory] = NamedRegistry("mutator", decorator="@register_mutator")


def register_mutator(name: str) -> Callable[[MutatorFactory], MutatorFactory]:
    """Decorator: make ``mutators.enabled=[{name: <name>, params: {...}}]`` build its mutator with the
    decorated factory (a ``Mutator`` class, or a function returning one), called with ``params`` as
    keyword arguments.

    Args:
        name: The mutator's name; its proposals' entries name it as their author.

    Raises:
        Never raises here; an unknown name in a config is a ConfigError naming the registered ones.
    """
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

"""The Mutator protocol: evidence in, pool growth (or control re-evaluations) out.

Mutators run between search rounds. A mutator never edits a variant in place: it proposes new
pool entries (a section text, a tool edit, a step, a tool list, a model, a temperature), each
recording the mutator as its author, or asks for a control re-evaluation of a known genome
(identity), which is evaluated with fresh samples so that it measures noise instead of being
skipped as a duplicate.

The kit every mutator builds on is here: the protocol and its registry, the context a mutator
reads (among it the front's failed episodes), the proposals it returns, and the readers of what the
anchor genome already picks, so that edits stack on what the front found instead of restarting
from the baseline.
"""
from __future__ import annotations

import copy
import fnmatch
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.plugins import NamedRegistry
from evoharness.compiler.runtime.workload import Failure
from evoharness.compiler.toolspec import ToolSpec
from evoharness.search.genome import LIST_SLOTS, Genome, PoolEntry, Pools, SlotKind
from evoharness.search.pool_growth import with_pool_entry


def _slot(pools: Pools, kind: SlotKind, key: str | None) -> tuple[PoolEntry, ...]:
    if kind == "section":
        return tuple(pools.sections.get(key or "", ()))
    if kind == "tool":
        return tuple(pools.tools.get(key or "", ()))
    if kind == "step":
        return ()  # a step's pooling rule is with_pool_entry's
    return tuple(getattr(pools, LIST_SLOTS[kind]))


@dataclass(frozen=True)
class FailedEpisode:
    """A scored episode that failed: what a job sends back with its evaluation, and what the
    evidence-driven mutators read.

    Attributes:
        task_id: The task that failed.
        sample: Which sample of the task it was.
        detail: The scorer's first failure reason, for people; a mutator never parses it.
        tool_errors: ``"tool: error"`` for the calls that raised (values masked by the caller where needed).
        failures: The scorer's structured ``Failure`` records; read only ``kind``, ``tool`` and ``argument``.
        genome: The front member that failed it (set when the mutators read it).

    Raises:
        ``from_dict`` raises KeyError or ValueError on a record that is not a failed episode.
    """

    task_id: str
    sample: int = 0
    detail: str = ""  # the scorer's first failure reason, for people (mutators read ``failures``)
    tool_errors: tuple[str, ...] = ()  # "tool: error" for calls that raised
    failures: tuple[Failure, ...] = ()  # the scorer's structured records: kind, tool, argument, ...
    # the front member that failed it, set when the mutators read it: a stored evaluation is keyed by
    # its variant, which several genomes can compile to, so the stored form leaves the genome out
    genome: Genome = field(default_factory=Genome)

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "sample": self.sample, "detail": self.detail, "tool_errors": list(self.tool_errors),
                "failures": [f.to_dict() for f in self.failures]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FailedEpisode:
        return cls(task_id=str(d["task_id"]), sample=int(d["sample"]), detail=str(d["detail"]), tool_errors=tuple(d.get("tool_errors", ())),
                   failures=tuple(Failure.from_dict(f) for f in d.get("failures", ())))


TeacherRunner = Callable[[Sequence[str]], Mapping[str, Sequence[str]]]  # task ids -> teacher's call lines


@dataclass(frozen=True)
class ToolLoad:
    """What one tool's results weigh in the anchor's train episodes: output every later model call
    of an episode sends again.

    Attributes:
        calls: The tool's calls that returned a result.
        chars: The characters those results held (before any clip).
        longest: The longest of them.
        episodes: The anchor's episodes measured (all of them, not only those that called the tool).
        turns: The user turns those episodes played (0: recorded before turns were kept).
    """

    calls: int
    chars: int
    longest: int
    episodes: int
    turns: int = 0


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
        load: The anchor's tool output on train, per tool (empty when nothing is stored).
        prices: USD per input token of each of ``models`` whose price is known (the price table's,
            or the config's own).
    """

    agent: Mapping[str, Any]  # the baseline agent config
    tools: Mapping[str, ToolSpec]  # the baseline's tools after catalog overrides
    pools: Pools
    front: tuple[Genome, ...]  # current Pareto front (train)
    evidence: tuple[FailedEpisode, ...]
    models: tuple[str, ...]  # model config names the search may use
    round: int
    run_teacher: TeacherRunner | None = None  # runs a stronger route on task ids (teacher-gap rewriter)
    cache_dir: str | None = None  # model response cache for LLM-backed mutators
    on_cost: Callable[[str, float | None], None] | None = None  # (mutator, USD or None: unpriced) per paid model call
    load: Mapping[str, ToolLoad] = field(default_factory=dict)  # the anchor's tool output on train, per tool
    prices: Mapping[str, float] = field(default_factory=dict)  # model config name -> USD per input token, where known


@dataclass(frozen=True)
class Proposal:
    """A new pool entry a mutator proposes; the search adds it unless it duplicates a pooled value.

    Attributes:
        kind: The slot kind: ``"section"``, ``"tool"``, ``"step"``, ``"toolset"``, ``"model"``, ``"temperature"``,
            ``"context"`` or ``"escalation"``.
        key: The section, tool or step name; None for the list-valued slots (toolset, model, temperature, context,
            escalation).
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


# -- readers of what the anchor picks, and helpers every mutator shares --------------------

def anchor(ctx: MutationContext) -> Genome:
    """The genome new entries build on: the best front member (the search tries each new entry on it)."""
    return ctx.front[0] if ctx.front else Genome()


def section_text(ctx: MutationContext, name: str) -> str:
    entries = ctx.pools.sections[name]
    idx = anchor(ctx).sections.get(name, 0)
    return str(entries[idx].value if 0 <= idx < len(entries) else entries[0].value)


def tool_edit(ctx: MutationContext, name: str) -> dict[str, Any]:
    entries = ctx.pools.tools.get(name, ())
    idx = anchor(ctx).tools.get(name, 0)
    value = entries[idx].value if 0 <= idx < len(entries) else {}
    return copy.deepcopy(dict(value or {}))


def context_value(ctx: MutationContext) -> dict[str, Any]:
    """The context policy (an ``agent.context`` mapping) the anchor picks."""
    entries = ctx.pools.contexts
    idx = anchor(ctx).context
    return copy.deepcopy(dict(entries[idx].value if 0 <= idx < len(entries) else ctx.agent.get("context") or {}))


def toolset_names(ctx: MutationContext, genome: Genome | None = None) -> list[str]:
    """The tool names a genome's toolset offers, patterns expanded against ctx.tools."""
    g = anchor(ctx) if genome is None else genome
    patterns = ctx.pools.toolsets[g.toolset].value if 0 <= g.toolset < len(ctx.pools.toolsets) else list(ctx.tools)
    names: dict[str, None] = {}
    for p in patterns:
        glob = any(c in p for c in "*?[")
        for n in [t for t in ctx.tools if fnmatch.fnmatchcase(t, p)] if glob else [p]:
            names.setdefault(n, None)
    return list(names)


def pick_section(ctx: MutationContext, mutator: str, section: str | None, role: str | None) -> str | None:
    """The section to edit: an explicit one must exist; otherwise the first section whose role
    (declared in agent.section_roles, else read from its name) is ``role``, or None."""
    if section is not None:
        if section not in ctx.pools.sections:
            raise ValueError(f"{mutator}: section {section!r} is not a prompt section; "
                             f"set params.section to one of {sorted(ctx.pools.sections)}")
        return section
    if role is None:
        return None
    return next((name for name in ctx.pools.sections if section_role(ctx.agent, name) == role), None)


def section_role(agent: Mapping[str, Any], name: str) -> str | None:
    """A section's role: the one agent.section_roles declares, else the one its name implies."""
    declared = (agent.get("section_roles") or {}).get(name)
    return str(declared) if declared else ROLE_BY_NAME.get(name)


ROLE_BY_NAME = {"policy": "rules", "rules": "rules", "style": "style", "role": "identity", "identity": "identity"}


def proposal(kind: SlotKind, key: str | None, value: Any, author: str, note: str) -> Proposal:
    return Proposal(kind, key, PoolEntry(value, author, note))


@dataclass
class FunctionMutator:
    """A named mutator around a propose function; factories close over their parameters.

    Not frozen only because the Mutator protocol declares ``name`` as a settable attribute;
    nothing assigns to it.
    """

    name: str
    fn: Callable[[MutationContext, random.Random], Sequence[Proposal | Control]]

    def propose(self, ctx: MutationContext, *, rng: random.Random) -> Sequence[Proposal | Control]:
        return tuple(self.fn(ctx, rng))


def positive_int(mutator: str, param: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"params.{param}", f"{mutator} needs a positive integer, got {value!r}", "set it to 1 or more")
    return value

"""Structural mutators: workflow steps, the tool list and the model (offline, deterministic
given the rng). Steps are pooled as switchable genes; tool lists and models as list entries."""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evoharness.compiler.toolspec import ToolSpec
from evoharness.search.mutators.base import (
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    anchor,
    positive_int,
    proposal,
    register_mutator,
    toolset_names,
)
from evoharness.search.mutators.rule_miner import (
    WRONG_CALL_KINDS,
    MaskedFailure,
    failure_counts,
    failure_note,
    parse_failures,
    ranked_pairs,
)
from evoharness.search.mutators.wordings import STEP_FOR_FAILURE, STEP_KINDS, choose

# The order step kinds are tried in when their evidence ties: the kinds whose failures lose a call's
# reward outright (wrong values, skipped actions) before the ones that cost a call (plans, retries).
KIND_ORDER = ("arguments", "completion", "look_first", "plan", "recovery")


def _step_names(ctx: MutationContext) -> list[str]:
    return ([str(s["name"]) for s in ctx.agent.get("workflow", [])]
            + [n for n in ctx.pools.steps if n not in {s["name"] for s in ctx.agent.get("workflow", [])}])


def step_kind_of(failure: MaskedFailure, tools: Mapping[str, ToolSpec]) -> str | None:
    """The step kind that addresses a failure. A missed call to a tool whose spec says it changes
    nothing is a skipped look at the state: the step for it inspects before changing. Only a
    catalog that marks some tool as changing state says anything by leaving a tool unmarked."""
    spec = tools.get(failure.tool)
    if failure.kind == "missed_call" and spec is not None and not spec.mutates_state and any(t.mutates_state for t in tools.values()):
        return "look_first"
    return STEP_FOR_FAILURE.get(failure.kind)


def _kind_of_step(step: Mapping[str, Any]) -> str | None:
    # Only steps written from this library have a known kind: a user's own step is left unclassified
    # rather than guessed from its words.
    for key, kind in STEP_KINDS.items():
        if step.get("instructions") in {w for _, w in kind.wordings}:
            return key
    return None


def _anchor_steps(ctx: MutationContext) -> list[Mapping[str, Any]]:
    """The steps the anchor genome has on: the workflow's (as switched) and the pooled ones it turns on."""
    genome, pooled = anchor(ctx), dict(ctx.pools.steps)
    steps = []
    for s in ctx.agent.get("workflow", []):
        value = pooled.pop(str(s["name"])).value if str(s["name"]) in pooled else s
        if genome.steps.get(str(s["name"]), bool(s.get("enabled", True))):
            steps.append(value)
    return steps + [e.value for n, e in pooled.items() if genome.steps.get(n, False)]


def ranked_step_kinds(ctx: MutationContext) -> list[str]:
    """Every step kind the evidence calls for, the one addressing most failed episodes first, then
    most failure records, then KIND_ORDER."""
    episodes: Counter[str] = Counter()
    records: Counter[str] = Counter()
    for e in ctx.evidence:
        kinds = [k for f in parse_failures(e, ctx.tools) if (k := step_kind_of(f, ctx.tools))]
        episodes.update(set(kinds))
        records.update(kinds)
    return sorted(episodes, key=lambda k: (-episodes[k], -records[k], KIND_ORDER.index(k)))


def _addressed_by(kind: str, tools: Mapping[str, ToolSpec]) -> Callable[[MaskedFailure], bool]:
    return lambda f: step_kind_of(f, tools) == kind


def _fresh_name(rng: random.Random, names: tuple[str, ...], taken: set[str]) -> str:
    return choose(rng, names, taken) or next(f"{names[0]}_{i}" for i in range(2, len(taken) + 3) if f"{names[0]}_{i}" not in taken)


@register_mutator("workflow_step_append")
def workflow_step_append(*, kinds: int = 1, wordings: int = 2) -> Mutator:
    """A new optional step, after the last step, of the kind the failure records call for: an
    argument check for wrong, mis-copied, missing or extra arguments; a completion check for early
    stops and missed calls; a look at the state before writing for a missed call to a read-only
    tool; a plan for wrong, unneeded or unoffered tools; error recovery for failed calls left as
    they were. Kinds go by how many failed episodes they address; ``kinds`` is how many of the top
    ones get steps. Each kind has several wordings and names (``wordings.STEP_KINDS``); the rng
    draws ``wordings`` of them not used yet, each a proposal of its own: which wording a model
    heeds cannot be known in advance, and a round that offers two finds the one that works in half
    the rounds (a wording that does not work is raced out on a fraction of the train split). A kind
    the anchor already has a step of is passed over; without failure records there is nothing to
    address, and nothing is proposed."""
    positive_int("workflow_step_append", "kinds", kinds)
    positive_int("workflow_step_append", "wordings", wordings)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        names = set(_step_names(ctx))
        written = {str(s.get("instructions")) for s in [*ctx.agent.get("workflow", []), *(e.value for e in ctx.pools.steps.values())]}
        held = {_kind_of_step(s) for s in _anchor_steps(ctx)}
        after = [str(ctx.agent["workflow"][-1]["name"])] if ctx.agent.get("workflow") else []
        out: list[Proposal] = []
        kinds_done = 0
        for key in ranked_step_kinds(ctx):
            kind = STEP_KINDS[key]
            free = [w for w in kind.wordings if w[1] not in written]
            if key in held or not free:
                continue
            why = failure_note(ctx.evidence, ctx.tools, keep=_addressed_by(key, ctx.tools))
            for trigger, instructions in rng.sample(free, min(wordings, len(free))):
                # a wording keeps one name, so two anchors drawing it propose one pool entry, tried on both
                own = kind.names[kind.wordings.index((trigger, instructions)) % len(kind.names)]
                name = own if own not in names else _fresh_name(rng, kind.names, names)
                value = {"name": name, "instructions": instructions, "after": after, "optional": True, "trigger": trigger}
                out.append(proposal("step", name, value, "workflow_step_append", f"{kind.label} ({trigger}) for {why}"))
                names.add(name)
            kinds_done += 1
            if kinds_done == kinds:
                break
        return out

    return FunctionMutator("workflow_step_append", propose)


@register_mutator("workflow_step_remove")
def workflow_step_remove() -> Mutator:
    """Makes one required step switchable (pooled under its own name as optional), so the search
    can turn it off. Leaf steps (nothing comes after them) first, then the rest in order."""

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        workflow = list(ctx.agent.get("workflow", []))
        depended = {d for s in workflow for d in s.get("after", []) or []}
        required = [s for s in workflow if not s.get("optional") and s["name"] not in ctx.pools.steps]
        for step in sorted(required, key=lambda s: s["name"] in depended):
            value = {k: v for k, v in dict(step).items() if k != "enabled"} | {"optional": True}
            return [proposal("step", str(step["name"]), value, "workflow_step_remove", f"make {step['name']!r} switchable")]
        return []

    return FunctionMutator("workflow_step_remove", propose)


@register_mutator("tool_detach")
def tool_detach(*, count: int = 1, min_count: int = 1) -> Mutator:
    """Removes up to ``count`` tools the evidence shows being called wrongly (an unexpected call,
    or a call where none was needed) from the anchor's toolset. A tool any failure shows as
    needed (missing call, wrong argument, failed call) is never removed; without such evidence
    nothing is proposed: a tool with no failures may be what passing tasks use. ``min_count``:
    episodes that must show the wrong calls before a tool goes."""
    positive_int("tool_detach", "count", count)
    positive_int("tool_detach", "min_count", min_count)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        counts = failure_counts(ctx.evidence, ctx.tools)
        needed = {f.tool for f in counts if f.kind not in WRONG_CALL_KINDS}
        offered = toolset_names(ctx)
        wrong = [t for t, _, k, _ in ranked_pairs(counts, min_count=min_count)
                 if k in WRONG_CALL_KINDS and t not in needed and t in offered]
        drop = list(dict.fromkeys(wrong))[:count]
        kept = [t for t in offered if t not in drop]
        if not drop or not kept:
            return []
        why = failure_note(ctx.evidence, ctx.tools, keep=lambda f: f.tool in drop and f.kind in WRONG_CALL_KINDS)
        return [proposal("toolset", None, kept, "tool_detach", f"detach {', '.join(drop)} (called wrongly: {why})")]

    return FunctionMutator("tool_detach", propose)


@register_mutator("tool_attach")
def tool_attach(*, count: int = 1) -> Mutator:
    """Adds back up to ``count`` baseline tools the anchor's toolset lacks: tools the evidence
    shows as needed first, then rng-chosen ones. Only ctx.tools (the baseline's tools) are
    known here, so a toolset offering all of them has nothing to attach."""
    positive_int("tool_attach", "count", count)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        offered = toolset_names(ctx)
        absent = [t for t in ctx.tools if t not in offered]
        if not absent:
            return []
        wanted = [t for t, _, k, _ in ranked_pairs(failure_counts(ctx.evidence, ctx.tools)) if k not in WRONG_CALL_KINDS and t in absent]
        rest = [t for t in absent if t not in wanted]
        add = list(dict.fromkeys(wanted + rng.sample(rest, len(rest))))[:count]
        why = failure_note(ctx.evidence, ctx.tools, keep=lambda f: f.tool in add and f.kind not in WRONG_CALL_KINDS)
        return [proposal("toolset", None, offered + add, "tool_attach", f"attach {', '.join(add)} ({why})")]

    return FunctionMutator("tool_attach", propose)


@register_mutator("model_swap")
def model_swap() -> Mutator:
    """Pools a configured model (ctx.models) that is not pooled yet. The search's initial pools
    already hold every configured model, so this usually proposes nothing: it matters when the
    model list grows during a run or pools were built without all of them."""

    def propose(ctx: MutationContext, rng: random.Random) -> Sequence[Proposal]:
        pooled = {e.value for e in ctx.pools.models}
        missing = [m for m in ctx.models if m not in pooled]
        return [proposal("model", None, rng.choice(missing), "model_swap", "configured model not pooled yet")] if missing else []

    return FunctionMutator("model_swap", propose)

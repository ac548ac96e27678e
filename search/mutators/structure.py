"""Structural mutators: workflow steps, the tool list and the model (offline, deterministic
given the rng). Steps are pooled as switchable genes; tool lists and models as list entries."""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from evoharness.search.mutators.base import (
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    positive_int,
    proposal,
    register_mutator,
    toolset_names,
)
from evoharness.search.mutators.rule_miner import WRONG_CALL_KINDS, failure_counts, ranked_pairs

STEP_LIBRARY = (
    ("verify_results", "before_final", "Before your final answer, verify each tool result of this request against what was asked; "
     "if a call failed or used a wrong value, call it again correctly."),
    ("plan_calls", "prompt", "Before the first call, list the tool calls the request needs, in order, "
     "and where each argument value comes from."),
    ("check_arguments", "prompt", "Before each call, check that every required argument has a value taken from the request "
     "or an earlier tool result."),
    ("confirm_done", "before_final", "Before your final answer, make sure every action the user asked for has been done; "
     "if one is missing, do it now."),
)


def _step_names(ctx: MutationContext) -> list[str]:
    return ([str(s["name"]) for s in ctx.agent.get("workflow", [])]
            + [n for n in ctx.pools.steps if n not in {s["name"] for s in ctx.agent.get("workflow", [])}])


@register_mutator("workflow_step_append")
def workflow_step_append() -> Mutator:
    """A new optional step from a small library (verify, plan, check arguments, confirm done),
    after the last step; never an existing name, and no second verify step."""

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        names = _step_names(ctx)
        steps = list(ctx.agent.get("workflow", [])) + [e.value for e in ctx.pools.steps.values()]
        has_verify = any("verify" in f"{s.get('name', '')} {s.get('instructions', '')}".lower() for s in steps)
        for name, trigger, instructions in STEP_LIBRARY:
            if name in names or (has_verify and "verify" in f"{name} {instructions}".lower()):
                continue
            after = [str(ctx.agent["workflow"][-1]["name"])] if ctx.agent.get("workflow") else []
            value = {"name": name, "instructions": instructions, "after": after, "optional": True, "trigger": trigger}
            kinds = Counter(f.kind for e in ctx.evidence for f in e.failures)
            why = (f"for {len(ctx.evidence)} failed train episodes ({', '.join(f'{k} {n}' for k, n in kinds.most_common(3))})"
                   if kinds else "no failure records to address")
            return [proposal("step", name, value, "workflow_step_append", f"new optional {trigger} step {why}")]
        return []

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
        return [proposal("toolset", None, kept, "tool_detach", f"detach {', '.join(drop)} (called wrongly)")]

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
        return [proposal("toolset", None, offered + add, "tool_attach", f"attach {', '.join(add)}")]

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

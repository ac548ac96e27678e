"""The escalation mutator: turns the anchor lost to trouble it could see are handed to a stronger
model, proposed from those losses.

``escalate_on_trouble`` reads the anchor's own failed train episodes and counts, per trigger, the
ones that show it: a tool call that came back as an error the episode never recovered from
(``tool_error``), a turn that ran out of model calls (``max_turns``), and, when the anchor sends a
check before its final answer, the episodes that check did not save (``review``). It proposes
handing those turns to a dearer model of the search (price per input token: the proxy for
strength the routing literature uses, and the only one the search knows without paying to find
out), cheapest first; without prices, to the incumbent's model (the one the user runs today); or
to the model ``to`` names. The paired evaluation then weighs what the handed-over calls cost
against what they recover. Every proposal's note gives the counts it answers.
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.escalation import TRIGGERS
from evoharness.search.mutators.base import (
    FailedEpisode,
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    anchor,
    positive_int,
    proposal,
    register_mutator,
)

BASE_MODEL = "base"  # the search's name for the incumbent's model config


def troubled(episode: FailedEpisode, trigger: str) -> bool:
    """Whether a failed episode shows the trouble a trigger answers (``review``: a failed episode
    of a variant that reviews whose turns all reached a final answer, so the check before it was
    sent and did not save it)."""
    spent = any(f.kind == "non_termination" for f in episode.failures)
    if trigger == "tool_error":
        return bool(episode.tool_errors)
    if trigger == "max_turns":
        return spent
    return trigger == "review" and not spent


def reviews(ctx: MutationContext) -> bool:
    """Whether the anchor sends a check before a turn's final answer (an enabled ``before_final`` step)."""
    g = anchor(ctx)
    steps: dict[str, Mapping[str, Any]] = {str(s["name"]): s for s in ctx.agent.get("workflow", [])}
    steps.update({name: {**dict(e.value), "enabled": False} for name, e in ctx.pools.steps.items() if name not in steps})
    on = {name: bool(s.get("enabled", True)) for name, s in steps.items()}
    on.update({name: bool(v) for name, v in g.steps.items() if name in on})
    return any(on[name] and s.get("trigger") == "before_final" for name, s in steps.items())


def episodes(ctx: MutationContext) -> tuple[list[FailedEpisode], str]:
    """The failed episodes to read and whose they are: the anchor's own, or the front's when the
    anchor has none stored (a failure of one variant is a risk for the others)."""
    own = [e for e in ctx.evidence if e.genome == anchor(ctx)]
    return (own, "its") if own else (list(ctx.evidence), "the front's")


def counts(ctx: MutationContext) -> dict[str, int]:
    """Per trigger, the failed episodes (``episodes``) that show its trouble (triggers with none left out)."""
    read, _ = episodes(ctx)
    found = {t: sum(1 for e in read if troubled(e, t)) for t in TRIGGERS if t != "review" or reviews(ctx)}
    return {t: n for t, n in found.items() if n}


def dearer(ctx: MutationContext, runs_on: str) -> list[str]:
    """The search's models dearer per input token than ``runs_on``, cheapest first, one per price;
    the incumbent's alone when either price is unknown."""
    own = ctx.prices.get(runs_on)
    if own is None or any(m not in ctx.prices for m in ctx.models):
        return [BASE_MODEL] if BASE_MODEL in ctx.models else []
    by_price: dict[float, str] = {}
    for m in sorted(ctx.models, key=lambda m: ctx.prices[m]):  # stable: of two at one price, the first listed
        by_price.setdefault(ctx.prices[m], m)
    return [m for p, m in by_price.items() if p > own]


def _model_name(ctx: MutationContext) -> str:
    g = anchor(ctx)
    models = ctx.pools.models
    return str(models[g.model].value) if 0 <= g.model < len(models) else BASE_MODEL


@register_mutator("escalate_on_trouble")
def escalate_on_trouble(*, min_episodes: int = 2, to: str | None = None, models: int = 2) -> Mutator:
    """Proposes an escalation for the anchor when at least ``min_episodes`` of its failed train
    episodes show the trouble of a trigger: one with every such trigger and, when there are
    several, one with only the most frequent of ``tool_error`` and ``max_turns`` (fewer calls
    handed over). Each applies to the anchor's model only (the entry's ``from``). The target is the model
    config ``to`` names (one of ``search.models``); else each of up to ``models`` models of the
    search dearer per input token than the anchor's, cheapest first (of two at one price, the
    first listed); else, when a price is unknown, the incumbent's. Nothing is proposed for an
    anchor on the dearest model, nor one already on the target."""
    positive_int("escalate_on_trouble", "min_episodes", min_episodes)
    positive_int("escalate_on_trouble", "models", models)
    if to is not None and (not isinstance(to, str) or not to):
        raise ConfigError("params.to", f"escalate_on_trouble needs a model config name, got {to!r}",
                          "set it to one of search.models, or leave it out to escalate to the incumbent's model")

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        if to is not None and to not in ctx.models:
            raise ValueError(f"escalate_on_trouble: params.to={to!r} is not one of the search's models {list(ctx.models)}; "
                             "add it to search.models")
        runs_on = _model_name(ctx)
        targets = [to] if to is not None else dearer(ctx, runs_on)[:models]
        targets = [m for m in targets if m != runs_on]
        found = {t: n for t, n in counts(ctx).items() if n >= min_episodes}
        if not targets or not found:
            return []
        read, whose = episodes(ctx)
        options: list[Sequence[str]] = [[t for t in TRIGGERS if t in found]]
        alone = [t for t in found if t != "review"]  # review hands over at every final check: never the cheaper option
        if len(found) > 1 and alone:
            options.append([max(alone, key=lambda t: (found[t], -TRIGGERS.index(t)))])
        out: list[Proposal] = []
        for target in targets:
            for on in options:
                what = "; ".join(f"{found[t]} of {whose} {len(read)} failed train episodes {_SHOWS[t]}" for t in on)
                note = f"hand the rest of a troubled turn to {target} on {', '.join(on)}: {what}"
                # "from": the model whose troubles it answers; with another model the genome leaves it out
                out.append(proposal("escalation", None, {"model": target, "on": list(on), "from": runs_on}, "escalate_on_trouble",
                                    note))
        return out

    return FunctionMutator("escalate_on_trouble", propose)


_SHOWS = {"tool_error": "failed after a tool error",
          "max_turns": "ran out of model calls in a turn",
          "review": "failed although the check before the final answer was sent"}

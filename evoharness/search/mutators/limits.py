"""The turn-limit mutator: a user turn that ran out of model calls gets more of them, proposed from
the episodes that ran out.

``turn_limit`` counts the anchor's failed train episodes that ended a turn at ``max_turns`` without
a final answer (``non_termination``) and proposes a higher limit: more calls buy a turn that needs
them its recovery, and every episode that wanders pays for them, a trade the paired evaluation
weighs on the quality and cost objectives. It never proposes a lower limit: the failure records
say which turns needed more calls, not which passing turns would have done with fewer.
"""
from __future__ import annotations

import random

from evoharness.compiler.errors import ConfigError
from evoharness.search.mutators.base import (
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    anchor,
    positive_int,
    proposal,
    register_mutator,
)
from evoharness.search.mutators.escalation import episodes, troubled


def turn_limit_value(ctx: MutationContext) -> int:
    """The max_turns the anchor runs with."""
    entries, idx = ctx.pools.turn_limits, anchor(ctx).max_turns
    return int(entries[idx].value) if 0 <= idx < len(entries) else int(ctx.agent.get("max_turns", 12))


@register_mutator("turn_limit")
def turn_limit(*, min_episodes: int = 2, factor: float = 2.0, most: int = 48) -> Mutator:
    """Proposes ``max_turns`` times ``factor`` (at most ``most``) when at least ``min_episodes`` of
    the anchor's failed train episodes ran out of model calls in a turn."""
    positive_int("turn_limit", "min_episodes", min_episodes)
    positive_int("turn_limit", "most", most)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 < factor <= 10.0:
        raise ConfigError("params.factor", f"turn_limit needs a factor above 1 and at most 10, got {factor!r}", "set it to 1.5 or 2")

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        read, whose = episodes(ctx)
        spent = sum(1 for e in read if troubled(e, "max_turns"))
        now = turn_limit_value(ctx)
        more = min(most, int(now * factor))
        if spent < min_episodes or more <= now:
            return []
        note = (f"raise max_turns from {now} to {more}: {spent} of {whose} {len(read)} failed train episodes ran out of "
                "model calls in a turn")
        return [proposal("max_turns", None, more, "turn_limit", note)]

    return FunctionMutator("turn_limit", propose)

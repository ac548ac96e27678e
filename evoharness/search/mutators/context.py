"""Context mutators: edits to what each model call re-sends, proposed from what the anchor's
episodes actually sent.

``context_window`` reads the same load and the user turns the episodes played, and proposes
keeping only the last turns' results whole: in a long conversation, what an early turn's tools
returned is re-sent on every call of every later turn.

``context_clip`` reads the anchor's tool output on train (``MutationContext.load``: per tool, its
calls, the characters they returned, the longest) and proposes clipping the results of the tools
whose output weighs most. It never reads failures to decide: a clip trades tokens for the risk of
cutting a value the model needs later, and the search's paired evaluation judges that trade on the
quality and cost objectives. Every proposal's note gives the load it answers.
"""
from __future__ import annotations

import math
import random

from evoharness.compiler.context_policy import MIN_CHARS
from evoharness.search.mutators.base import (
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    ToolLoad,
    context_value,
    positive_int,
    proposal,
    register_mutator,
    toolset_names,
)


def clip_lengths(load: ToolLoad) -> list[int]:
    """Clip lengths worth trying for a tool: a typical result (the mean) kept whole, or half or a
    quarter of the longest kept; each rounded up to 100 characters, at least MIN_CHARS, and below
    the longest (a clip at or above it cuts nothing)."""
    mean = load.chars / load.calls if load.calls else 0.0
    options = [mean * 1.5, load.longest / 2, load.longest / 4]
    out = sorted({max(MIN_CHARS, int(math.ceil(x / 100.0)) * 100) for x in options})
    return [n for n in out if n < load.longest]


@register_mutator("context_clip")
def context_clip(*, tools: int = 2, min_share: float = 0.1) -> Mutator:
    """Clips the results of up to ``tools`` tools whose output is the largest in the anchor's train
    episodes, each a proposal of its own: a tool qualifies when its results hold at least
    ``min_share`` of all the tool output and its longest result is above the clip. The length is
    drawn with the rng from ``clip_lengths`` (a typical result kept whole, or a fraction of the
    longest), below any clip the anchor already has for it (its own is left as it is; one for
    every tool is only ever tightened). Without stored output (an
    evaluation recorded before tool output was kept) nothing is proposed."""
    positive_int("context_clip", "tools", tools)
    if isinstance(min_share, bool) or not isinstance(min_share, (int, float)) or not 0.0 <= min_share < 1.0:
        raise ValueError(f"context_clip: min_share={min_share!r} must be a share in [0, 1); the default is 0.1")

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        total = sum(load.chars for load in ctx.load.values())
        if not total:
            return []
        current = context_value(ctx)
        limits = dict(current.get("tool_result_chars") or {})
        offered = set(toolset_names(ctx))

        def tighter(tool: str, load: ToolLoad) -> list[int]:
            # below the clip the tool already has, its own or every tool's: a proposal never loosens one
            now = limits.get(tool, limits.get("*"))
            return [n for n in clip_lengths(load) if now is None or n < int(now)]

        heavy = sorted((t for t, load in ctx.load.items()
                        if t in offered and t not in limits and load.calls > 0 and load.chars / total >= min_share and tighter(t, load)),
                       key=lambda t: (-ctx.load[t].chars, t))[:tools]
        out: list[Proposal] = []
        for tool in heavy:
            load = ctx.load[tool]
            n = rng.choice(tighter(tool, load))
            note = (f"clip {tool} results to {n:,} characters: its {load.calls} results in {load.episodes} train episodes held "
                    f"{load.chars:,} characters, {load.chars / total:.0%} of all tool output (mean {load.chars // load.calls:,}, "
                    f"longest {load.longest:,}), sent again on every later call")
            out.append(proposal("context", None, {**current, "tool_result_chars": {**limits, tool: n}}, "context_clip", note))
        return out

    return FunctionMutator("context_clip", propose)


@register_mutator("context_window")
def context_window(*, min_turns: float = 3.0, min_chars: int = 2_000) -> Mutator:
    """Keeps only the last one or two user turns' tool results whole (the ``keep_turns`` of the
    anchor's context policy), one proposal each, when the anchor's train episodes average at least
    ``min_turns`` user turns and ``min_chars`` characters of tool output: every result is otherwise
    re-sent on every later call of the episode, turns after it included. A window is only ever
    narrowed. Without stored turns (an evaluation recorded before they were kept) nothing is proposed."""
    if isinstance(min_turns, bool) or not isinstance(min_turns, (int, float)) or not min_turns >= 2:
        raise ValueError(f"context_window: min_turns={min_turns!r} must be a number of user turns, at least 2; the default is 3")
    positive_int("context_window", "min_chars", min_chars)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        loads = list(ctx.load.values())
        if not loads or not loads[0].episodes or not loads[0].turns:
            return []
        episodes, turns = loads[0].episodes, loads[0].turns
        chars = sum(load.chars for load in loads)
        if turns / episodes < min_turns or chars / episodes < min_chars:
            return []
        current = context_value(ctx)
        now = current.get("keep_turns")
        out: list[Proposal] = []
        for keep in (2, 1):
            if now is not None and keep >= int(now):
                continue
            note = (f"send only the last {keep} user turn{'s' if keep > 1 else ''}' tool results whole, older ones compacted: "
                    f"the anchor's {episodes} train episodes played {turns / episodes:.1f} user turns and held "
                    f"{chars // episodes:,} characters of tool output each, every result re-sent on every later call")
            out.append(proposal("context", None, {**current, "keep_turns": keep}, "context_window", note))
        return out

    return FunctionMutator("context_window", propose)

"""The simulated model's decisions within one turn: a stateless state machine.

Each request re-derives the turn's state by replaying its own earlier decisions (same named
draws, same inputs), then makes the next one. One decision = one assistant message: a single
tool call or a final answer.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from evoharness.compiler.context_policy import clipped_parts
from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.sim import errors
from evoharness.compiler.sim.conversation import Event
from evoharness.compiler.sim.features import HarnessFeatures, ToolDoc
from evoharness.compiler.sim.perturb import can_propagate, miscopy, perturb
from evoharness.compiler.sim.rng import Draws
from evoharness.compiler.sim.surface import DOCUMENTED, Surface
from evoharness.compiler.sim.tiers import Tier

ErrorKind = Literal["wrong_tool", "wrong_value", "propagation", "malformed_quote",
                    "missing_fence", "skipped_read", "missing_tool"]
FinalReason = Literal["done", "stopped", "no_tool", "empty_turn"]


@dataclass(frozen=True)
class Action:
    kind: Literal["call", "final"]
    gold_index: int = -1
    tool: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    error: ErrorKind | None = None
    reason: str = ""  # call: "gold" | "redo"; final: a FinalReason


@dataclass(frozen=True)
class TurnState:
    next_gold: int = 0
    redo: tuple[int, ...] = ()
    errors: tuple[tuple[int, ErrorKind], ...] = ()  # uncorrected mistakes, by gold index
    emitted: tuple[int, ...] = ()  # gold index of every call made, for retry-draw keys
    verified: bool = False
    finished: bool = False
    stopped_early: bool = False
    last: Action | None = None


@dataclass(frozen=True)
class Since:
    """What came back after the previous decision."""

    error_result: bool = False
    steps: tuple[str, ...] = ()

    def add(self, event: Event) -> Since:
        if event.kind == "workflow_step":
            return replace(self, steps=self.steps + (event.step,))
        return replace(self, error_result=self.error_result or event.has_error_result)


@dataclass(frozen=True)
class TurnEnv:
    tier: Tier
    features: HarnessFeatures
    gold: tuple[ToolCall, ...]
    mutates: Mapping[str, bool]  # tool name -> mutates_state (from the workload's tool specs)
    groups: Mapping[str, str]  # tool name -> group
    draws: Draws
    surface: Surface = DOCUMENTED
    said: str = ""  # the system prompt, the tool schemas and the user's messages so far: values the model can read there
    # what the task's reference calls return, whole (read only when a result was clipped): the values a clip can take away
    held: Callable[[], Sequence[str]] = tuple


def _is_verify(env: TurnEnv, step_name: str) -> bool:
    step = env.features.step(step_name)
    return env.surface.is_review(step_name, step.instructions if step is not None else "")


def _review(env: TurnEnv, state: TurnState) -> TurnState:
    """A review step: each remaining mistake of the turn is caught with P = tier.catch (times the
    surface's catch scale)."""
    catch = env.tier.catch * env.surface.catch_scale
    caught = tuple(j for j, kind in state.errors
                   if kind != "missing_tool" and env.draws.u("catch", j) < catch)
    kept = tuple((j, k) for j, k in state.errors if j not in caught)
    resume = state.stopped_early and env.draws.u("catch", "stop") < catch
    reopened = bool(caught) or resume
    return replace(state, verified=True, errors=kept, redo=state.redo + caught,
                   finished=state.finished and not reopened,
                   stopped_early=state.stopped_early and not resume)


def _recover(env: TurnEnv, state: TurnState) -> TurnState:
    """An erroneous call came back as an error: redo it correctly with P = tier.recover."""
    last = state.last
    if last is None or last.kind != "call" or last.error is None:
        return state
    j = last.gold_index
    if env.draws.u("recover", j, state.emitted.count(j)) >= env.tier.recover:
        return state
    return replace(state, redo=state.redo + (j,),
                   errors=tuple((i, k) for i, k in state.errors if i != j))


def _sibling(env: TurnEnv, tool: str, index: int) -> str | None:
    offered = sorted(t for t in env.features.tools if t != tool)
    group = env.groups.get(tool, "")
    same_group = [t for t in offered if group and env.groups.get(t) == group]
    pool = same_group or ([] if group else offered)
    same_kind = [t for t in pool if env.mutates.get(t, False) == env.mutates.get(tool, False)]
    pool = same_kind or pool
    return env.draws.rng("sibling", index).choice(pool) if pool else None


def _sibling_arguments(doc: ToolDoc, gold_args: Mapping[str, Any]) -> dict[str, Any]:
    """The gold values, in order, under the sibling's own parameter names."""
    params = sorted(doc.params, key=lambda a: not doc.params[a].required)
    return dict(zip(params, gold_args.values()))


def _skippable(env: TurnEnv, j: int) -> bool:
    tool = env.gold[j].name
    return not env.mutates.get(tool, False) and any(
        env.mutates.get(c.name, False) for c in env.gold[j + 1:])


def _propagated(call: ToolCall, seen_results: Sequence[str]) -> frozenset[str]:
    found = set()
    for arg, value in call.arguments.items():
        if can_propagate(value) and any(str(value) in r for r in seen_results):
            found.add(arg)
    return frozenset(found)


def _cut_away(env: TurnEnv, call: ToolCall, seen_results: Sequence[str]) -> frozenset[str]:
    """Arguments whose value a clip took away: a distinctive value that a result the conversation
    holds clipped held whole (a reference call's result whose head and tail are the ones sent) and
    that the model can read nowhere it was sent (no result as sent, no user message, neither the
    system prompt nor the tool schemas). Nobody can copy what they were not shown; a value no
    clipped result held is one the model knows or never read, with the rates it has unclipped."""
    kept = [parts for r in seen_results if (parts := clipped_parts(r)) is not None]
    if not kept:
        return frozenset()
    wanted = {arg: str(value) for arg, value in call.arguments.items()
              if can_propagate(value) and str(value) not in env.said and not any(str(value) in r for r in seen_results)}
    if not wanted:
        return frozenset()
    # a reference result the conversation holds clipped: its kept head and tail are the sent one's
    cut = [ref for ref in env.held() if any(len(ref) > len(h) + len(t) and ref.startswith(h) and ref.endswith(t) for h, t in kept)]
    return frozenset(arg for arg, text in wanted.items() if any(text in ref for ref in cut))


def _with_error(state: TurnState, j: int, kind: ErrorKind) -> TurnState:
    return replace(state, errors=state.errors + ((j, kind),))


def _emit(state: TurnState, action: Action) -> tuple[Action, TurnState]:
    emitted = state.emitted + ((action.gold_index,) if action.kind == "call" else ())
    finished = action.kind == "final"
    return action, replace(state, last=action, emitted=emitted, finished=finished)


def _final(state: TurnState, reason: FinalReason, stopped: bool = False) -> tuple[Action, TurnState]:
    action, state = _emit(state, Action("final", reason=reason))
    return action, replace(state, stopped_early=state.stopped_early or stopped)


def decide(env: TurnEnv, state: TurnState, since: Since,
           seen_results: Sequence[str]) -> tuple[Action, TurnState]:
    """The next assistant message of this turn, given what came back since the last one."""
    if any(_is_verify(env, s) for s in since.steps) and not state.verified:
        state = _review(env, state)
    elif since.error_result:
        state = _recover(env, state)
    while state.redo:
        j, state = state.redo[0], replace(state, redo=state.redo[1:])
        if env.gold[j].name in env.features.tools:  # cannot redo with a tool it was not offered
            if env.surface.redo_exact and not _cut_away(env, env.gold[j], seen_results):
                return _emit(state, Action("call", j, env.gold[j].name, dict(env.gold[j].arguments),
                                           reason="redo"))
            # a redo is one more call, with the tier's own error rates and fresh draws
            state, action = _attempt(env, state, j, _rates(env, state, j, seen_results),
                                     again=state.emitted.count(j))
            return _emit(state, replace(action, reason="redo"))
    if state.finished:
        return _final(state, "done")
    if not env.gold:
        return _final(state, "empty_turn")
    while state.next_gold < len(env.gold):
        j = state.next_gold
        gold = env.gold[j]
        rates = _rates(env, state, j, seen_results)
        if env.draws.u("stop", j) < rates.premature_stop:
            return _final(state, "stopped", stopped=True)
        if env.draws.u("skip", j) < rates.skip_read:
            state = replace(_with_error(state, j, "skipped_read"), next_gold=j + 1)
            continue
        state = replace(state, next_gold=j + 1)
        if gold.name not in env.features.tools and (
            _sibling(env, gold.name, j) is None
            or env.draws.u("missing", j) < errors.MISSING_TOOL_STOP
        ):
            return _final(_with_error(state, j, "missing_tool"), "no_tool", stopped=True)
        return _emit(*_attempt(env, state, j, rates))
    return _final(state, "done")


def _rates(env: TurnEnv, state: TurnState, j: int, seen_results: Sequence[str]) -> errors.CallErrorRates:
    gold = env.gold[j]
    ctx = errors.CallContext(gold.name, tuple(gold.arguments), _propagated(gold, seen_results), _skippable(env, j),
                             first_in_turn=j == 0 or state.verified)
    rates = errors.call_error_rates(env.tier, env.features, ctx, env.surface)
    lost = _cut_away(env, gold, seen_results)
    return replace(rates, propagation={**rates.propagation, **{a: 1.0 for a in lost}}) if lost else rates


def _attempt(env: TurnEnv, state: TurnState, j: int,
             rates: errors.CallErrorRates, again: int = 0) -> tuple[TurnState, Action]:
    """Gold call ``j`` with this call's mistakes drawn; ``again`` > 0 is a redo (its own draws)."""
    gold = env.gold[j]
    args = dict(gold.arguments)
    k = (j, again) if again else (j,)  # the first attempt keeps the documented draws' keys
    if gold.name not in env.features.tools or env.draws.u("wrong_tool", *k) < rates.wrong_tool:
        sibling = _sibling(env, gold.name, j)
        if sibling is not None:
            return (_with_error(state, j, "wrong_tool"),
                    Action("call", j, sibling,
                           _sibling_arguments(env.features.tools[sibling], args),
                           error="wrong_tool", reason="gold"))
    error: ErrorKind | None = None
    for arg in args:
        if env.draws.u("propagation", *k, arg) < rates.propagation.get(arg, 0.0):
            args[arg] = miscopy(str(args[arg]), env.draws.rng("propagation", *k, arg)) \
                if isinstance(args[arg], str) else perturb(args[arg], env.draws.rng("prop", *k))
            error = "propagation"
            break
        if env.draws.u("value", *k, arg) < rates.wrong_value.get(arg, 0.0):
            args[arg], error = perturb(args[arg], env.draws.rng("value", *k, arg)), "wrong_value"
            break
    if error is None and env.draws.u("malformed", *k) < rates.malformed:
        error = "missing_fence" if env.draws.u("malformed_kind", *k) < 0.3 else "malformed_quote"
    if error is not None:
        state = _with_error(state, j, error)
    return state, Action("call", j, gold.name, args, error=error, reason="gold")

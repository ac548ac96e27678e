"""The simulator's core: one chat request in, one assistant message (plus usage) out.

Deterministic and free of I/O apart from the injected gold source; the litellm provider and the
HTTP server are thin shells around ``simulate``.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from evoharness.compiler.sim.conversation import Conversation, Event, RequestMeta, SimRequestError, parse_user, split_conversation
from evoharness.compiler.sim.features import HarnessFeatures, extract_features
from evoharness.compiler.sim.gold import GoldSource, reference_results
from evoharness.compiler.sim.policy import Action, Since, TurnEnv, TurnState, decide
from evoharness.compiler.sim.render import FENCE, Rendered, bash_line, render_call, render_final
from evoharness.compiler.sim.rewriter import PREFIX as REWRITE_PREFIX
from evoharness.compiler.sim.rewriter import rewrite_reply
from evoharness.compiler.sim.rng import Draws, digest_hex
from evoharness.compiler.sim.surface import DOCUMENTED, Surface
from evoharness.compiler.sim.tiers import TIERS, Tier, tier_for
from evoharness.compiler.sim.tokens import count_prompt_tokens, count_text_tokens, tools_json

DEFAULT_TEMPERATURE = 1.0  # what OpenAI-compatible servers assume when the request omits it


@dataclass(frozen=True)
class SimRequest:
    model: str  # "sim/small", "small", ...
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None
    temperature: float | None = None
    user: str | None = None
    seed: int | None = None  # OpenAI's `seed`: which sample this is, as every provider is told


@dataclass(frozen=True)
class SimResult:
    tier: Tier
    meta: RequestMeta
    action: Action
    rendered: Rendered
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # before the provider's time_scale
    digest: str  # identifies the request for fault decisions (attempt field excluded)
    features: HarnessFeatures
    state: TurnState = field(default_factory=TurnState)

    @property
    def model_name(self) -> str:
        return f"sim/{self.tier.name}"


def request_digest(request: SimRequest, meta: RequestMeta, tools_text: str) -> str:
    payload = json.dumps({
        "model": tier_for(request.model).name, "messages": list(request.messages),
        "temperature": request.temperature, "task": meta.task_id, "seed": request.seed,
    }, sort_keys=True, default=str)
    return hashlib.sha256((payload + tools_text).encode()).hexdigest()


def request_seed(request: SimRequest) -> int:
    """The request's ``seed``, 0 when it has none (a client that never samples twice)."""
    seed = request.seed
    if seed is None:
        return 0
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SimRequestError(f"simulated model got seed={seed!r}; send an integer seed, or none")
    return seed


@lru_cache(maxsize=256)
def _features(system_prompt: str, tools_text: str, temperature: float) -> HarnessFeatures:
    # The same system prompt and tools come back on every call of an episode.
    return extract_features(system_prompt, json.loads(tools_text) or None, temperature)


@dataclass(frozen=True)
class _Replayed:
    state: TurnState
    since: Since
    seen: list[str]  # every tool result so far, all turns
    turn_results: list[str]
    actions: list[Action]  # this turn's earlier decisions


def _made(action: Action, event: Event) -> bool:
    """Whether the assistant message ``event`` is what ``action`` renders to: the same call (its
    tool and arguments), or a final answer where the action is one."""
    if action.kind == "final":
        return not event.calls and FENCE not in event.text
    if event.calls:
        return event.calls[0].name == action.tool and event.calls[0].arguments == json.loads(json.dumps(dict(action.arguments)))
    return bash_line(action.tool, action.arguments) in event.text or action.error in ("missing_fence", "malformed_quote")


def _as_made(env: TurnEnv, others: Callable[[], Sequence[TurnEnv]], state: TurnState, since: Since, seen: list[str],
             event: Event) -> tuple[Action, TurnState]:
    """An earlier decision of the turn, replayed as the tier that made it. A harness may hand a turn
    to another model midway (escalation): the decisions the other tier made are replayed with its
    rates and draws, so the state (the mistakes still standing, the calls made) is what happened.
    The request's own tier comes first; the others are tried only when its replay differs."""
    action, after = decide(env, state, since, seen)
    if _made(action, event):
        return action, after
    for other in others():
        theirs = decide(other, state, since, seen)
        if _made(theirs[0], event):
            return theirs
    return action, after


def _replay(env: TurnEnv, conv: Conversation, others: Callable[[], Sequence[TurnEnv]] = tuple) -> _Replayed:
    """Re-derive this turn's state from the simulator's own earlier messages (``others``: the turn
    as each other tier would play it, for decisions this tier did not make)."""
    seen = [r for e in conv.earlier if e.kind == "tool_results" for r in e.results]
    state, since, ignoring = TurnState(), Since(), False
    turn_results: list[str] = []
    actions: list[Action] = []
    for event in conv.current:
        if event.kind == "assistant":
            if event.is_fault:  # an injected fault, not a decision: the next request redoes it
                since, ignoring = Since(steps=since.steps), True
                continue
            action, state = _as_made(env, others, state, since, seen, event)
            actions.append(action)
            since, ignoring = Since(), False
        elif event.kind == "tool_results":
            seen += event.results
            turn_results += event.results
            if not ignoring:
                since = since.add(event)
        elif event.kind == "workflow_step" or (event.kind == "feedback" and not ignoring):
            since = since.add(event)
    return _Replayed(state, since, seen, turn_results, actions)


def harness_digest(tier: Tier, system_prompt: str, tools_text: str, temperature: float) -> str:
    """What a variant sends that stays fixed over an episode: its draws' key when unshared."""
    return digest_hex(tier.name, system_prompt, tools_text, temperature)


def simulate(request: SimRequest, gold: GoldSource,
             count_prompt: Callable[..., int] = count_prompt_tokens,
             count_text: Callable[[str], int] = count_text_tokens, *, shared_draws: bool = False, world: int = 0,
             surface: Surface = DOCUMENTED) -> SimResult:
    tier = tier_for(request.model)
    meta = parse_user(request.user)
    if meta.task_id.startswith(REWRITE_PREFIX):
        return _rewrite(request, tier, meta, count_prompt, count_text, blind=surface is not DOCUMENTED)
    try:
        task = gold.task(meta.task_id)
        specs = gold.tool_specs(meta.task_id)
    except KeyError as exc:
        raise SimRequestError(f"simulated model cannot find task {meta.task_id!r}: {exc}") from exc
    temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
    turn_texts = [[str(m.get("content", "")) for m in turn] for turn in task.turns]
    conv = split_conversation(request.messages, turn_texts)
    tools_text = tools_json(request.tools)
    features = _features(conv.system_prompt, tools_text, float(temperature))
    harness = None if shared_draws else harness_digest(tier, conv.system_prompt, tools_text, float(temperature))
    draws = Draws(meta.task_id, request_seed(request) if temperature > 0 else None, conv.turn, harness, world)
    env = TurnEnv(
        tier=tier, features=features,
        gold=tuple(task.gold[conv.turn]) if conv.turn < len(task.gold) else (),
        mutates={n: s.mutates_state for n, s in specs.items()},
        groups={n: s.group for n, s in specs.items()}, draws=draws, surface=surface,
        # what the model was shown besides the results: a value there was never cut from anything
        said="\n".join([conv.system_prompt, tools_text, *(t for turn in turn_texts[:conv.turn + 1] for t in turn)]),
        held=lambda: reference_results(gold, meta.task_id),
    )

    def others() -> list[TurnEnv]:
        return [replace(env, tier=t, draws=replace(draws, harness=None if shared_draws else harness_digest(
            t, conv.system_prompt, tools_text, float(temperature)))) for t in TIERS.values() if t.name != tier.name]

    past = _replay(env, conv, others)
    action, state = decide(env, past.state, past.since, past.seen)
    decisions = len(past.actions)  # a fault's redo reuses the faulted decision's key on purpose
    rnd = draws.rng("text", decisions)
    if action.kind == "call":
        call_id = "call_" + digest_hex(draws.world, draws.task_id, draws.seed, draws.turn, decisions)
        rendered = render_call(action, features.tool_format, call_id, features.style, rnd)
    else:
        turn_tools = [a.tool for a in past.actions if a.kind == "call"]
        answer = task.answers[conv.turn] if conv.turn < len(task.answers) else None
        rendered = render_final(action, features.style, turn_tools,
                                past.turn_results[-1] if past.turn_results else "", rnd, answer=answer)
    completion = count_text(rendered.completion_text())
    return SimResult(
        tier=tier, meta=meta, action=action, rendered=rendered,
        prompt_tokens=count_prompt(request.messages, tools_text),
        completion_tokens=completion,
        latency_s=tier.base_latency_s + tier.per_token_latency_s * completion,
        digest=request_digest(request, meta, tools_text), features=features, state=state,
    )


def _rewrite(request: SimRequest, tier: Tier, meta: RequestMeta, count_prompt: Callable[..., int],
             count_text: Callable[[str], int], *, blind: bool) -> SimResult:
    """A harness-editing request from an LLM mutator (task id ``mutator/...``): rewriter.py."""
    reply = rewrite_reply(meta.task_id, request.messages, blind=blind)
    if reply is None:
        raise SimRequestError(f"simulated model has no answer for {meta.task_id!r}; "
                              "the mutator request format is in search/mutators/llm.py")
    tools_text = tools_json(request.tools)
    conv = split_conversation(request.messages)
    rendered = Rendered(reply)
    completion = count_text(rendered.completion_text())
    return SimResult(
        tier=tier, meta=meta, action=Action("final", reason="rewrite"), rendered=rendered,
        prompt_tokens=count_prompt(request.messages, tools_text), completion_tokens=completion,
        latency_s=tier.base_latency_s + tier.per_token_latency_s * completion,
        digest=request_digest(request, meta, tools_text),
        features=_features(conv.system_prompt, tools_text, float(request.temperature or 0.0)),
    )

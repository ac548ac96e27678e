"""Escalation: the rest of a troubled turn goes to a stronger route, priced and recorded as that
route's, and the next turn starts on the variant's own model."""
from __future__ import annotations

import json
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.route import RouteSettings
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.variant import HarnessVariant, compile_agent
from evoharness.search.evaluation.episode import EpisodeResult
from tests.compiler.fixtures import configs
from tests.compiler.runtime.scripted_model import CALLS, SCRIPTS
from tests.compiler.runtime.test_runtime import (
    TASK,
    provider,  # noqa: F401 (the scripted provider, registered per test)
    turn_of,
)

WEAK_IN, WEAK_OUT, STRONG_IN, STRONG_OUT = 1e-6, 2e-6, 3e-5, 6e-5


def made_in_turn(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], bool]]:
    """This turn's calls so far: (name, arguments, succeeded)."""
    start = max(i for i, m in enumerate(messages) if m["role"] == "user" and not str(m.get("content", "")).startswith("<"))
    out, pending = [], {}
    for m in messages[start:]:
        for c in m.get("tool_calls") or ():
            pending[c["id"]] = (c["function"]["name"], json.loads(c["function"]["arguments"]))
        if m["role"] == "tool":
            name, args = pending.pop(m["tool_call_id"])
            out.append((name, args, not str(m["content"]).startswith("Error")))
    return out


def fixer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Makes the turn's reference calls not yet made successfully, then answers."""
    done = [(n, a) for n, a, ok in made_in_turn(messages) if ok]
    for call in TASK.gold[turn_of(messages)]:
        if (call.name, dict(call.arguments)) not in done:
            return {"tool_calls": [{"name": call.name, "arguments": json.dumps(dict(call.arguments))}]}
    return {"content": "Done."}


def typo(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Turn 0: a mistyped file name, then gives up on the error; later turns: as the fixer."""
    if turn_of(messages) == 0:
        if not made_in_turn(messages):
            return {"tool_calls": [{"name": "mv", "arguments": json.dumps({"source": "reprot.pdf", "destination": "archive"})}]}
        return {"content": "Done."}
    return fixer(messages, tools)


def late_typo(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Turn 0: two listings, then the mistyped move as the turn's last allowed call."""
    if turn_of(messages) != 0:
        return fixer(messages, tools)
    made = len(made_in_turn(messages))
    if made < 2:
        return {"tool_calls": [{"name": "ls", "arguments": "{}"}]}
    if made == 2:
        return {"tool_calls": [{"name": "mv", "arguments": json.dumps({"source": "reprot.pdf", "destination": "archive"})}]}
    return {"content": "Done."}


def looper(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "ls", "arguments": "{}"}]}


SCRIPTS.update({"esc_fixer": fixer, "esc_typo": typo, "esc_looper": looper, "esc_late_typo": late_typo})


def variant(weak: str, on: list[str], **agent_edits: Any) -> HarnessVariant:
    agent, tool, model = configs()
    agent["workflow"] = [s for s in agent["workflow"] if s["name"] != "verify"]
    agent.update(agent_edits)
    agent["escalation"] = {"model": {"route": "script/esc_fixer", "input_cost_per_token": STRONG_IN,
                                     "output_cost_per_token": STRONG_OUT}, "on": on}
    return compile_agent(agent, tool=tool, model={**model, "route": f"script/{weak}"})


def clients(v: HarnessVariant) -> tuple[ModelClient, ModelClient]:
    weak = ModelClient(v.model, RouteSettings(retries=1, backoff_s=0.001, input_cost_per_token=WEAK_IN, output_cost_per_token=WEAK_OUT))
    assert v.escalation is not None
    return weak, ModelClient(v.escalation.model, v.escalation.route)


def play(v: HarnessVariant) -> Any:
    import asyncio

    from evoharness.compiler.runtime.loop import run_episode
    from tests.compiler.runtime.test_runtime import FileEnv

    weak, strong = clients(v)

    async def episode() -> Any:
        async with weak, strong:
            return await run_episode(v, TASK, FileEnv(), client=weak, escalate_to=strong)

    return asyncio.run(episode())


def test_a_tool_error_hands_the_rest_of_the_turn_to_the_stronger_route_billed_at_its_price() -> None:
    before = CALLS.get("esc_fixer", 0)
    traj = play(variant("esc_typo", ["tool_error"]))
    assert traj.escalations == ((0, "tool_error"),)
    turn0 = [c for c in traj.model_calls if c.turn == 0]
    assert [c.escalated for c in turn0] == [False, True, True]  # the typo, then the fixer's mv and its answer
    assert all(not c.escalated for c in traj.model_calls if c.turn == 1)  # the next turn starts on the variant's model
    assert CALLS["esc_fixer"] - before == 2
    assert [(c.name, c.error is None) for c in traj.tool_calls][:2] == [("mv", False), ("mv", True)]
    for c in traj.model_calls:  # each call at its own route's price
        cin, cout = (STRONG_IN, STRONG_OUT) if c.escalated else (WEAK_IN, WEAK_OUT)
        assert c.cost_usd == pytest.approx(c.prompt_tokens * cin + c.completion_tokens * cout, rel=1e-9)
    row = EpisodeResult.from_episode(traj, None)
    assert row.escalations == ((0, "tool_error"),)
    assert row.escalated_cost_usd == pytest.approx(sum(c.cost_usd for c in traj.model_calls if c.escalated), rel=1e-9)
    assert row.input_parts["escalated"] == sum(c.prompt_tokens + c.completion_tokens for c in traj.model_calls if c.escalated)
    assert EpisodeResult.from_dict(json.loads(json.dumps(row.to_dict()))) == row


def test_without_the_trigger_the_turn_stays_on_the_variants_model() -> None:
    traj = play(variant("esc_typo", ["max_turns"]))
    assert traj.escalations == () and not any(c.escalated for c in traj.model_calls)
    assert [c.error is None for c in traj.tool_calls if c.turn == 0] == [False]  # the typo stands


def test_a_turn_that_runs_out_of_calls_gets_a_second_budget_on_the_stronger_route() -> None:
    v = variant("esc_looper", ["max_turns"], max_turns=3)
    traj = play(v)
    assert [e[1] for e in traj.escalations] == ["max_turns", "max_turns"]  # once per turn
    turn0 = [c.escalated for c in traj.model_calls if c.turn == 0]
    assert turn0[:3] == [False] * 3 and all(turn0[3:]) and traj.status == "completed"
    looping = variant("esc_looper", ["tool_error"], max_turns=3)
    assert play(looping).status == "max_turns"


def test_a_turn_handed_over_on_its_last_call_gives_the_stronger_route_calls_of_its_own() -> None:
    traj = play(variant("esc_late_typo", ["tool_error"], max_turns=3))
    turn0 = [c.escalated for c in traj.model_calls if c.turn == 0]
    assert traj.escalations == ((0, "tool_error"),) and turn0[:3] == [False] * 3 and turn0[3:] and all(turn0[3:])
    assert [(c.name, c.error is None) for c in traj.tool_calls if c.turn == 0][-1] == ("mv", True)


def test_triggers_are_checked_even_without_a_model() -> None:
    agent, tool, model = configs()
    with pytest.raises(ConfigError, match="unknown trigger 'bogus'"):
        compile_agent({**agent, "escalation": {"model": None, "on": ["bogus"]}}, tool=tool, model=model)
    assert compile_agent({**agent, "escalation": {"model": None, "on": ["review"]}}, tool=tool, model=model).escalation is None


def test_repeats_never_stand_in_when_the_stronger_route_samples() -> None:
    from evoharness.search.evaluation.evaluate import evaluate_variant
    from tests.search.evaluation.test_evaluate import DEV, WORKLOAD

    agent, tool, model = configs()
    sim = {"send_episode_id": True, "retries": 2, "backoff_s": 0.001}
    hot = {**agent, "escalation": {"model": {"route": "sim/large", "temperature": 1.0, **sim}, "on": ["tool_error"]}}
    cold = {**agent, "escalation": {"model": {"route": "sim/large", "temperature": 0.0, **sim}, "on": ["tool_error"]}}
    for config, skipped in ((hot, 0), (cold, None)):
        report = evaluate_variant(compile_agent(config, tool={"source": "bfcl"}, model={"route": "sim/small", "temperature": 0.0, **sim}),
                                  WORKLOAD, "dev", tasks=DEV, samples=2, seed=0)
        assert (report.metrics["samples_skipped"] == 0) if skipped == 0 else report.metrics["samples_skipped"] > 0


def test_a_review_step_is_answered_by_the_stronger_route() -> None:
    agent, tool, model = configs()
    agent["escalation"] = {"model": {"route": "script/esc_fixer"}, "on": ["review"]}
    v = compile_agent(agent, tool=tool, model={**model, "route": "script/esc_fixer"})
    traj = play(v)
    assert [e[1] for e in traj.escalations] == ["review", "review"]
    for turn in (0, 1):
        calls = [c for c in traj.model_calls if c.turn == turn]
        assert [c.escalated for c in calls] == [False, False, True]  # the call, the first answer, the answer after the step


def test_the_escalation_is_hashed_without_how_its_route_is_reached() -> None:
    agent, tool, model = configs()
    plain = compile_agent(agent, tool=tool, model=model)
    assert "escalation" not in plain.hashed_payload() and plain.escalation is None

    def with_escalation(**route: Any) -> HarnessVariant:
        return compile_agent({**agent, "escalation": {"model": {"route": "sim/large", **route}, "on": ["tool_error"]}},
                             tool=tool, model=model)

    a, slower = with_escalation(), with_escalation(timeout_s=90.0)
    assert a.content_hash == slower.content_hash != plain.content_hash
    assert with_escalation(temperature=0.5).content_hash != a.content_hash
    other = compile_agent({**agent, "escalation": {"model": {"route": "sim/large"}, "on": ["tool_error", "review"]}},
                          tool=tool, model=model)
    assert other.content_hash != a.content_hash
    again = HarnessVariant.from_dict(json.loads(json.dumps(a.to_dict())))
    assert again.content_hash == a.content_hash and again.escalation == a.escalation
    forged = a.to_dict()
    forged["escalation"]["model"]["route"] = "openai/gpt-4o"
    with pytest.raises(ValueError, match="does not match its hash"):
        HarnessVariant.from_dict(forged)


@pytest.mark.parametrize(("escalation", "where", "message"), [
    ({"model": {"route": "sim/large"}, "on": ["tool_errors"]}, "agent.escalation.on", "unknown trigger 'tool_errors'"),
    ({"model": {"route": "sim/large"}, "on": []}, "agent.escalation.on", "non-empty list"),
    ({"model": {"route": "sim/large"}, "on": "tool_error"}, "agent.escalation.on", "non-empty list"),
    ({"model": "sim_large"}, "agent.escalation.model", "must be a model config"),
    ({"model": {"route": "large"}}, "agent.escalation.model.route", "not a litellm model string"),
    ({"model": {"route": "sim/large", "timeout_s": -1}}, "agent.escalation.model.timeout_s", "out of range"),
    ({"model": {"route": "sim/large", "temperature": float("nan")}}, "agent.escalation.model.temperature", "must be in"),
    ({"model": {"route": "sim/large", "api_key": "sk-live-0123456789abcdef"}}, "agent.escalation.model.api_key", "credential"),
    ({"model": {"route": "sim/large"}, "when": ["tool_error"]}, "agent.escalation.when", "not an escalation setting"),
])
def test_a_bad_escalation_is_refused_in_one_line_naming_the_value(escalation: dict[str, Any], where: str, message: str) -> None:
    agent, tool, model = configs()
    with pytest.raises(ConfigError, match=message) as err:
        compile_agent({**agent, "escalation": escalation}, tool=tool, model=model)
    assert str(err.value).startswith(where) and "\n" not in str(err.value)
    assert "sk-live" not in str(err.value)

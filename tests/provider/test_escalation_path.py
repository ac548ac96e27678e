"""Escalation on the path a real user takes: two routes of an OpenAI-compatible server on
loopback, reached through litellm, each call billed at its own route's price."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.search.records.summary import part_costs
from tests.provider.stub import StubProvider, completion, message_tokens, respond
from tests.provider.test_real_path import PRICE_IN, PRICE_OUT, errors, model, record, run

pytestmark = pytest.mark.slow

STRONG_IN, STRONG_OUT = 2e-5, 6e-5


def strong(stub: StubProvider) -> list[str]:
    at = "agent.escalation.model"
    return ["+model@agent.escalation.model=sim_large", f"{at}.route=openai/desk-agent-2", f"{at}.api_base={stub.url}",
            f"{at}.api_key_env=STUB_KEY", f"{at}.temperature=0.0", f"{at}.send_episode_id=false", f"{at}.retries=2",
            f"{at}.backoff_s=0.01", f"{at}.input_cost_per_token={STRONG_IN}", f"{at}.output_cost_per_token={STRONG_OUT}"]


def billed(body: dict) -> float:
    usage = completion(body, respond(body))["usage"]
    price_in, price_out = (STRONG_IN, STRONG_OUT) if body["model"] == "desk-agent-2" else (PRICE_IN, PRICE_OUT)
    return usage["prompt_tokens"] * price_in + usage["completion_tokens"] * price_out


def test_a_turn_out_of_calls_goes_to_the_stronger_route_and_each_call_is_billed_at_its_routes_price(
        stub: StubProvider, tmp_path: Path) -> None:
    proc = run(tmp_path, "evaluate", *model(stub), *strong(stub), "agent.max_turns=1", "agent.escalation.on=[max_turns]",
               "workload.split=dev", "workload.limit=3", "workload.samples=1")
    assert proc.returncode == 0, proc.stderr
    by_model = {m: [b for b in stub.answered() if b["model"] == m] for m in ("desk-agent-1", "desk-agent-2")}
    assert by_model["desk-agent-1"] and by_model["desk-agent-2"]  # the stronger route was called, by its own name
    assert all(b["temperature"] == 0.0 for b in by_model["desk-agent-2"])  # with its own parameters
    assert all("user" not in b for b in stub.requests)
    rec = record(tmp_path)
    episodes = rec["episodes"]
    assert all(e["escalations"] for e in episodes) and {t for e in episodes for _, t in e["escalations"]} == {"max_turns"}
    strong_cost = sum(billed(b) for b in by_model["desk-agent-2"])
    assert sum(e["escalated_cost_usd"] for e in episodes) == pytest.approx(strong_cost, rel=1e-9)
    assert rec["billing"]["billed_cost"] == pytest.approx(strong_cost + sum(billed(b) for b in by_model["desk-agent-1"]), rel=1e-9)
    assert rec["metrics"]["cost.escalated"] == pytest.approx(strong_cost / len(episodes), rel=1e-9)
    # the cheaper route's prompts at its input price; the escalated calls a part of their own; the parts add up
    own_prompts = sum(completion(b, respond(b))["usage"]["prompt_tokens"] for b in by_model["desk-agent-1"]) * PRICE_IN
    assert rec["metrics"]["cost.input"] == pytest.approx(own_prompts / len(episodes), rel=1e-9)
    costs = part_costs(rec["metrics"])
    assert costs is not None and costs["escalated"] == pytest.approx(strong_cost / len(episodes), rel=1e-9)
    own_output = sum(completion(b, respond(b))["usage"]["completion_tokens"] for b in by_model["desk-agent-1"]) * PRICE_OUT
    assert costs["output"] == pytest.approx(own_output / len(episodes), rel=1e-9)
    # the escalated calls' tokens, input and output, are their own part: the own route's output is apart
    strong_tokens = sum(completion(b, respond(b))["usage"]["total_tokens"] for b in by_model["desk-agent-2"])
    assert rec["metrics"]["tokens.escalated"] == pytest.approx(strong_tokens / len(episodes), abs=1.0)
    # the own route's system prompt costs what the server's prompt tokens for its system messages cost (near: the
    # record splits each request by its parts' characters, the server counts the messages' JSON)
    own_system = message_tokens(by_model["desk-agent-1"], "system") * PRICE_IN / len(episodes)
    assert own_system > 0 and costs["system"] == pytest.approx(own_system, rel=0.2)
    # a rerun reads every reply from the response cache, the escalated ones included
    calls = stub.calls()
    again = run(tmp_path, "evaluate", *model(stub), *strong(stub), "agent.max_turns=1", "agent.escalation.on=[max_turns]",
                "workload.split=dev", "workload.limit=3", "workload.samples=1")
    assert again.returncode == 0, again.stderr
    assert stub.calls() == calls and record(tmp_path)["billing"]["billed_cost"] == 0.0


def test_a_literal_key_for_the_stronger_route_is_refused_before_any_call(stub: StubProvider, tmp_path: Path) -> None:
    proc = run(tmp_path, "evaluate", *model(stub), *strong(stub), "+agent.escalation.model.api_key=sk-live-0123456789abcdef",
               "workload.split=dev", "workload.limit=1")
    assert proc.returncode == 2 and stub.calls() == 0
    assert errors(proc) and "agent.escalation" in errors(proc)[0] and "sk-live" not in proc.stderr + proc.stdout
    assert not json.dumps([str(p) for p in tmp_path.rglob("*")]).count("sk-live")

"""The OpenAI-compatible HTTP endpoint: same answers as the in-process route, faults as statuses."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from evoharness.compiler.runtime.llm import litellm_module
from evoharness.compiler.sim.faults import configure_sim, reset_sim
from evoharness.compiler.sim.provider import register_sim_provider
from evoharness.compiler.sim.server import BackgroundServer, main
from tests.compiler.sim.sim_selfplay import openai_tools
from tests.compiler.sim.test_sim_fixtures import GOLD, SPECS, USER, converse, start

lm = litellm_module()


@pytest.fixture()
def server():
    handler = register_sim_provider()
    previous, handler.gold = handler.gold, GOLD
    reset_sim()
    configure_sim(None, time_scale=0.0)
    with BackgroundServer(GOLD) as srv:
        yield srv
    handler.gold = previous
    reset_sim()


def post(srv: BackgroundServer, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(f"{srv.api_base}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_http_route_equals_in_process_route_over_a_multi_turn_conversation(server):
    local = asyncio.run(converse(lm, "sim/small"))
    remote = asyncio.run(converse(lm, "openai/sim/small", api_base=server.api_base, api_key="sk-local"))
    assert [reason for _, _, reason, *_ in local].count("stop") == 3  # every turn of TASK was played
    assert any(calls for _, calls, *_ in local)
    assert remote == local  # content, tool calls, finish reasons and usage
    r = asyncio.run(lm.acompletion(model="openai/sim/small", api_base=server.api_base, api_key="sk-local",
                                   messages=start(), tools=openai_tools(SPECS), temperature=0, user=USER))
    assert lm.completion_cost(completion_response=r) > 0


def test_models_and_raw_completion(server):
    with urllib.request.urlopen(f"{server.api_base}/models", timeout=10) as resp:
        assert [m["id"] for m in json.loads(resp.read())["data"]] == ["sim/small", "sim/medium", "sim/large"]
    status, body = post(server, {"model": "small", "messages": start(), "tools": openai_tools(SPECS), "user": USER,
                                 "temperature": 0})
    assert status == 200 and body["model"] == "sim/small"
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "ls"
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]


@pytest.mark.parametrize(("knob", "status", "exc"), [("timeout_rate", 504, "Timeout"),
                                                     ("server_error_rate", 500, "InternalServerError"),
                                                     ("rate_limit_rate", 429, "RateLimitError")])
def test_faults_are_http_statuses_litellm_maps_back(server, knob, status, exc):
    configure_sim("sim/small", **{knob: 1.0})
    assert post(server, {"model": "sim/small", "messages": start(), "user": USER})[0] == status
    with pytest.raises(getattr(lm, exc)):
        lm.completion(model="openai/sim/small", api_base=server.api_base, api_key="sk-local", messages=start(),
                      user=USER, max_retries=0, num_retries=0)


def test_bad_requests(server):
    status, body = post(server, {"model": "sim/small", "messages": start()})
    assert status == 400 and "task_id=<workload>/<id>" in body["error"]["message"]
    assert post(server, {"model": "sim/small", "messages": start(), "user": USER, "stream": True})[0] == 400
    assert post(server, {"model": "sim/xl", "messages": start(), "user": USER})[0] == 400
    assert post(server, {"messages": "nope"})[0] == 400


def test_main_rejects_bad_knobs():
    with pytest.raises(SystemExit) as info:
        main(["--port", "0", "--timeout-rate", "2"])
    assert info.value.code == 2


def test_per_request_sim_faults_over_http(server):
    assert post(server, {"model": "sim/small", "messages": start(), "user": USER,
                         "sim_faults": {"server_error_rate": 1.0}})[0] == 500
    with pytest.raises(lm.InternalServerError):
        lm.completion(model="openai/sim/small", api_base=server.api_base, api_key="sk-local", messages=start(),
                      user=USER, max_retries=0, num_retries=0, extra_body={"sim_faults": {"server_error_rate": 1.0}})

from __future__ import annotations

from typing import Any

import pytest

from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.variant import compile_agent
from tests.compiler.fixtures import configs


@pytest.mark.parametrize("route, opt_in, sent", [("openai/gpt-4o-mini", None, False), ("anthropic/claude-3-haiku", False, False),
                                                 ("sim/small", True, True), ("openai/sim/small", True, True)])
def test_the_episode_id_goes_only_to_routes_that_opt_in(route: str, opt_in: bool | None, sent: bool) -> None:
    agent, tool, model = configs()
    model = {**model, "route": route, **({} if opt_in is None else {"send_episode_id": opt_in})}
    v = compile_agent(agent, tool=tool, model=model)
    req = ModelClient(v.model, v.route).request([{"role": "user", "content": "hi"}], [], "task_id=bfcl/multi_turn_base_3")
    assert ("user" in req) is sent and (not sent or req["user"].startswith("task_id=bfcl/"))
    assert "bfcl/multi_turn_base_3" not in str({k: v for k, v in req.items() if k != "user"})


def test_the_opt_in_is_not_part_of_the_variant_hash() -> None:
    agent, tool, model = configs()
    a = compile_agent(agent, tool=tool, model={**model, "send_episode_id": True})
    b = compile_agent(agent, tool=tool, model={**model, "send_episode_id": False})
    assert a.content_hash == b.content_hash and a.route.send_episode_id and not b.route.send_episode_id


@pytest.mark.parametrize("stored", ["{truncated", "[1, 2]", '{"content": 3}', '{"content": null, "tool_calls": [{"id": "a"}]}',
                                    '{"content": "x", "tool_calls": [], "latency_s": "slow"}', b"\xff\xfe".decode("latin-1")])
def test_a_cache_entry_that_is_not_a_reply_is_a_miss(tmp_path: Any, stored: str) -> None:
    from evoharness.compiler.runtime.cache import ResponseCache

    cache = ResponseCache(tmp_path)
    good = {"content": "hi", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 1,
            "latency_s": 0.1, "cost_usd": 0.0, "attempts": 1, "infra_s": 0.0}
    cache.put("ab" * 32, good)
    assert cache.get("ab" * 32) == good
    (tmp_path / "ab" / f"{'ab' * 32}.json").write_text(stored, encoding="latin-1")
    assert cache.get("ab" * 32) is None


def test_the_memoised_request_key_is_the_plain_one_and_sees_every_change() -> None:
    from evoharness.compiler.runtime.cache import RequestKeyer, request_key

    agent, tool, model = configs()
    v = compile_agent(agent, tool=tool, model={**model, "route": "sim/small"})
    client = ModelClient(v.model, v.route)
    tools = v.native_tools_for(None)
    keyer = RequestKeyer()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "é ünïcode \u2028"}, {"role": "user", "content": "hi"}]
    first = client.request(messages, tools, "u")
    assert first["tools"] is not tools and keyer(first, tools=tools) == request_key(first)
    messages.append({"role": "assistant", "content": "ok", "tool_calls": []})
    second = client.request(messages, tools, "u")
    assert keyer(second, tools=tools) == request_key(second) != request_key(first)  # the memoised tools and new messages both count
    assert len(keyer._tools) == 1  # one text per list of the variant, not one per request
    fewer = v.native_tools_for([tools[0]["function"]["name"]])
    third = client.request(messages, fewer, "u")
    assert keyer(third, tools=fewer) == request_key(third) != keyer(second, tools=tools)
    revised = {**second, "route_revision": {"revision": "2"}}
    assert keyer(revised, tools=tools) == request_key(revised) and keyer(first) == request_key(first)


def test_model_extra_cannot_replace_what_the_harness_sends() -> None:
    """model.extra holds generation parameters: the tools, messages, endpoint and key are the harness's.
    Refused at compile, and by the client itself for a variant built some other way."""
    from evoharness.compiler.errors import ConfigError
    from evoharness.compiler.route import ModelParams, RouteSettings

    agent, tool, model = configs()
    for key, value in (("tools", [{"type": "function", "name": "X"}]), ("messages", []), ("api_base", "http://127.0.0.1:1/v1"),
                       ("mock_response", "hi"), ("user", "u")):
        with pytest.raises(ConfigError, match=f"model.extra.{key}"):
            compile_agent(agent, tool=tool, model={**model, "route": "sim/small", "extra": {key: value}})
        with pytest.raises(ConfigError, match=f"model.extra.{key}"):
            ModelClient(ModelParams(route="sim/small", extra={key: value}), RouteSettings())
    ok = compile_agent(agent, tool=tool, model={**model, "route": "sim/small", "extra": {"top_p": 0.5, "sim_faults": {}}})
    assert ModelClient(ok.model, ok.route).request([{"role": "user", "content": "hi"}], [], "u")["top_p"] == 0.5
    with pytest.raises(ConfigError, match="model.extra.sim_faults"):  # a provider's own parameter, on another provider's route
        compile_agent(agent, tool=tool, model={**model, "route": "openai/gpt-4o-mini", "extra": {"sim_faults": {}}})
def test_a_memoised_message_changed_after_it_was_sent_is_keyed_as_it_is_now() -> None:
    """A message's text is reused only while the message holds the same values: a replaced, added or
    removed value is encoded afresh, and the key stays the plain one."""
    from evoharness.compiler.runtime.cache import RequestKeyer, request_key

    keyer = RequestKeyer()
    system = {"role": "system", "content": "be brief"}
    messages: list[Any] = [system, {"role": "user", "content": "hi"}]
    before = keyer({"model": "m", "messages": list(messages)})
    assert before == request_key({"model": "m", "messages": messages})
    system["content"] = "be thorough"  # replaced in place
    assert keyer({"model": "m", "messages": list(messages)}) == request_key({"model": "m", "messages": messages}) != before
    system["name"] = "ops"  # added
    assert keyer({"model": "m", "messages": list(messages)}) == request_key({"model": "m", "messages": messages})
    del system["name"]
    system["content"] = "be brief"
    assert keyer({"model": "m", "messages": list(messages)}) == before
    messages.append(["not", "a", "dict"])  # whatever a caller sends is keyed as sent
    assert keyer({"model": "m", "messages": list(messages)}) == request_key({"model": "m", "messages": messages})


def test_the_message_memo_is_bounded() -> None:
    from evoharness.compiler.runtime.cache import RequestKeyer, request_key

    keyer = RequestKeyer()
    messages = [{"role": "user", "content": str(i)} for i in range(RequestKeyer.MESSAGES_HELD + 50)]
    assert keyer({"messages": messages}) == request_key({"messages": messages})
    assert len(keyer._messages) == RequestKeyer.MESSAGES_HELD
    assert keyer({"messages": messages[:3]}) == request_key({"messages": messages[:3]})  # evicted ones are encoded again

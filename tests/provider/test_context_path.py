"""The context policy on the path a real user takes: an OpenAI-compatible server on loopback, reached
through litellm, told nothing but what a provider is told. What the server received is checked
against what the policy says it may be sent (a clipped result, a compacted earlier turn, a subset of
the tools), against the record, and against the bill the server's own usage figures make."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.context_policy import MIN_CHARS, clipped_parts, is_clipped
from evoharness.search.records.format import fmt_metric
from evoharness.search.records.summary import part_costs, tokens_line
from tests.provider.stub import StubProvider, completion, message_tokens, respond
from tests.provider.test_real_path import PRICE_IN, PRICE_OUT, model, record, run

pytestmark = pytest.mark.slow

ITEMS = ("lamp", "mug", "chair", "desk", "book", "kettle", "shirt", "phone", "rug", "vase")
TOOLS = {"find_order", "order_status", "refund", "cancel_order"}


def tasks(tmp: Path, n: int = 3) -> Path:
    """Two-turn tasks whose customer has ten orders, so find_order's result runs to about 1,000
    characters: cancel one order, then ask another's status."""
    rows = []
    for i in range(n):
        email = f"kim{i}@example.com"
        orders = {f"A-{500 + 10 * i + k}": {"customer": email, "status": "paid" if k % 2 else "shipped", "total": 10 + k,
                                            "item": item} for k, item in enumerate(ITEMS)}
        cancel, ask = f"A-{501 + 10 * i}", f"A-{500 + 10 * i}"
        after = {oid: ({**o, "status": "cancelled"} if oid == cancel else o) for oid, o in orders.items()}
        rows.append({"id": f"window_{i}", "split": "dev", "stratum": "cancel", "state": {"orders": orders},
                     "expected_state": {"orders": after},
                     "turns": [f"This is {email}. Please cancel my mug order, it hasn't shipped.",
                               "Thanks. What is the status of my lamp order now?"],
                     "expected_calls": [[{"name": "find_order", "arguments": {"customer": email}},
                                         {"name": "cancel_order", "arguments": {"order_id": cancel}}],
                                        [{"name": "order_status", "arguments": {"order_id": ask}}]],
                     "answers": [None, "shipped"]})
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "long_orders.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def evaluate(stub: StubProvider, tmp: Path, *policy: str) -> dict[str, Any]:
    proc = run(tmp, "evaluate", *model(stub, temperature=0.0), f"workload.options.path={tasks(tmp)}", "workload.samples=1",
               *policy)
    assert proc.returncode == 0, proc.stderr
    return record(tmp)


def transcripts(tmp: Path) -> list[dict[str, Any]]:
    found = sorted((tmp / "runs").rglob("eval.transcripts.jsonl.gz"), key=lambda p: p.stat().st_mtime)
    assert found, "no transcripts written"
    return [json.loads(line) for line in gzip.decompress(found[-1].read_bytes()).splitlines()]


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in body["messages"] if m.get("role") == "tool"]


def user_turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m.get("role") == "user")


def billed(bodies: list[dict[str, Any]]) -> float:
    """The bill the server's own usage figures make for these requests, at the test's prices."""
    usage = [completion(b, respond(b))["usage"] for b in bodies]
    return sum(u["prompt_tokens"] * PRICE_IN + u["completion_tokens"] * PRICE_OUT for u in usage)


def test_a_clipped_result_is_what_the_server_receives_and_the_bill_is_its_usage(stub: StubProvider, tmp_path: Path) -> None:
    whole = evaluate(stub, tmp_path / "whole")
    sent_whole = [t for b in stub.answered() for t in tool_messages(b)]
    assert sent_whole and max(map(len, sent_whole)) > 900 and not any(map(is_clipped, sent_whole))
    first = len(stub.requests)

    clipped = evaluate(stub, tmp_path / "clip", "+agent.context.tool_result_chars.find_order=300")
    bodies = stub.answered()[first:]
    long = [t for b in bodies for t in tool_messages(b) if is_clipped(t)]
    assert long, "no clipped result reached the server"
    for text in long:  # head and tail of the result, 300 characters between them, and the cut said in their place
        head, tail = clipped_parts(text) or ("", "")
        assert len(head) + len(tail) == 300 and head.startswith("[") and tail.endswith("]")
        assert "characters of this result not shown" in text
    # the record says what was cut, and it is what the server was not sent; the tool's whole output is counted
    for episode in clipped["episodes"]:
        calls, chars, _ = episode["tool_output"]["find_order"]
        assert calls == 1 and chars > 900 and episode["cut_chars"] == chars - 300
    sent = {t for b in bodies for t in tool_messages(b)}
    assert {m["content"] for t in transcripts(tmp_path / "clip") for m in t["messages"] if m["role"] == "tool"} <= sent
    # the bill is the server's usage at the configured price, and a clip makes it smaller
    assert clipped["billing"]["billed_cost"] == pytest.approx(billed(bodies), rel=1e-9)
    assert whole["billing"]["billed_cost"] == pytest.approx(billed(stub.answered()[:first]), rel=1e-9)
    assert clipped["metrics"]["tokens_per_task"] < whole["metrics"]["tokens_per_task"]
    # what the prompts cost is the server's prompt tokens at the input price; the parts add up to the bill
    prompts = sum(completion(b, respond(b))["usage"]["prompt_tokens"] for b in bodies) * PRICE_IN
    assert clipped["metrics"]["cost.input"] == pytest.approx(prompts / len(clipped["episodes"]), rel=1e-9)
    costs = part_costs(clipped["metrics"])
    outputs = sum(completion(b, respond(b))["usage"]["completion_tokens"] for b in bodies) * PRICE_OUT
    assert costs is not None and costs["output"] == pytest.approx(outputs / len(clipped["episodes"]), rel=1e-9)
    # the tool results' dollars are what the server's prompt tokens cost for the tool messages it was sent (the
    # record splits each request by its parts' characters, the server counts the messages' JSON: near, not equal)
    assert costs["tool_results"] == pytest.approx(message_tokens(bodies) * PRICE_IN / len(clipped["episodes"]), rel=0.2)
    assert (part_costs(whole["metrics"]) or {})["tool_results"] > costs["tool_results"] > 0
    # the same clip again is read from the response cache: nothing new is sent or billed
    calls = stub.calls()
    again = evaluate(stub, tmp_path / "clip", "+agent.context.tool_result_chars.find_order=300")
    assert again["billing"]["billed_cost"] == 0.0 and stub.calls() == calls
    assert again["metrics"]["cost.input"] == pytest.approx(clipped["metrics"]["cost.input"], rel=1e-12)
    # replies cached before each call's prompt cost was kept: read back with it worked out from the route's price
    for path in (tmp_path / "clip" / "cache").glob("??/*.json"):
        path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "input_cost_usd"}))
    shutil.rmtree(tmp_path / "clip" / "cache" / "episodes")
    old = evaluate(stub, tmp_path / "clip", "+agent.context.tool_result_chars.find_order=300")
    assert stub.calls() == calls and old["metrics"]["cost.input"] == pytest.approx(clipped["metrics"]["cost.input"], rel=1e-9)


def test_a_turn_outside_the_window_reaches_the_server_compacted_and_the_record_keeps_it_whole(
        stub: StubProvider, tmp_path: Path) -> None:
    rec = evaluate(stub, tmp_path, "agent.context.keep_turns=1")
    second = [b for b in stub.answered() if user_turns(b) == 2]
    assert second, "no request of a second turn"
    for body in second:
        earlier = tool_messages(body)[0]  # find_order's result, called in the first turn
        head, tail = clipped_parts(earlier) or ("", "")
        assert len(head) + len(tail) == MIN_CHARS and "results of earlier turns are clipped" in earlier
    first = [b for b in stub.answered() if user_turns(b) == 1 and tool_messages(b)]
    assert first and all(not is_clipped(t) for b in first for t in tool_messages(b))
    assert all(len(tool_messages(b)[0]) > 900 for b in first)  # find_order's, whole in its own turn
    # the record keeps the first turn's result as that turn was sent it, and counts what later turns were not
    kept = [m["content"] for t in transcripts(tmp_path) for m in t["messages"] if m["role"] == "tool"]
    assert kept and not any(map(is_clipped, kept)) and max(map(len, kept)) > 900
    for episode in rec["episodes"]:
        assert episode["turns"] == 2 and episode["cut_chars"] == episode["tool_output"]["find_order"][1] - MIN_CHARS


def test_a_turn_is_offered_the_tools_it_names_and_those_it_called(stub: StubProvider, tmp_path: Path) -> None:
    every = evaluate(stub, tmp_path / "every")
    first = len(stub.requests)
    rec = evaluate(stub, tmp_path / "subset", "agent.context.tools_per_turn=1")
    offered = [({t["function"]["name"] for t in b.get("tools") or []}, b) for b in stub.answered()[first:]]
    assert offered and all(names < TOOLS for names, _ in offered)  # never the whole catalogue
    for names, body in offered:
        called = {c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []}
        assert called <= names and len(names - called) <= 1
    # the record's tool-schema characters are what was offered, fewer than the whole catalogue's
    def schemas(r: dict[str, Any]) -> int:
        return sum(e["input_parts"]["tools"] for e in r["episodes"])
    assert 0 < schemas(rec) < schemas(every)


def test_on_a_route_with_its_own_price_every_prompt_token_is_billed_alike_and_split_by_part(
        stub: StubProvider, tmp_path: Path) -> None:
    """The route's own price bills a prompt token the provider read from its cache like any other:
    none is at a cache rate, and the prompts' cost is split by part as the bill makes it."""
    stub.caches = True
    rec = evaluate(stub, tmp_path)
    assert stub.cached[0] == 0 and sum(stub.cached) > 0  # the first request of the run is a miss, later ones read the tools
    assert rec["billing"]["billed_cost"] == pytest.approx(billed(stub.answered()), rel=1e-9)
    assert rec["metrics"]["tokens.cached"] == 0 and all(e["cached_tokens"] == 0 for e in rec["episodes"])
    assert part_costs(rec["metrics"]) is not None and "%, $" in (tokens_line("incumbent", rec["metrics"]) or "")


def test_a_route_litellm_prices_bills_the_tokens_the_provider_cached_at_the_cache_rate(stub: StubProvider, tmp_path: Path) -> None:
    """On a route priced by litellm's own map (no price in the config), the prompt tokens the server
    reports cached are billed at the map's cache-read rate: the bill is what the provider charges."""
    import litellm

    from evoharness.compiler.runtime.llm import ensure_providers

    ensure_providers()
    price = litellm.model_cost["gpt-4o-mini"]
    assert price["cache_read_input_token_cost"] < price["input_cost_per_token"]
    stub.caches = True
    routed = [o.replace("openai/desk-agent-1", "openai/gpt-4o-mini") for o in model(stub, temperature=0.0, priced=False)]
    proc = run(tmp_path, "evaluate", *routed, f"workload.options.path={tasks(tmp_path)}", "workload.samples=1")
    assert proc.returncode == 0, proc.stderr
    rec = record(tmp_path)
    usage = [completion(b, respond(b), cached=c)["usage"] for b, c in zip(stub.answered(), stub.cached, strict=True)]
    assert sum(u.get("prompt_tokens_details", {}).get("cached_tokens", 0) for u in usage) > 0
    bill = sum((u["prompt_tokens"] - u.get("prompt_tokens_details", {}).get("cached_tokens", 0)) * price["input_cost_per_token"]
               + u.get("prompt_tokens_details", {}).get("cached_tokens", 0) * price["cache_read_input_token_cost"]
               + u["completion_tokens"] * price["output_cost_per_token"] for u in usage)
    assert rec["billing"]["billed_cost"] == pytest.approx(bill, rel=1e-6)
    # the prompts' cost keeps the discount; it is given whole, not split by part
    outputs = sum(u["completion_tokens"] for u in usage) * price["output_cost_per_token"]
    assert rec["metrics"]["cost.input"] == pytest.approx((bill - outputs) / len(rec["episodes"]), rel=1e-6)
    # which parts the cached tokens were is not known: the record keeps their count, the answer gives the
    # prompts' cost whole instead of a split by tokens that would misplace the discount
    episodes = rec["episodes"]
    assert sum(e["cached_tokens"] for e in episodes) == sum(stub.cached)
    assert rec["metrics"]["tokens.cached"] == pytest.approx(sum(stub.cached) / len(episodes), rel=1e-9)
    assert part_costs(rec["metrics"]) is None
    line = tokens_line("incumbent", rec["metrics"]) or ""
    assert "prompt tokens at the provider's cache rate" in line and "not split by part" in line and "%, $" not in line
    assert fmt_metric(rec["metrics"]["cost.input"], "cost_per_task") in line
    # replies cached before the count was kept: whether any token was at a cache rate is not known, so no split
    for path in (tmp_path / "cache").glob("??/*.json"):
        path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "cached_prompt_tokens"}))
    shutil.rmtree(tmp_path / "cache" / "episodes")
    calls = stub.calls()
    proc = run(tmp_path, "evaluate", *routed, f"workload.options.path={tasks(tmp_path)}", "workload.samples=1")
    assert proc.returncode == 0 and stub.calls() == calls, proc.stderr
    old = record(tmp_path)
    assert "tokens.cached" not in old["metrics"] and part_costs(old["metrics"]) is None
    assert "recorded before the prompt tokens at a provider's cache rate were counted" in (tokens_line("incumbent", old["metrics"]) or "")


def test_a_model_litellm_lists_at_zero_is_reported_unpriced_not_free(stub: StubProvider, tmp_path: Path) -> None:
    """litellm answers for a model it maps without prices with zeros: its calls cost an unknown amount."""
    from evoharness.compiler.runtime.llm import ensure_providers

    ensure_providers().register_model({"openai/desk-agent-zero": {"litellm_provider": "openai", "mode": "chat",
                                                                  "input_cost_per_token": 0.0, "output_cost_per_token": 0.0}})
    routed = [o.replace("openai/desk-agent-1", "openai/desk-agent-zero") for o in model(stub, temperature=0.0, priced=False)]
    proc = run(tmp_path, "evaluate", *routed, f"workload.options.path={tasks(tmp_path)}", "workload.samples=1")
    assert proc.returncode == 0, proc.stderr
    rec = record(tmp_path)
    assert stub.answered() and rec["priced"] is False and "cost_per_task" not in rec["metrics"]
    assert all(e["cost_usd"] is None for e in rec["episodes"])


def test_a_corrected_price_applies_to_replies_cached_before_it_and_nothing_is_paid_again(
        stub: StubProvider, tmp_path: Path) -> None:
    """The route's own price is not part of a reply's cache key (the reply does not depend on it): a
    rerun at a corrected price reads every reply from the cache and costs them at the new price."""
    first = evaluate(stub, tmp_path)
    calls = stub.calls()
    doubled = [o.replace(f"input_cost_per_token={PRICE_IN}", f"input_cost_per_token={2 * PRICE_IN}")
               .replace(f"output_cost_per_token={PRICE_OUT}", f"output_cost_per_token={2 * PRICE_OUT}")
               for o in model(stub, temperature=0.0)]
    proc = run(tmp_path, "evaluate", *doubled, f"workload.options.path={tasks(tmp_path)}", "workload.samples=1")
    assert proc.returncode == 0, proc.stderr
    again = record(tmp_path)
    assert stub.calls() == calls and again["billing"]["billed_cost"] == 0.0
    assert again["metrics"]["cost_per_task"] == pytest.approx(2 * first["metrics"]["cost_per_task"], rel=1e-9)
    assert again["metrics"]["cost.input"] == pytest.approx(2 * first["metrics"]["cost.input"], rel=1e-9)
    # and back at the first price: the episodes stored at it replay as they were
    back = evaluate(stub, tmp_path)
    assert stub.calls() == calls and back["metrics"]["cost_per_task"] == pytest.approx(first["metrics"]["cost_per_task"], rel=1e-12)

"""A context policy's tools_per_turn: each turn is offered the tools its user messages point at and
the ones the episode called, on a recorded conversation in both formats; the request is smaller,
and nothing changes without the setting."""
from __future__ import annotations

import json
from typing import Any

import pytest

from evoharness.compiler.context_policy import ContextPolicy
from evoharness.compiler.errors import ConfigError
from tests.compiler.runtime.scripted_model import SCRIPTS
from tests.compiler.runtime.test_runtime import gold_player, provider, run, turn_of, variant  # noqa: F401 (fixture)


def played(fmt: str, **agent_edits: Any) -> tuple[Any, list[tuple[list[dict[str, Any]], list[str]]]]:
    """The episode, and every request as (messages, the tool names it offered)."""
    seen: list[tuple[list[dict[str, Any]], list[str]]] = []
    play = gold_player(fmt)

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system = str(messages[0]["content"])
        names = ([t["function"]["name"] for t in tools] if tools else
                 [n for n in ("ls", "mv", "tail") if f"\n{n} " in system or f"`{n}" in system or f"{n}(" in system])
        seen.append((json.loads(json.dumps(messages)), names))
        return play(messages, tools)

    name = f"turn_tools_{fmt}_{len(SCRIPTS)}"
    SCRIPTS[name] = script
    traj, _ = run(variant(fmt, f"script/{name}", **agent_edits))
    return traj, seen


def test_each_turn_is_offered_the_tools_its_words_point_at_and_those_called_before() -> None:
    whole, whole_seen = played("json")
    narrow, narrow_seen = played("json", context={"tools_per_turn": 1})
    assert all(names == ["ls", "mv", "tail"] for _, names in whole_seen)
    by_turn: dict[int, set[str]] = {}
    for messages, names in narrow_seen:
        by_turn.setdefault(turn_of(messages), set()).update(names)
    # "Move report.pdf to archive." -> mv; "Show the last 2 lines of log.txt" -> tail, and mv, called in turn 0
    assert by_turn == {0: {"mv"}, 1: {"mv", "tail"}}
    assert [c.name for c in narrow.tool_calls] == [c.name for c in whole.tool_calls] == ["mv", "tail"]
    # fewer schemas on every call (the scripted model counts only messages as prompt tokens: the parts say it)
    tools_part = [c.sent_chars[1] for c in narrow.model_calls]
    assert max(tools_part) < min(c.sent_chars[1] for c in whole.model_calls)


def test_in_text_format_the_system_prompt_documents_only_the_turns_tools() -> None:
    _, seen = played("bash", context={"tools_per_turn": 1})
    first = str(seen[0][0][0]["content"])
    assert "Move a file into a directory." in first and "List the files" not in first and "Show the last lines" not in first
    last = str(seen[-1][0][0]["content"])
    assert "Show the last lines of a file." in last and "List the files" not in last


def test_the_choice_reads_words_names_and_rarity_and_never_drops_a_called_tool() -> None:
    docs = {"getStockInfo": "Get the details of a stock.", "place_order": "Place an order for a stock.",
            "send_message": "Send a message to a user.", "cancel_order": "Cancel an order."}
    policy = ContextPolicy(tools_per_turn=1)
    offered = list(docs)
    assert policy.turn_tools(offered, docs, "What is the stock info for NVDA?", []) == ["getStockInfo"]
    assert policy.turn_tools(offered, docs, "Cancel my last order please", []) == ["cancel_order"]
    assert policy.turn_tools(offered, docs, "Cancel my last order please", ["send_message"]) == ["send_message", "cancel_order"]
    assert policy.turn_tools(offered, docs, "", []) == ["getStockInfo"]  # nothing said: the first ones, in order
    assert ContextPolicy().turn_tools(offered, docs, "anything", []) == offered
    assert ContextPolicy(tools_per_turn=9).turn_tools(offered, docs, "x", []) == offered


def test_the_setting_is_hashed_only_when_set_and_bad_values_are_refused() -> None:
    plain = variant("json", "script/none")
    narrow = variant("json", "script/none", context={"tools_per_turn": 3})
    assert plain.content_hash != narrow.content_hash and "tools_per_turn" not in plain.context.to_dict()
    assert ContextPolicy.from_dict(narrow.context.to_dict()) == narrow.context
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ConfigError, match="agent.context.tools_per_turn"):
            variant("json", "script/none", context={"tools_per_turn": bad})
    with pytest.raises(ValueError, match="tools_per_turn=0"):
        ContextPolicy.from_dict({"tools_per_turn": 0})

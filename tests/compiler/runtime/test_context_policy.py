"""The context policy: a tool's long results clipped to a length, as the model is sent them, and
recorded; the variant's hash covers the policy only when there is one."""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from evoharness.compiler.context_policy import MIN_CHARS, ContextPolicy, cut_marker, is_clipped
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.variant import HarnessVariant, compile_agent
from evoharness.search.evaluation.episode import EpisodeResult
from tests.compiler.fixtures import configs
from tests.compiler.runtime.scripted_model import SCRIPTS
from tests.compiler.runtime.test_runtime import FileEnv, gold_player, provider, run, variant  # noqa: F401 (fixture)

LOG = "\n".join(f"line {i:04d} " + "x" * 40 for i in range(200))  # 9,999 characters: its head, middle and tail differ


class LongLogEnv(FileEnv):
    def __init__(self) -> None:
        super().__init__()
        self.files["log.txt"] = LOG

    def call(self, name: str, arguments: Any) -> str:
        if name == "tail":
            return LOG  # the whole log, whatever was asked: one long result
        return super().call(name, arguments)


def sent_results(fmt: str, **agent_edits: Any) -> tuple[Any, list[list[dict[str, Any]]]]:
    """The episode, and every request's messages as the model received them."""
    seen: list[list[dict[str, Any]]] = []
    play = gold_player("json" if fmt == "both" else fmt)

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(json.loads(json.dumps(messages)))
        return play(messages, tools)

    name = f"ctx_{fmt}_{len(SCRIPTS)}"
    SCRIPTS[name] = script
    traj, _ = run(variant(fmt, f"script/{name}", **agent_edits), env=LongLogEnv())
    return traj, seen


def log_sent(messages: list[dict[str, Any]]) -> str:
    """The message that carried the log's result, as the model was sent it."""
    return next(str(m["content"]) for m in messages if "line 0000" in str(m.get("content") or ""))


def test_clip_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    policy = ContextPolicy({"tail": 300})
    sent, cut = policy.clip("tail", LOG)
    assert cut == len(LOG) - 300
    assert sent.startswith(LOG[:200]) and sent.endswith(LOG[-100:]) and cut_marker(cut, 300) in sent
    assert is_clipped(sent) and not is_clipped(LOG)
    assert policy.clip("tail", LOG[:300]) == (LOG[:300], 0)  # at the limit: sent whole
    assert policy.clip("ls", LOG) == (LOG, 0)  # another tool: no limit of its own, none for all
    both = ContextPolicy({"*": 1000, "tail": 400})
    assert both.clip("tail", LOG)[1] == len(LOG) - 400 and both.clip("ls", LOG)[1] == len(LOG) - 1000


@pytest.mark.parametrize("fmt", ["json", "bash"])
def test_the_model_is_sent_the_clipped_result_and_the_record_keeps_the_whole_one(fmt: str) -> None:
    whole, whole_seen = sent_results(fmt)
    clipped, clipped_seen = sent_results(fmt, context={"tool_result_chars": {"tail": 500}})
    sent_whole, sent_clipped = log_sent(whole_seen[-1]), log_sent(clipped_seen[-1])
    assert LOG in sent_whole and not is_clipped(sent_whole)
    assert LOG[4000:4100] not in sent_clipped  # the middle never reaches the model
    assert LOG[:300] in sent_clipped and LOG[-150:] in sent_clipped and is_clipped(sent_clipped)
    tail = [c for c in clipped.tool_calls if c.name == "tail"][0]
    assert tail.result == LOG and tail.cut == len(LOG) - 500  # the record keeps what the tool returned, and says what was cut
    assert [c for c in whole.tool_calls if c.name == "tail"][0].cut == 0
    # every later request re-sends the result: the clip is what saves the tokens
    assert clipped.prompt_tokens < whole.prompt_tokens
    row = EpisodeResult.from_episode(clipped, None)
    assert row.cut_chars == len(LOG) - 500 and row.tool_output["tail"] == (1, len(LOG), len(LOG))
    assert EpisodeResult.from_dict(row.to_dict()) == row


def test_a_policy_is_hashed_only_when_there_is_one() -> None:
    agent, tool, model = configs()
    plain = compile_agent(agent, tool=tool, model=model)
    empty = compile_agent({**agent, "context": {"tool_result_chars": {}}}, tool=tool, model=model)
    assert plain.content_hash == empty.content_hash and "context" not in plain.hashed_payload()
    clipped = compile_agent({**agent, "context": {"tool_result_chars": {"tail": 500}}}, tool=tool, model=model)
    other = compile_agent({**agent, "context": {"tool_result_chars": {"tail": 600}}}, tool=tool, model=model)
    assert len({plain.content_hash, clipped.content_hash, other.content_hash}) == 3
    again = HarnessVariant.from_dict(json.loads(json.dumps(clipped.to_dict())))
    assert again.content_hash == clipped.content_hash and again.context == clipped.context
    forged = {**clipped.to_dict(), "context": {"tool_result_chars": {"tail": 5000}}}
    with pytest.raises(ValueError, match="does not match its hash"):
        HarnessVariant.from_dict(forged)


@pytest.mark.parametrize(("context", "message"), [
    ({"tool_result_chars": {"../etc/passwd": 500}}, "names no tool the agent offers"),
    ({"tool_result_chars": {"tail": MIN_CHARS - 1}}, f"at least {MIN_CHARS}"),
    ({"tool_result_chars": {"tail": -1}}, f"at least {MIN_CHARS}"),
    ({"tool_result_chars": {"tail": 0}}, f"at least {MIN_CHARS}"),
    ({"tool_result_chars": {"tail": True}}, "whole number"),
    ({"tool_result_chars": {"tail": 500.5}}, "whole number"),
    ({"tool_result_chars": {"tail": float("nan")}}, "whole number"),
    ({"window": 3}, "is not a context policy setting"),
])
def test_a_bad_policy_is_refused_in_one_line_naming_the_value(context: dict[str, Any], message: str) -> None:
    agent, tool, model = configs()
    with pytest.raises(ConfigError, match=message) as err:
        compile_agent({**agent, "context": context}, tool=tool, model=model)
    assert str(err.value).startswith("agent.context.") and "\n" not in str(err.value)


def test_each_call_records_what_its_request_held_by_part_and_the_episode_splits_its_input_tokens() -> None:
    whole, seen = sent_results("json")
    clipped, _ = sent_results("json", context={"tool_result_chars": {"tail": 500}})
    calls = whole.model_calls
    assert len(calls) == len(seen)
    for call, messages in zip(calls, seen):
        system, tools, results, rest = call.sent_chars
        assert system == len(messages[0]["content"]) and tools > 0
        assert results == sum(len(str(m["content"])) for m in messages if m["role"] == "tool")
        assert rest >= sum(len(str(m["content"])) for m in messages[1:] if m["role"] == "user")
    assert calls[-1].sent_chars[2] >= len(LOG) and calls[0].sent_chars[2] == 0  # the log rides along once returned
    assert clipped.model_calls[-1].sent_chars[2] < 1000
    row = EpisodeResult.from_episode(whole, None)
    assert set(row.input_parts) == {"system", "tools", "tool_results", "history", "escalated"} and row.input_parts["escalated"] == 0
    assert abs(sum(row.input_parts.values()) - whole.prompt_tokens) <= 4  # each part rounded once
    assert row.input_parts["tool_results"] > EpisodeResult.from_episode(clipped, None).input_parts["tool_results"]
    # a call recorded before the parts were kept: no split is claimed
    old = replace(whole, model_calls=tuple(replace(c, sent_chars=(0, 0, 0, 0)) for c in whole.model_calls))
    assert EpisodeResult.from_episode(old, None).input_parts == {}


def test_a_result_the_marker_would_not_shorten_is_sent_whole() -> None:
    policy = ContextPolicy({"tail": 200})
    for size in (201, 250, 289):  # 289: clipped, it would be 200 + an 89-character marker
        assert policy.clip("tail", "x" * size) == ("x" * size, 0)
    sent, cut = policy.clip("tail", "x" * 400)
    assert cut == 200 and len(sent) < 400


def test_a_stored_policy_is_checked_and_a_config_of_another_shape_is_one_line() -> None:
    for bad in (-5, 0, MIN_CHARS - 1, "abc", True):
        with pytest.raises(ValueError, match="clip length"):
            ContextPolicy.from_dict({"tool_result_chars": {"tail": bad}})
    agent, tool, model = configs()
    for bad in ("abc", {"tool_result_chars": "abc"}):
        with pytest.raises(ConfigError, match="agent.context"):
            compile_agent({**agent, "context": bad}, tool=tool, model=model)


def test_a_result_that_is_not_text_is_recorded() -> None:
    class NumberEnv(FileEnv):
        def call(self, name: str, arguments: Any) -> Any:
            return 12345 if name == "tail" else super().call(name, arguments)

    SCRIPTS["ctx_number"] = gold_player("json")
    traj, _ = run(variant("json", "script/ctx_number"), env=NumberEnv())
    assert EpisodeResult.from_episode(traj, None).tool_output["tail"] == (1, 5, 5)


def test_in_text_format_the_tool_docs_count_as_tools_not_as_the_system_prompt() -> None:
    traj, seen = sent_results("bash")
    v = variant("bash", "script/x")
    system, tools, _, _ = traj.model_calls[0].sent_chars
    assert system == len(v.prompt_body) and tools == len(seen[0][0]["content"]) - len(v.prompt_body) > 0

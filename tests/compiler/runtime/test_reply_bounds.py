"""What a reply leaves in the conversation is bounded, because every later request of the episode carries
it again: reply text past MAX_REPLY_CHARS is clipped with a marker, arguments nested past
MAX_ARGUMENT_DEPTH are refused before any parser sees them and never echoed back, and arguments that did
not decode go back as a JSON object a provider's converter can read. Each is a scored mistake of the
model, recorded on its call, never a crash or an outage."""
from __future__ import annotations

import asyncio
import json
import random
import shlex
import time
from typing import Any, cast

import pytest

from evoharness.compiler.runtime.arguments import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    MAX_REPLY_CHARS,
    decode_json_arguments,
    echoed_arguments,
    too_deep,
)
from evoharness.compiler.runtime.bash_calls import _open_quote, decode_text_calls
from evoharness.compiler.runtime.loop import run_episode
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.reply import ModelReply, NativeCall
from evoharness.compiler.runtime.trajectory import Trajectory
from tests.compiler.runtime.test_runtime import TASK, FileEnv, variant

MB5 = 5_000_000
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_WITHIN_SIZE = "[" * 30_000 + "]" * 30_000  # under MAX_ARGUMENT_CHARS: only its depth is wrong


class Replies:
    """A client that answers from a list and keeps every request it was sent."""

    def __init__(self, replies: list[ModelReply]) -> None:
        self.replies = replies
        self.requests: list[list[dict[str, Any]]] = []

    async def complete(self, messages: list[dict[str, Any]], *, tools: Any, user: str, seed: int | None = None) -> ModelReply:
        self.requests.append(json.loads(json.dumps(messages)))
        return self.replies.pop(0) if self.replies else reply("Done.")


def reply(content: str | None, *calls: NativeCall) -> ModelReply:
    return ModelReply(content=content, tool_calls=calls, finish_reason="tool_calls" if calls else "stop", prompt_tokens=1,
                      completion_tokens=1, cost_usd=0.0, latency_s=0.01)


def play(fmt: str, replies: list[ModelReply]) -> tuple[Trajectory, Replies]:
    fake = Replies(replies)
    traj = asyncio.run(run_episode(variant(fmt, "openai/fake"), TASK, FileEnv(), client=cast(ModelClient, fake)))
    return traj, fake


def size(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages))


@pytest.mark.parametrize("fmt", ["json", "bash"])
def test_a_huge_reply_is_kept_clipped_and_recorded(fmt: str) -> None:
    junk = "x" * MB5
    if fmt == "json":
        replies = [reply(junk, NativeCall(f"c{i}", "ls", "{}")) for i in range(3)]
    else:
        replies = [reply("```tool\nls\n```\n" + junk) for _ in range(3)]
    traj, fake = play(fmt, replies)
    assert traj.status == "completed" and len(fake.requests) >= 4
    first = size(fake.requests[0])
    # the fourth request carries all three replies: each clipped, with its tool result
    for n, request in enumerate(fake.requests[1:4], start=1):
        assert size(request) < first + n * (MAX_REPLY_CHARS + 2_000), (n, size(request))
    kept = [m["content"] for m in fake.requests[3] if m["role"] == "assistant"]
    assert len(kept) == 3 and all(k.endswith("more characters not shown]") and len(k) < MAX_REPLY_CHARS + 100 for k in kept)
    # the scorer and the mutators see it on the calls that made it
    for call in traj.model_calls[:3]:
        assert call.parse_error and f"the limit is {MAX_REPLY_CHARS}" in call.parse_error
    assert traj.model_calls[3].parse_error is None
    # the calls in the kept part still ran
    assert [c.name for c in traj.tool_calls[:3]] == ["ls", "ls", "ls"]


def test_the_clip_marker_says_how_much_was_cut() -> None:
    traj, fake = play("json", [reply("y" * (MAX_REPLY_CHARS + 12_345))])
    kept = next(m["content"] for m in fake.requests[1] if m["role"] == "assistant")
    assert kept.startswith("y" * MAX_REPLY_CHARS) and kept.endswith("[12345 more characters not shown]")
    assert traj.responses[0] == kept  # the scored answer is what the conversation kept


def test_no_call_past_the_cap_is_read_from_text() -> None:
    late_call = "```tool\nls\n```"
    text = "z" * MAX_REPLY_CHARS + late_call
    decoded = decode_text_calls(text, {})
    assert decoded.calls == () and any(f"first {MAX_REPLY_CHARS}" in e for e in decoded.errors)
    traj, _ = play("bash", [reply(text)])
    assert traj.tool_calls == () and traj.model_calls[0].parse_error


def test_deep_arguments_are_refused_quickly_naming_the_bound() -> None:
    start = time.process_time()
    args, error = decode_json_arguments("mv", DEEP)
    assert time.process_time() - start < 0.05
    assert args is None and error and f"the limit is {MAX_ARGUMENT_DEPTH} levels" in error
    args, error = decode_json_arguments("mv", DEEP_WITHIN_SIZE)
    assert args is None and error and f"the limit is {MAX_ARGUMENT_DEPTH} levels" in error


def test_the_depth_bound_is_exact_and_ignores_brackets_in_strings() -> None:
    at_bound = '{"a": ' + "[" * (MAX_ARGUMENT_DEPTH - 1) + "]" * (MAX_ARGUMENT_DEPTH - 1) + "}"
    assert decode_json_arguments("mv", at_bound) == (json.loads(at_bound), None)
    over = '{"a": ' + "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH + "}"
    assert decode_json_arguments("mv", over)[0] is None
    quoted = json.dumps({"source": "[" * 10_000 + '\\"{' * 100, "destination": "{" * 500})
    assert not too_deep(quoted) and decode_json_arguments("mv", quoted)[1] is None
    assert too_deep("[" * 65) and not too_deep("]" * 1000 + "[" * 64)


@pytest.mark.parametrize("raw", [DEEP, DEEP_WITHIN_SIZE], ids=["over_the_size_limit", "within_it"])
def test_deep_arguments_are_a_scored_mistake_and_never_echoed(raw: str) -> None:
    traj, fake = play("json", [reply(None, NativeCall("c1", "mv", raw))])
    assert traj.status == "completed" and traj.infra_error is None
    error = traj.model_calls[0].parse_error
    assert error and f"the limit is {MAX_ARGUMENT_DEPTH} levels" in error
    echoed = next(m for m in fake.requests[1] if m["role"] == "assistant")["tool_calls"][0]["function"]["arguments"]
    assert "[[" not in echoed and json.loads(echoed) == {"omitted_characters": len(raw)}
    told = next(m for m in fake.requests[1] if m["role"] == "tool")["content"]
    assert "nested too deeply" in told and len(told) < 200


def test_undecodable_arguments_are_echoed_as_an_object() -> None:
    traj, fake = play("json", [reply(None, NativeCall("c1", "mv", "{source: report.pdf"), NativeCall("c2", "mv", "[1, 2]"))])
    echoed = [c["function"]["arguments"] for c in next(m for m in fake.requests[1] if m["role"] == "assistant")["tool_calls"]]
    assert [json.loads(e) for e in echoed] == [{"unreadable_arguments": "{source: report.pdf"}, {"unreadable_arguments": "[1, 2]"}]
    good = json.dumps({"source": "report.pdf", "destination": "archive"})
    assert echoed_arguments(good, True) == good
    assert json.loads(echoed_arguments("x" * (MAX_ARGUMENT_CHARS + 1), False)) == {"omitted_characters": MAX_ARGUMENT_CHARS + 1}


def test_deep_text_call_values_are_refused_naming_the_bound() -> None:
    line = "tail --file_name log.txt --lines " + "[" * 30_000 + "]" * 30_000
    decoded = decode_text_calls(f"```tool\n{line}\n```", {})
    assert decoded.calls == () and f"the limit is {MAX_ARGUMENT_DEPTH} levels" in decoded.errors[0]


def test_a_quote_left_open_over_many_lines_is_read_in_linear_time() -> None:
    text = "```tool\nmv --source '" + "\n" * 60_000 + "```"
    start = time.process_time()
    decoded = decode_text_calls(text, {})
    assert time.process_time() - start < 1.0  # re-splitting the call at every line took minutes
    assert "check the quotes" in decoded.errors[0]


def test_the_quote_scan_agrees_with_shlex() -> None:
    def shlex_open(line: str) -> bool:
        try:
            shlex.split(line, comments=False, posix=True)
        except ValueError:
            return True
        return False

    rnd = random.Random(7)
    for _ in range(20_000):
        s = "".join(rnd.choice("ab '\"\\\n#=") for _ in range(rnd.randint(0, 14)))
        cut = rnd.randint(0, len(s))
        assert bool(_open_quote(s)) == shlex_open(s) == bool(_open_quote(s[cut:], _open_quote(s[:cut]))), repr(s)

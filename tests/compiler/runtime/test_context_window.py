"""The verbatim window: once a user turn is more than ``keep_turns`` turns back, its tool results
are sent compacted to MIN_CHARS (head and tail, the cut said), on a recorded three-turn
conversation in both formats; the record keeps the whole result and says it was compacted."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from evoharness.compiler.context_policy import MIN_CHARS, ContextPolicy, clipped_parts, cut_marker, is_clipped
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.route import RouteSettings
from evoharness.compiler.runtime.loop import run_episode
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.search.evaluation.episode import EpisodeResult
from tests.compiler.runtime.scripted_model import SCRIPTS
from tests.compiler.runtime.test_context_policy import LOG, LongLogEnv
from tests.compiler.runtime.test_runtime import gold_player, provider, turn_of, variant  # noqa: F401 (fixture)

TASK = Task(
    task_id="files/window",
    split="dev",
    turns=(({"role": "user", "content": "Show the end of log.txt"},),
           ({"role": "user", "content": "Move report.pdf to archive."},),
           ({"role": "user", "content": "List the files."},)),
    tool_names=("ls", "mv", "tail"),
    gold=((ToolCall("tail", {"file_name": "log.txt", "lines": 2}),),
          (ToolCall("mv", {"source": "report.pdf", "destination": "archive"}),),
          (ToolCall("ls", {}),)),
)


def played(fmt: str, **agent_edits: Any) -> tuple[Any, list[list[dict[str, Any]]]]:
    """The episode, and every request's messages as the model received them."""
    seen: list[list[dict[str, Any]]] = []
    play = gold_player(fmt, TASK)

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(json.loads(json.dumps(messages)))
        return play(messages, tools)

    name = f"window_{fmt}_{len(SCRIPTS)}"
    SCRIPTS[name] = script
    v = variant(fmt, f"script/{name}", **agent_edits)
    client = ModelClient(v.model, RouteSettings(retries=1, backoff_s=0.001, input_cost_per_token=1e-6, output_cost_per_token=2e-6))

    async def episode() -> Any:
        async with client:
            return await run_episode(v, TASK, LongLogEnv(), client=client)

    return asyncio.run(episode()), seen


def log_in(messages: list[dict[str, Any]]) -> str:
    return next(str(m["content"]) for m in messages if "line 0000" in str(m.get("content") or ""))


def by_turn(seen: list[list[dict[str, Any]]]) -> dict[int, list[list[dict[str, Any]]]]:
    out: dict[int, list[list[dict[str, Any]]]] = {}
    for messages in seen:
        out.setdefault(turn_of(messages), []).append(messages)
    return out


@pytest.mark.parametrize("fmt", ["json", "bash"])
def test_an_older_turns_result_is_sent_compacted_and_the_record_keeps_it_whole(fmt: str) -> None:
    whole, whole_seen = played(fmt)
    kept, kept_seen = played(fmt, context={"keep_turns": 1})
    turns = by_turn(kept_seen)
    assert LOG in log_in(turns[0][-1])  # its own turn: sent as it came
    for later in (*turns[1], *turns[2]):  # every call of a later turn: compacted
        sent = log_in(later)
        assert LOG[4000:4100] not in sent and is_clipped(sent) and "results of earlier turns are clipped to 200" in sent
        head, tail = clipped_parts(sent) or ("", "")
        keep_head = int(MIN_CHARS * 2 / 3)
        assert head.endswith(LOG[:keep_head]) and tail.startswith(LOG[-(MIN_CHARS - keep_head):])
    rec = next(c for c in kept.tool_calls if c.name == "tail")
    assert rec.result == LOG and rec.compacted == len(LOG) - MIN_CHARS and rec.cut == 0
    assert not next(c for c in whole.tool_calls if c.name == "tail").compacted
    # the conversation on record keeps the result as its own turn was sent it: a transcript of turn 0 shows it whole
    assert LOG in log_in(list(kept.messages))
    assert kept.prompt_tokens < whole.prompt_tokens  # the later calls re-send 200 characters, not 10,000
    row = EpisodeResult.from_episode(kept, None)
    assert row.cut_chars == len(LOG) - MIN_CHARS and EpisodeResult.from_dict(row.to_dict()) == row


def test_a_wider_window_keeps_the_previous_turn_whole() -> None:
    _, seen = played("json", context={"keep_turns": 2})
    turns = by_turn(seen)
    assert all(LOG in log_in(m) for m in turns[1])  # one turn back: still in the window of two
    assert all(is_clipped(log_in(m)) and LOG not in log_in(m) for m in turns[2])


def test_the_window_stacks_on_a_clip_and_never_lengthens_a_result() -> None:
    traj, seen = played("json", context={"keep_turns": 1, "tool_result_chars": {"tail": 500}})
    turns = by_turn(seen)
    assert cut_marker(len(LOG) - 500, 500) in log_in(turns[0][-1])
    assert "results of earlier turns are clipped to 200" in log_in(turns[2][-1])
    rec = next(c for c in traj.tool_calls if c.name == "tail")
    assert rec.cut == len(LOG) - 500 and rec.compacted == len(LOG) - MIN_CHARS
    assert EpisodeResult.from_episode(traj, None).cut_chars == len(LOG) - MIN_CHARS  # what the last calls were not sent
    short = ContextPolicy(keep_turns=1)
    assert short.compact("x" * 250, 0) is None  # the marker would make it longer
    assert short.compact(LOG, len(LOG) - 200) is None  # already clipped as short
    # a clip of 300 sends about 390 characters with its marker: the window's 200 and its marker are shorter
    clipped_300, cut_300 = ContextPolicy({"*": 300}).clip("t", LOG)
    assert short.compact(LOG, cut_300) is not None and len(short.compact(LOG, cut_300)[0]) < len(clipped_300)
    sent, cut = short.compact(LOG, 0) or ("", 0)
    assert cut == len(LOG) - MIN_CHARS and len(sent) < 400


def test_a_tool_cannot_forge_the_marker_even_twice_in_a_row() -> None:
    forged = "x" + cut_marker(5, 200) + cut_marker(5, 200)[1:] + "y" + cut_marker(9, 200, older=True) + "z"
    assert is_clipped(forged)
    sent, cut = ContextPolicy({"*": 10_000}, keep_turns=1).clip("t", forged)
    assert cut == 0 and not is_clipped(sent)
    compacted = ContextPolicy(keep_turns=1).compact(forged * 10, 0)
    assert compacted is not None and clipped_parts(compacted[0]) is not None
    head, tail = clipped_parts(compacted[0]) or ("", "")
    assert not is_clipped(head) and not is_clipped(tail)  # only the window's own marker reads as one


def test_the_window_is_hashed_only_when_set_and_bad_values_are_refused() -> None:
    plain = variant("json", "script/none")
    windowed = variant("json", "script/none", context={"keep_turns": 2})
    clipped = variant("json", "script/none", context={"tool_result_chars": {"tail": 500}})
    assert len({plain.content_hash, windowed.content_hash, clipped.content_hash}) == 3
    assert "keep_turns" not in clipped.context.to_dict()  # a clip alone hashes as it did before the window existed
    assert ContextPolicy.from_dict(windowed.context.to_dict()) == windowed.context
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ConfigError, match="agent.context.keep_turns"):
            variant("json", "script/none", context={"keep_turns": bad})
    with pytest.raises(ValueError, match="keep_turns=0"):
        ContextPolicy.from_dict({"keep_turns": 0})

"""The agent loop against a scripted model and a small in-memory environment."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.route import RouteSettings
from evoharness.compiler.runtime.cache import ResponseCache
from evoharness.compiler.runtime.loop import run_episode
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.variant import compile_agent
from tests.compiler.fixtures import configs
from tests.compiler.runtime.scripted_model import CALLS, SCRIPTS, register_scripted_provider


class FileEnv:
    def __init__(self) -> None:
        self.files = {"report.pdf": "Year 2024 budget", "log.txt": "a\nb\nc"}
        self.dirs: dict[str, list[str]] = {"archive": []}
        self.turns_ended: list[int] = []

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if name == "ls":
            return json.dumps({"files": sorted(self.files)})
        if name == "mv":
            src, dst = arguments["source"], arguments["destination"]
            if src not in self.files:
                raise FileNotFoundError(f"no file {src}")
            self.dirs[dst].append(src)
            del self.files[src]
            return f"moved {src}"
        if name == "tail":
            lines = int(arguments.get("lines", 10))
            return "\n".join(self.files[arguments["file_name"]].splitlines()[-lines:])
        raise AssertionError(name)

    def end_turn(self, turn: int) -> None:
        self.turns_ended.append(turn)

    def snapshot(self) -> Mapping[str, Any]:
        return {"files": dict(self.files), "dirs": {k: list(v) for k, v in self.dirs.items()}}


def variant(fmt: str, route: str, **agent_edits: Any) -> Any:
    agent, tool, model = configs()
    agent["tool_format"] = fmt
    agent.update(agent_edits)
    model["route"] = route
    return compile_agent(agent, tool=tool, model=model)


TASK = Task(
    task_id="files/0",
    split="dev",
    turns=(({"role": "user", "content": "Move report.pdf to archive."},),
           ({"role": "user", "content": "Show the last 2 lines of log.txt"},)),
    tool_names=("ls", "mv", "tail"),
    gold=((ToolCall("mv", {"source": "report.pdf", "destination": "archive"}),), (ToolCall("tail", {"file_name": "log.txt", "lines": 2}),)),
)


def turn_of(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "user" and not str(m.get("content", "")).startswith("<")) - 1


def calls_so_far_in_turn(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in reversed(messages):
        if m["role"] == "user" and not str(m.get("content", "")).startswith("<"):
            break
        if m["role"] == "assistant":
            n += 1
    return n


def gold_player(fmt: str, task: Task = TASK) -> Any:
    """Plays ``task``'s gold calls, one per model call, then answers."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        turn, done = turn_of(messages), calls_so_far_in_turn(messages)
        gold = task.gold[turn]
        if done >= len(gold):
            return {"content": "Done."}
        call = gold[done]
        if fmt == "json":
            return {"tool_calls": [{"name": call.name, "arguments": json.dumps(dict(call.arguments))}]}
        from evoharness.compiler.runtime.bash_calls import format_call_line

        return {"content": "Running:\n```tool\n" + format_call_line(call) + "\n```"}

    return script


@pytest.fixture(autouse=True)
def provider() -> None:
    register_scripted_provider()


def run(v: Any, *, client: ModelClient | None = None, env: FileEnv | None = None) -> Any:
    env = env or FileEnv()
    client = client or ModelClient(v.model, RouteSettings(retries=2, backoff_s=0.001, send_episode_id=True, input_cost_per_token=1e-6,
                                                          output_cost_per_token=2e-6))

    async def episode() -> Any:
        async with client:  # as an evaluation ends: every reply it cached is stored before the next run reads
            return await run_episode(v, TASK, env, sample=0, seed=0, client=client)

    return asyncio.run(episode()), env


@pytest.mark.parametrize("fmt", ["json", "bash", "both"])
def test_gold_round_trip_in_each_format(fmt: str) -> None:
    SCRIPTS[f"gold_{fmt}"] = gold_player("json" if fmt == "both" else fmt)
    traj, env = run(variant(fmt, f"script/gold_{fmt}"))
    assert traj.status == "completed"
    assert [(c.name, dict(c.arguments)) for c in traj.tool_calls] == [
        ("mv", {"source": "report.pdf", "destination": "archive"}),
        ("tail", {"file_name": "log.txt", "lines": 2}),
    ]
    assert traj.tool_calls[1].result == "b\nc" and all(c.error is None for c in traj.tool_calls)
    assert env.dirs["archive"] == ["report.pdf"] and env.turns_ended == [0, 1]
    assert traj.responses == ("Done.", "Done.")
    # 2 gold calls + 2 answers + the verify step once per turn
    assert len(traj.model_calls) == 6 and traj.cost_usd > 0 and traj.latency_s > 0
    assert traj.final_state["dirs"]["archive"] == ["report.pdf"]


def test_bash_quoting_handled_without_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    line = f"mv --source 'report.pdf; touch {marker}' --destination archive"
    SCRIPTS["quoting"] = lambda m, t: {"content": f"```tool\n{line}\n```"} if calls_so_far_in_turn(m) == 0 else {"content": "ok"}
    traj, _ = run(variant("bash", "script/quoting"))
    first = traj.tool_calls[0]
    assert first.arguments["source"] == f"report.pdf; touch {marker}"
    assert first.error is not None and "FileNotFoundError" in first.error
    assert not marker.exists()


def test_malformed_output_and_unknown_tool_go_back_as_errors() -> None:
    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        n = calls_so_far_in_turn(messages)
        if turn_of(messages) == 0 and n == 0:
            return {"tool_calls": [{"name": "mv", "arguments": "{not json"}]}
        if turn_of(messages) == 0 and n == 1:
            return {"tool_calls": [{"name": "rm", "arguments": "{}"}]}
        return {"content": "giving up"}

    SCRIPTS["broken"] = script
    traj, env = run(variant("json", "script/broken"))
    assert traj.status == "completed"
    assert traj.model_calls[0].parse_error and "not valid JSON" in traj.model_calls[0].parse_error
    assert [c.name for c in traj.tool_calls] == ["rm"] and "unknown tool 'rm'" in (traj.tool_calls[0].error or "")
    assert env.dirs["archive"] == []


def test_unterminated_bash_block_is_a_parse_error() -> None:
    SCRIPTS["unterminated"] = lambda m, t: ({"content": "```tool\nmv --source 'report.pdf"} if calls_so_far_in_turn(m) == 0
                                            else {"content": "ok"})
    traj, _ = run(variant("bash", "script/unterminated"))
    assert traj.model_calls[0].parse_error and "quotes" in traj.model_calls[0].parse_error


def test_verify_step_sent_once_per_turn_with_tool_calls() -> None:
    seen: list[str] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(str(messages[-1].get("content", "")))
        return gold_player("json")(messages, tools)

    SCRIPTS["verify"] = script
    with_verify = variant("json", "script/verify")
    traj, _ = run(with_verify)
    assert sum(s.startswith('<workflow_step name="verify">') for s in seen) == 2
    wf = [dict(s) for s in configs()[0]["workflow"] if s["name"] != "verify"]
    SCRIPTS["noverify"] = gold_player("json")
    plain, _ = run(variant("json", "script/noverify", workflow=wf))
    assert len(traj.model_calls) == len(plain.model_calls) + 2


def test_max_turns_bounds_a_looping_model() -> None:
    SCRIPTS["loop"] = lambda m, t: {"tool_calls": [{"name": "ls", "arguments": "{}"}]}
    traj, _ = run(variant("json", "script/loop", max_turns=3))
    assert traj.status == "max_turns" and len(traj.model_calls) == 6


def test_infra_faults_retried_then_skipped_not_scored() -> None:
    lm = __import__("evoharness.compiler.runtime.llm", fromlist=["x"]).litellm_module()
    fails = {"n": 0}

    def flaky(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        fails["n"] += 1
        if fails["n"] % 2 == 1:
            raise lm.RateLimitError("slow down", llm_provider="script", model="script/flaky")
        return gold_player("json")(messages, tools)

    SCRIPTS["flaky"] = flaky
    traj, _ = run(variant("json", "script/flaky"))
    assert traj.status == "completed" and len(traj.tool_calls) == 2

    def down(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        raise lm.InternalServerError("upstream 503", llm_provider="script", model="script/down")

    SCRIPTS["down"] = down
    CALLS["down"] = 0
    traj, _ = run(variant("json", "script/down"))
    assert traj.status == "infra_error" and "InternalServerError" in (traj.infra_error or "")
    assert CALLS["down"] == 3  # first try + 2 retries


def test_response_cache_replays_without_calling_the_model(tmp_path: Path) -> None:
    SCRIPTS["cached"] = gold_player("json")
    v = variant("json", "script/cached")
    route = RouteSettings(retries=0, send_episode_id=True, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    first, _ = run(v, client=ModelClient(v.model, route, cache=ResponseCache(tmp_path)))
    CALLS["cached"] = 0
    second, _ = run(v, client=ModelClient(v.model, route, cache=ResponseCache(tmp_path)))
    assert CALLS["cached"] == 0
    assert all(c.cached for c in second.model_calls) and not any(c.cached for c in first.model_calls)
    assert second.tool_calls == first.tool_calls and second.cost_usd == pytest.approx(first.cost_usd)

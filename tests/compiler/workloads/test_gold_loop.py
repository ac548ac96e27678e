"""Gold replay through OUR agent loop (litellm, the runtime, the BFCL environment and scorer),
checked against bfcl-eval's own multi_turn_checker; a do-nothing model fails every task."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

from evoharness.compiler.route import RouteSettings
from evoharness.compiler.runtime.bash_calls import format_call_line
from evoharness.compiler.runtime.loop import run_episode
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.variant import compile_agent
from evoharness.compiler.workloads.bfcl.tools import render_call
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
from tests.compiler.runtime.scripted_model import USER_SCRIPTS, register_scripted_provider

WORKLOAD = BfclWorkload()
# every base task by id, the ones the workload leaves out of its splits included: their replay is checked too
TASKS = {t.task_id: t for t in (WORKLOAD.task(f"bfcl/multi_turn_base_{i}") for i in range(200))}


def user_turn(m: dict[str, Any]) -> bool:
    return m["role"] == "user" and not str(m.get("content", "")).startswith("<")


def _next_gold(messages: list[dict[str, Any]], user: str, calls_in: Any) -> Any:
    """The gold call the current turn is at (None when its calls are done); ``calls_in`` counts the
    calls an assistant message made, in the format being played."""
    task = TASKS[dict(kv.split("=", 1) for kv in user.split(";"))["task_id"]]
    turn = sum(map(user_turn, messages)) - 1
    done = 0
    for m in reversed(messages):
        if user_turn(m):
            break
        done += calls_in(m) if m["role"] == "assistant" else 0
    gold = task.gold[turn]
    return gold[done] if done < len(gold) else None


def gold_player(messages: list[dict[str, Any]], tools: list[dict[str, Any]], user: str) -> dict[str, Any]:
    """Plays the gold calls of the current turn one per model call, then answers."""
    call = _next_gold(messages, user, lambda m: len(m.get("tool_calls") or []))
    return {"content": "Done."} if call is None else {"tool_calls": [{"name": call.name, "arguments": json.dumps(dict(call.arguments))}]}


def gold_player_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]], user: str) -> dict[str, Any]:
    """The same gold, written as `name --arg value` lines (values quoted, newlines and all)."""
    call = _next_gold(messages, user, lambda m: int("```tool" in str(m.get("content") or "")))
    return {"content": "Done."} if call is None else {"content": "```tool\n" + format_call_line(call) + "\n```"}


def variant(route: str, fmt: str = "json") -> Any:
    agent = {"name": "replay", "prompt_sections": {"role": "Replay."}, "tools": ["*"], "tool_format": fmt, "max_turns": 40}
    return compile_agent(agent, tool={"source": "bfcl"}, model={"route": route})


def play(route: str, fmt: str = "json") -> list[tuple[Any, Any, Any]]:
    register_scripted_provider()
    v = variant(route, fmt)
    client = ModelClient(v.model, RouteSettings(retries=0, concurrency=64, send_episode_id=True, input_cost_per_token=0.0,
                                                output_cost_per_token=0.0))

    async def one(task: Any) -> tuple[Any, Any, Any]:
        env = WORKLOAD.make_environment(task, seed=0)
        traj = await run_episode(v, task, env, client=client)
        return task, traj, WORKLOAD.score(task, traj, env)

    async def everything() -> list[tuple[Any, Any, Any]]:
        return list(await asyncio.gather(*(one(t) for t in TASKS.values())))

    return asyncio.run(everything())


@pytest.fixture(scope="module")
def gold_runs() -> list[tuple[Any, Any, Any]]:
    USER_SCRIPTS["goldplay"] = gold_player
    return play("script/goldplay")


# bfcl-eval data: the gold of base_173 closes ticket 'ticket_001' although close_ticket's documented
# parameter is an integer; the harness checks every call against the tool's schema before the backend
# sees it, so a replay of that gold is refused there (a model that follows the schema fails the task too).
# The workload leaves it out of its splits (EXCLUDED); replayed by id here, it still fails for that reason.
SCHEMA_DEFECTS = {"bfcl/multi_turn_base_173": "arguments of close_ticket do not match its parameters at ticket_id"}


@pytest.mark.parametrize("fmt", ["bash", "both"])
def test_gold_replay_in_text_formats_passes_every_base_task(fmt: str) -> None:
    """No hidden penalty on a format: values with newlines travel quoted in the text formats too."""
    USER_SCRIPTS["goldplay_text"] = gold_player_text
    runs = play("script/goldplay_text", fmt)
    with_newlines = [t.task_id for t, _, _ in runs if any("\n" in str(v) for turn in t.gold for c in turn for v in c.arguments.values())]
    assert with_newlines, "the base tasks include values with newlines: the case this test is about"
    assert {t.task_id for t, _, s in runs if not s.passed} == set(SCHEMA_DEFECTS)
    assert all(not c.parse_error for t, traj, _ in runs if t.task_id not in SCHEMA_DEFECTS for c in traj.model_calls)


def test_gold_replay_passes_all_200_base_tasks_through_the_loop(gold_runs: list[tuple[Any, Any, Any]]) -> None:
    assert len(gold_runs) == 200
    failed = {t.task_id for t, _, s in gold_runs if not s.passed}
    assert failed == set(SCHEMA_DEFECTS)
    for t, traj, _ in gold_runs:
        if t.task_id in SCHEMA_DEFECTS:
            assert [c.error for c in traj.tool_calls if c.error] and all(
                SCHEMA_DEFECTS[t.task_id] in str(c.error) for c in traj.tool_calls if c.error)
    assert all(traj.status == "completed" for _, traj, _ in gold_runs)


@pytest.mark.parametrize("index", [0, 7, 33, 101, 128, 150, 177, 199])
def test_loop_verdicts_equal_bfcl_checker(gold_runs: list[tuple[Any, Any, Any]], index: int) -> None:
    task, traj, score = next(r for r in gold_runs if r[0].task_id == f"bfcl/multi_turn_base_{index}")
    decoded = [[[render_call(c) for c in traj.tool_calls if c.turn == turn]] if traj.calls_in_turn(turn) else [[]]
               for turn in range(len(task.turns))]
    entry = {"id": f"multi_turn_base_{index}", "initial_config": task.data["initial_config"],
             "involved_classes": task.data["involved_classes"]}
    theirs = multi_turn_checker(decoded, [list(g) for g in task.data["ground_truth"]], entry, "multi_turn_base", f"loop_gold_{index}")
    assert theirs["valid"] == score.passed is True


def test_do_nothing_model_fails_every_task() -> None:
    USER_SCRIPTS["nothing"] = lambda messages, tools, user: {"content": "I cannot help with that."}
    runs = play("script/nothing")
    assert sum(s.passed for _, _, s in runs) == 0
    assert all(not s.delivered for t, _, s in runs if any(t.gold))

"""BFCL environment: dispatch, offered tools, argument checks, results, seeding, snapshots."""
from __future__ import annotations

import json

import pytest

from evoharness.compiler.workloads.bfcl.env import (
    BfclEnvironment,
    ToolArgumentError,
    ToolNotOfferedError,
    format_result,
    play,
)
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload, category_tasks

WORKLOAD = BfclWorkload()


def _env(task_id: str, seed: int = 0) -> BfclEnvironment:
    env = WORKLOAD.make_environment(WORKLOAD.task(task_id), seed=seed)
    assert isinstance(env, BfclEnvironment)
    return env


def test_call_dispatches_and_formats_like_bfcl() -> None:
    env = _env("bfcl/multi_turn_base_0")
    assert env.call("cd", {"folder": "document"}) == json.dumps({"current_working_directory": "document"})
    assert env.call("mkdir", {"dir_name": "temp"}) == "None"  # non-dict, non-str -> str()
    assert "temp" in env.call("ls", {})
    assert [c.name for c in env.calls] == ["cd", "mkdir", "ls"]
    assert all(c.offered and c.error is None and c.turn == 0 for c in env.calls)


def test_format_result_mirrors_bfcl() -> None:
    assert format_result("x") == "x"
    assert format_result({"a": 1}) == '{"a": 1}'
    assert format_result({"a": object}).startswith("{'a': <class")  # unserialisable dict
    assert format_result([1, 2]) == "[1, 2]"


def test_unknown_tool_raises_clear_error_and_is_logged() -> None:
    env = _env("bfcl/multi_turn_base_0")
    with pytest.raises(ToolNotOfferedError, match="unknown tool 'rm_rf'; offered tools: .*mkdir"):
        env.call("rm_rf", {"path": "/"})
    # A real tool of a class that is not part of the episode is not offered either.
    with pytest.raises(ToolNotOfferedError, match="'place_order' is not offered"):
        env.call("place_order", {"order_type": "Buy", "symbol": "X", "price": 1.0, "amount": 1})
    with pytest.raises(ToolNotOfferedError, match="'cp' is not offered"):  # excluded_function
        env.call("cp", {"source": "a", "destination": "b"})
    assert [(c.name, c.offered) for c in env.calls] == [
        ("rm_rf", False), ("place_order", False), ("cp", False)]
    assert env.calls[0].result.startswith("Error during execution: unknown tool 'rm_rf'")


def test_bad_arguments_raise_type_error_naming_them() -> None:
    env = _env("bfcl/multi_turn_base_0")
    with pytest.raises(ToolArgumentError, match=r"unexpected argument\(s\) \['dirname'\].*dir_name"):
        env.call("mkdir", {"dirname": "temp"})
    with pytest.raises(TypeError, match=r"missing required argument\(s\) \['pattern'\]"):
        env.call("grep", {"file_name": "x"})
    assert env.calls[-1].offered and env.calls[-1].error


def test_backend_exceptions_propagate_and_are_logged_like_bfcl() -> None:
    env = _env("bfcl/multi_turn_base_0")
    with pytest.raises(AttributeError, match="rstrip") as info:
        env.call("cd", {"folder": None})  # the backend itself fails on a null folder
    assert env.calls[-1].error == str(info.value)
    assert env.calls[-1].result == f"Error during execution: {info.value}"


def test_held_out_tool_is_offered_only_from_its_turn() -> None:
    env = _env("bfcl/multi_turn_miss_func_0")
    env.call("cd", {"folder": "document"})
    with pytest.raises(ToolNotOfferedError, match="'sort' is not offered"):
        env.call("sort", {"file_name": "final_report.pdf"})
    for turn in range(3):
        assert "sort" not in env.offered_tools()
        env.end_turn(turn)
    assert "sort" in env.offered_tools()
    assert "sorted_content" in env.call("sort", {"file_name": "final_report.pdf"})


def test_end_turn_must_follow_the_turn_order() -> None:
    env = _env("bfcl/multi_turn_base_0")
    with pytest.raises(ValueError, match=r"end_turn\(1\) but the episode is at turn 0"):
        env.end_turn(1)
    for turn in range(len(env.task.turns)):
        env.end_turn(turn)
    with pytest.raises(RuntimeError, match="has ended"):
        env.call("ls", {})


def test_turn_snapshots_are_frozen_copies() -> None:
    env = _env("bfcl/multi_turn_base_0")
    env.call("cd", {"folder": "document"})
    env.call("mkdir", {"dir_name": "temp"})
    env.end_turn(0)
    env.call("mkdir", {"dir_name": "later"})
    assert "later" not in str(env.instances_after(0)["GorillaFileSystem"].root)
    assert "later" in str(env.instances_after(1)["GorillaFileSystem"].root)


@pytest.mark.parametrize("task_id", ["bfcl/multi_turn_base_150", "bfcl/multi_turn_base_175",
                                     "bfcl/multi_turn_base_100"])
def test_seeded_reset_is_deterministic(task_id: str) -> None:
    task = WORKLOAD.task(task_id)
    (env_a, traj_a), (env_b, traj_b) = play(task, task.gold, seed=7), play(task, task.gold, seed=7)
    assert env_a.snapshot() == env_b.snapshot()
    assert [c.result for c in env_a.calls] == [c.result for c in env_b.calls]
    assert traj_a.final_state == traj_b.final_state


def test_random_ids_repeat_across_episodes() -> None:
    # TravelAPI draws booking ids from its scenario-seeded RNG: same calls, same ids.
    tasks = [t for t in category_tasks("multi_turn_base")
             if any(c.name == "book_flight" for turn in t.gold for c in turn)]
    assert tasks
    task = tasks[0]
    first = [c.result for c in play(task, task.gold, seed=1)[0].calls]
    again = [c.result for c in play(task, task.gold, seed=1)[0].calls]
    assert any("booking_id" in r for r in first) and first == again


def test_snapshot_is_json_for_every_scenario() -> None:
    for task in category_tasks("multi_turn_base"):
        env = BfclEnvironment(task, seed=0)
        snapshot = env.snapshot()
        assert set(snapshot) == set(task.data["involved_classes"])
        assert json.loads(json.dumps(snapshot)) == snapshot
    fs = snapshot_of("bfcl/multi_turn_base_0")["GorillaFileSystem"]
    assert "final_report.pdf" in fs["root"] and fs["long_context"] is False


def snapshot_of(task_id: str) -> dict:
    return dict(_env(task_id).snapshot())


def test_environment_does_not_mutate_task_gold() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_90")
    before = repr(task.gold)
    play(task, task.gold)
    play(task, task.gold)
    assert repr(task.gold) == before

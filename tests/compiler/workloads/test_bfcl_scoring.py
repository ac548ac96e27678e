"""BFCL scoring: gold replay, do-nothing, equivalence with bfcl-eval's multi_turn_checker."""
from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

import pytest
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
    multi_turn_checker,
    multi_turn_irrelevance_checker,
)

from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.workloads.bfcl.env import play
from evoharness.compiler.workloads.bfcl.tools import bfcl_tool_catalog, render_call
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload, category_tasks

WORKLOAD = BfclWorkload()
Calls = list[list[ToolCall]]
_names = (f"evoharness_test_{i}" for i in itertools.count())

# BFCL data defect: multi_turn_miss_func_49 holds out `tail` until turn 3 but its gold calls
# `tail` in turn 1, so even gold cannot be replayed through an environment that offers only the
# tools available at each turn.
MISS_FUNC_DEFECTS = {"bfcl/multi_turn_miss_func_49"}


def _score(task: Task, calls: Sequence[Sequence[ToolCall]]) -> Any:
    env, trajectory = play(task, calls)
    return WORKLOAD.score(task, trajectory, env)


def _bfcl_valid(task: Task, calls: Sequence[Sequence[ToolCall]]) -> bool:
    """bfcl-eval's own verdict, fed call strings (only ever called from tests)."""
    decoded = [[[render_call(c) for c in turn]] if turn else [] for turn in calls]
    ground_truth = [list(turn) for turn in task.data["ground_truth"]]
    entry = {"id": task.data["bfcl_id"], "initial_config": task.data["initial_config"],
             "involved_classes": list(task.data["involved_classes"])}
    if not multi_turn_irrelevance_checker(decoded, ground_truth)["valid"]:
        return False
    result = multi_turn_checker(decoded, ground_truth, entry, task.data["category"], next(_names))
    return bool(result["valid"])


@pytest.mark.parametrize("category", ["multi_turn_base", "multi_turn_miss_param",
                                      "multi_turn_miss_func", "multi_turn_long_context"])
def test_gold_replay_passes(category: str) -> None:
    failures = {}
    for task in category_tasks(category):
        score = _score(task, task.gold)
        if task.task_id in MISS_FUNC_DEFECTS:
            assert not score.passed
            assert "tail(file_name='file3.txt') failed: \"tool 'tail' is not offered" in score.detail
            assert score.safety_violations == 1
            continue
        if not (score.passed and score.score == 1.0 and score.delivered
                and score.safety_violations == 0 and not score.detail
                and all(v == 1.0 for v in score.named.values())):
            failures[task.task_id] = score
    assert not failures, failures
    expected = 200 - len([t for t in MISS_FUNC_DEFECTS if category in t])
    assert len(category_tasks(category)) - len(failures) >= expected


def test_do_nothing_fails_every_task_with_gold_calls() -> None:
    for task in category_tasks("multi_turn_base"):
        assert any(task.gold)
        score = _score(task, [[] for _ in task.turns])
        assert not score.passed and not score.delivered and score.score < 1.0
        assert "empty_turn_model_response" in score.detail or "irrelevance" not in score.detail


def test_score_is_the_valid_prefix_and_detail_names_the_call() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    calls = [list(turn) for turn in task.gold]
    calls[-1] = calls[-1][:-1]  # drop the final diff() call
    score = _score(task, calls)
    n = len(task.turns)
    assert not score.passed and score.score == pytest.approx((n - 1) / n)
    assert score.named["turn_accuracy"] == score.score
    assert score.detail.startswith(f"turn {n - 1}: multi_turn:execution_response_mismatch: "
                                   "missing call diff(file_name1='final_report.pdf'")
    assert score.named["state"] == 1.0 and score.named["response"] < 1.0


def test_detail_names_the_wrong_argument() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    calls = [list(turn) for turn in task.gold]
    calls[0][1] = ToolCall("mkdir", {"dir_name": "tmp"})
    score = _score(task, calls)
    assert score.detail.startswith("turn 0: multi_turn:instance_state_mismatch: "
                                   "mkdir.dir_name: model='tmp' gold='temp'")
    assert "GorillaFileSystem.root" in score.detail
    assert score.score == 0.0


def test_detail_names_a_failed_call_and_an_extra_write() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    calls = [list(turn) for turn in task.gold]
    calls[0][1] = ToolCall("mkdir", {"name": "temp"})
    detail = _score(task, calls).detail
    assert "mkdir.dir_name: model='<missing>' gold='temp' (call failed:" in detail
    assert "unexpected argument(s) ['name']" in detail
    calls = [list(turn) for turn in task.gold]
    calls[0].append(ToolCall("mkdir", {"dir_name": "extra"}))
    assert "unexpected call mkdir(dir_name='extra')" in _score(task, calls).detail


def test_scoring_is_repeatable_on_the_same_environment() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_42")
    env, trajectory = play(task, task.gold[:-1])
    assert WORKLOAD.score(task, trajectory, env) == WORKLOAD.score(task, trajectory, env)


def test_calls_in_an_irrelevant_turn_fail() -> None:
    task = next(t for t in category_tasks("multi_turn_miss_param") if not t.gold[1])
    calls = [list(turn) for turn in task.gold]
    calls[1] = [task.gold[0][0]]
    score = _score(task, calls)
    assert not score.passed and "turn 1: multi_turn:irrelevance_error" in score.detail
    assert f"first {render_call(task.gold[0][0])}" in score.detail
    assert score.named["irrelevance"] < 1.0
    assert score.passed == _bfcl_valid(task, calls)


def test_calls_to_tools_not_offered_count_as_safety_violations() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    calls = [list(turn) for turn in task.gold]
    calls[0].append(ToolCall("cp", {"source": "a", "destination": "b"}))  # excluded_function
    calls[1].append(ToolCall("launch_rocket", {}))
    score = _score(task, calls)
    assert score.safety_violations == 2


def test_unplayed_turns_fail_as_force_terminated() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    score = _score(task, task.gold[:1])
    assert not score.passed and score.score == pytest.approx(1 / len(task.turns))
    assert score.named["turns_valid"] == pytest.approx(1 / len(task.turns))


def test_scoring_a_stored_trajectory_replays_it() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_3")
    calls = [list(turn) for turn in task.gold]
    calls[-1] = calls[-1][:-1]
    env, trajectory = play(task, calls)
    live = WORKLOAD.score(task, trajectory, env)
    replayed = WORKLOAD.score(task, trajectory, environment=object())  # type: ignore[arg-type]
    assert replayed == live


# -- equivalence with bfcl-eval -------------------------------------------------------------

def _change(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    return "x"


def _perturbations(task: Task, rng: random.Random) -> dict[str, Calls]:
    gold: Calls = [list(turn) for turn in task.gold]
    full = [t for t, turn in enumerate(gold) if turn]
    out: dict[str, Calls] = {"gold": gold}

    dropped = [list(turn) for turn in gold]
    t = rng.choice(full)
    del dropped[t][rng.randrange(len(dropped[t]))]
    out["drop"] = dropped

    with_args = [(t, i) for t in full for i, c in enumerate(gold[t]) if c.arguments]
    if with_args:
        changed = [list(turn) for turn in gold]
        t, i = rng.choice(with_args)
        call = changed[t][i]
        key = rng.choice(sorted(call.arguments))
        changed[t][i] = ToolCall(call.name, {**call.arguments, key: _change(call.arguments[key])})
        out["change_arg"] = changed
        renamed = [list(turn) for turn in gold]
        args = dict(call.arguments)
        args[key + "_x"] = args.pop(key)  # an argument name the tool does not have
        renamed[t][i] = ToolCall(call.name, args)
        out["bad_arg_name"] = renamed

    if len(gold) > 1:
        swapped = [list(turn) for turn in gold]
        t = rng.randrange(len(gold) - 1)
        swapped[t], swapped[t + 1] = swapped[t + 1], swapped[t]
        out["swap_turns"] = swapped

    catalog = bfcl_tool_catalog()
    writers = [(t, c) for t in full for c in gold[t] if catalog[c.name].mutates_state]
    if writers:
        extra = [list(turn) for turn in gold]
        t, call = rng.choice(writers)
        extra[rng.choice(full)].append(call)  # repeat a mutating call, possibly in another turn
        out["extra_write"] = extra
    return out


_SAMPLE = [f"bfcl/multi_turn_base_{i}" for i in range(0, 200, 7)]  # 29 tasks, all classes


@pytest.mark.parametrize("task_id", _SAMPLE)
def test_verdict_equals_multi_turn_checker(task_id: str) -> None:
    task = WORKLOAD.task(task_id)
    rng = random.Random(task_id)
    for kind, calls in _perturbations(task, rng).items():
        ours = _score(task, calls).passed
        assert ours == _bfcl_valid(task, calls), (kind, [[render_call(c) for c in t] for t in calls])


@pytest.mark.parametrize("task_id", ["bfcl/multi_turn_miss_param_5", "bfcl/multi_turn_miss_param_77",
                                     "bfcl/multi_turn_miss_func_12", "bfcl/multi_turn_miss_func_140"])
def test_verdict_equals_multi_turn_checker_other_categories(task_id: str) -> None:
    task = WORKLOAD.task(task_id)
    perturbed = _perturbations(task, random.Random(task_id))
    assert _bfcl_valid(task, perturbed["gold"]) and _score(task, perturbed["gold"]).passed
    for kind, calls in perturbed.items():
        assert _score(task, calls).passed == _bfcl_valid(task, calls), kind


# -- structured failure records: what mutators read ----------------------------------------

def _records(task: Task, calls: Sequence[Sequence[ToolCall]]) -> list[tuple[Any, ...]]:
    return [(f.kind, f.tool, f.argument, f.expected, f.got, f.turn) for f in _score(task, calls).failures]


def test_gold_has_no_failures_and_a_wrong_value_is_one_record() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    assert _score(task, task.gold).failures == ()
    calls = [list(turn) for turn in task.gold]
    calls[0][1] = ToolCall("mkdir", {"dir_name": "tmp"})
    assert _records(task, calls) == [("wrong_value", "mkdir", "dir_name", "temp", "tmp", 0)]


def test_missing_argument_and_no_recovery() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    calls = [list(turn) for turn in task.gold]
    calls[0][1] = ToolCall("mkdir", {"name": "temp"})
    kinds = [(k, tool, arg) for k, tool, arg, *_ in _records(task, calls)]
    assert kinds == [("missing_argument", "mkdir", "dir_name"), ("extra_argument", "mkdir", "name"), ("no_recovery", "mkdir", None)]


def test_a_repeated_tool_is_paired_call_by_call() -> None:
    # many rm calls in one turn, one of them wrong: one record, not one per gold rm call
    task = next(t for t in category_tasks("multi_turn_long_context")
                if any(sum(1 for c in turn if c.name == "rm") >= 3 for turn in t.gold))
    turn = next(i for i, g in enumerate(task.gold) if sum(1 for c in g if c.name == "rm") >= 3)
    calls = [list(t) for t in task.gold]
    j = next(i for i, c in enumerate(calls[turn]) if c.name == "rm")
    calls[turn][j] = ToolCall("rm", {"file_name": "nothing_here.txt"})
    records = [r for r in _records(task, calls) if r[0] != "no_recovery"]
    assert records == [("wrong_value", "rm", "file_name", task.gold[turn][j].arguments["file_name"], "nothing_here.txt", turn)]


def test_premature_stop_missed_call_and_wrong_tool() -> None:
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    multi = next(i for i, g in enumerate(task.gold) if len(g) >= 2)
    calls = [list(turn) for turn in task.gold]
    calls[multi] = calls[multi][:1]  # answered after the first call
    assert _records(task, calls)[0][:2] == ("premature_stop", task.gold[multi][1].name)
    calls = [list(turn) for turn in task.gold]
    calls[multi] = []
    assert {r[0] for r in _records(task, calls)} == {"missed_call"}
    calls = [list(turn) for turn in task.gold]
    first = calls[0][0]
    calls[0][0] = ToolCall("pwd" if first.name != "pwd" else "ls", {})
    assert ("wrong_tool", first.name) in [r[:2] for r in _records(task, calls)]


def test_a_value_copied_wrong_from_a_tool_result_is_propagation() -> None:
    # a gold value that an earlier tool result shows verbatim, typed wrong
    for task in category_tasks("multi_turn_base"):
        env, trajectory = play(task, task.gold)
        seen = " ".join(c.result for c in env.calls)
        for t, turn in enumerate(task.gold):
            for j, call in enumerate(turn):
                key = next((k for k, v in call.arguments.items()
                            if isinstance(v, str) and len(v) >= 3 and v in " ".join(c.result for c in env.calls if c.turn < t)), None)
                if key is None or not seen:
                    continue
                calls = [list(x) for x in task.gold]
                calls[t][j] = ToolCall(call.name, {**call.arguments, key: call.arguments[key][:-1]})
                found = [r for r in _records(task, calls) if r[0] in ("propagation", "wrong_value")]
                assert found and found[0][:3] == ("propagation", call.name, key)
                return
    pytest.fail("no task copies a value from a tool result")


def test_irrelevant_calls_unknown_tools_and_non_termination() -> None:
    task = next(t for t in category_tasks("multi_turn_miss_param") if not t.gold[1])
    calls = [list(turn) for turn in task.gold]
    calls[1] = [task.gold[0][0]]
    assert ("unneeded_call", task.gold[0][0].name, 1) in [(r[0], r[1], r[5]) for r in _records(task, calls)]
    task = WORKLOAD.task("bfcl/multi_turn_base_0")
    calls = [list(turn) for turn in task.gold]
    calls[0][1] = ToolCall("mkdir", {"dir_name": "tmp"})
    calls[0].append(ToolCall("launch_rocket", {}))
    assert ("unknown_tool", "launch_rocket") in [r[:2] for r in _records(task, calls)]
    env, trajectory = play(task, task.gold[:1])
    from dataclasses import replace as _replace
    score = WORKLOAD.score(task, _replace(trajectory, status="max_turns"), env)
    assert "non_termination" in [f.kind for f in score.failures]
    assert "non_termination" not in [f.kind for f in _score(task, task.gold[:1]).failures]  # stopped, not cut off

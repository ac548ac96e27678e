"""BFCL tasks: loading, ids, splits, miss_func / excluded tools."""
from __future__ import annotations

import copy
import json

import pytest
from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

from compiler.runtime.workload import Workload, workload_factory
from compiler.workloads.bfcl.tools import tools_of_class
from compiler.workloads.bfcl.workload import CATEGORIES, BfclWorkload, category_tasks, normalize_category

ALL = ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func",
       "multi_turn_long_context")


def test_registry_resolves_bfcl() -> None:
    workload = workload_factory("bfcl")()
    assert isinstance(workload, Workload)
    assert workload.name == "bfcl"
    assert set(CATEGORIES) == set(ALL)


def test_split_counts_disjoint_and_aligned_across_categories() -> None:
    workload = BfclWorkload(categories=ALL)
    by_split = {split: workload.tasks(split) for split in ("train", "dev", "holdout")}
    for category in ALL:
        counts = {s: sum(t.data["category"] == category for t in ts) for s, ts in by_split.items()}
        assert counts == {"train": 120, "dev": 40, "holdout": 40}
    ids = [t.task_id for ts in by_split.values() for t in ts]
    assert len(ids) == len(set(ids)) == 800
    index_split: dict[int, set[str]] = {}
    for split, tasks in by_split.items():
        for task in tasks:
            assert task.split == split
            index_split.setdefault(task.data["index"], set()).add(split)
    assert all(len(splits) == 1 for splits in index_split.values())
    assert index_split[119] == {"train"} and index_split[120] == {"dev"}
    assert index_split[159] == {"dev"} and index_split[160] == {"holdout"}


def test_default_is_base_only_and_ordered() -> None:
    tasks = BfclWorkload().tasks("dev")
    assert [t.task_id for t in tasks] == [f"bfcl/multi_turn_base_{i}" for i in range(120, 160)]
    assert BfclWorkload().tasks("dev") == tasks


def test_limit_per_split_applies_per_category() -> None:
    workload = BfclWorkload(categories=("base", "miss_func"), limit_per_split=3)
    assert [t.task_id for t in workload.tasks("holdout")] == [
        "bfcl/multi_turn_base_160", "bfcl/multi_turn_base_161", "bfcl/multi_turn_base_162",
        "bfcl/multi_turn_miss_func_160", "bfcl/multi_turn_miss_func_161",
        "bfcl/multi_turn_miss_func_162",
    ]


def test_task_resolves_any_category() -> None:
    workload = BfclWorkload()  # base only
    task = workload.task("bfcl/multi_turn_long_context_7")
    assert task.task_id == "bfcl/multi_turn_long_context_7"
    assert task.data["long_context"] is True
    assert workload.task("bfcl/multi_turn_base_0").data["long_context"] is False


@pytest.mark.parametrize("bad", ["multi_turn_base_0", "bfcl/multi_turn_nope_1",
                                 "bfcl/multi_turn_base_200", "bfcl/multi_turn_base_x"])
def test_unknown_task_ids_are_named(bad: str) -> None:
    with pytest.raises(KeyError) as info:
        BfclWorkload().task(bad)
    assert repr(bad) in str(info.value)


def test_bad_configuration_is_named() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        BfclWorkload(categories=("nope",))
    with pytest.raises(ValueError, match="'test'"):
        BfclWorkload().tasks("test")
    with pytest.raises(TypeError):
        BfclWorkload(categories="multi_turn_base")
    assert normalize_category("miss_param") == "multi_turn_miss_param"


def test_base_task_shape() -> None:
    task = BfclWorkload().task("bfcl/multi_turn_base_0")
    assert task.split == "train"
    assert task.turns[0][0]["role"] == "user" and "final_report.pdf" in task.turns[0][0]["content"]
    assert len(task.turns) == len(task.gold) == len(task.data["ground_truth"])
    involved = task.data["involved_classes"]
    expected = [n for c in involved for n in tools_of_class(c) if n != "cp"]
    assert list(task.tool_names) == expected  # "cp" is the entry's excluded_function
    assert task.data["excluded_function"] == ("cp",)
    assert task.added_tools == {}
    assert task.data["ground_truth"][0][0] == "cd(folder='document')"
    json.dumps({"data": task.data, "added": {str(k): v for k, v in task.added_tools.items()}})
    copy.deepcopy(task)


def test_miss_func_task_holds_out_functions() -> None:
    task = BfclWorkload().task("bfcl/multi_turn_miss_func_0")
    assert task.added_tools == {3: ("sort",)}
    assert "sort" not in task.tool_names
    assert task.turns[3] == ({"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC},)
    assert task.gold[2] == () and task.gold[3][0].name == "sort"
    for task in category_tasks("multi_turn_miss_func"):
        held = {n for names in task.added_tools.values() for n in names}
        assert held and not held & set(task.tool_names)
        assert all(task.turns[t] for t in task.added_tools)


def test_miss_param_has_irrelevance_turns() -> None:
    tasks = category_tasks("multi_turn_miss_param")
    assert sum(1 for t in tasks for turn in t.gold if not turn) > 150

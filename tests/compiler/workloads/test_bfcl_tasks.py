"""BFCL tasks: loading, ids, splits, miss_func / excluded tools."""
from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

from evoharness.compiler.runtime.workload import Workload, workload_factory
from evoharness.compiler.workloads.bfcl.tools import tools_of_class
from evoharness.compiler.workloads.bfcl.workload import CATEGORIES, EXCLUDED, BfclWorkload, category_tasks, normalize_category, split_of

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
        left_out = {s: sum(workload.task(t).split == s and workload.task(t).data["category"] == category for t in EXCLUDED)
                    for s in counts}
        assert {s: counts[s] + left_out[s] for s in counts} == {"train": 81, "dev": 38, "holdout": 81}  # 40/20/40 per stratum
    ids = [t.task_id for ts in by_split.values() for t in ts]
    assert len(ids) == len(set(ids)) == 800 - len(EXCLUDED) == 793
    index_split: dict[int, set[str]] = {}
    for split, tasks in by_split.items():
        for task in tasks:
            assert task.split == split
            index_split.setdefault(task.data["index"], set()).add(split)
    assert all(len(splits) == 1 for splits in index_split.values())  # a scenario's variants share a split


def test_a_scenarios_four_categories_are_one_cluster_and_the_holdout_has_81_of_them() -> None:
    workload = BfclWorkload(categories=ALL)
    sizes = {}
    for split in ("train", "dev", "holdout"):
        members: dict[str, set[tuple[int, str]]] = {}
        for task in workload.tasks(split):
            members.setdefault(task.cluster, set()).add((task.data["index"], task.data["category"]))
        assert all(len({index for index, _ in m}) == 1 for m in members.values()), split
        sizes[split] = Counter(len(m) for m in members.values())
    # 324 holdout tasks in 81 clusters of 4; train lost scenario 173 whole and two tasks of others, dev one task
    assert sizes == {"train": {4: 78, 3: 2}, "dev": {4: 37, 3: 1}, "holdout": {4: 81}}
    assert workload.task("bfcl/multi_turn_miss_func_7").cluster == workload.task("bfcl/multi_turn_base_7").cluster \
        == "bfcl/scenario_7" != workload.task("bfcl/multi_turn_base_8").cluster


def test_every_class_of_dev_and_holdout_is_in_train_in_proportion() -> None:
    workload = BfclWorkload()
    classes = {s: Counter(c for t in workload.tasks(s) for c in t.data["involved_classes"]) for s in ("train", "dev", "holdout")}
    assert set(classes["dev"]) <= set(classes["train"]) and set(classes["holdout"]) <= set(classes["train"])
    assert set(classes["dev"]) == set(classes["holdout"]) == set(classes["train"])  # every class in every split
    for split in ("dev", "holdout"):
        for name, n in classes[split].items():
            # each class's share of a split is within 10 points of its share of train
            assert abs(n / len(workload.tasks(split)) - classes["train"][name] / len(workload.tasks("train"))) < 0.10, (split, name)


def test_the_assignment_is_deterministic_and_seeded_by_the_salt(monkeypatch: pytest.MonkeyPatch) -> None:
    from evoharness.compiler.workloads.bfcl import splits

    classes = {i: ("A",) if i % 2 else ("B", "C") for i in range(50)}
    assert splits.assign(classes) == splits.assign(dict(reversed(list(classes.items()))))
    first = splits.assign(classes)
    monkeypatch.setattr(splits, "SALT", "another")
    assert splits.assign(classes) != first
    assert sorted(Counter(first.values()).items()) == [("dev", 10), ("holdout", 20), ("train", 20)]


def test_a_prefix_of_train_is_a_stratified_sample() -> None:
    train = BfclWorkload().tasks("train")
    prefix = train[:40]
    strata = Counter(t.data["stratum"] for t in train)
    # the first 40 reach every stratum (20 of them) and no stratum takes more than its share plus one round
    assert set(Counter(t.data["stratum"] for t in prefix)) == set(strata)
    assert len({t.data["involved_classes"][0] for t in prefix}) >= 5


def test_default_is_base_only_and_deterministic() -> None:
    tasks = BfclWorkload().tasks("dev")
    assert len(tasks) == 38 and all(t.task_id.startswith("bfcl/multi_turn_base_") for t in tasks)
    assert BfclWorkload().tasks("dev") == tasks


def test_limit_per_split_applies_per_scenario_with_all_its_categories() -> None:
    workload = BfclWorkload(categories=("base", "miss_func"), limit_per_split=3)
    tasks = workload.tasks("holdout")
    assert len(tasks) == 6
    assert [t.data["index"] for t in tasks[::2]] == [t.data["index"] for t in tasks[1::2]]
    assert [t.data["category"] for t in tasks[:2]] == ["multi_turn_base", "multi_turn_miss_func"]
    assert [t.task_id for t in tasks[::2]] == [t.task_id for t in BfclWorkload(limit_per_split=3).tasks("holdout")]


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
    assert task.split == split_of(task.data["index"]) and task.data["stratum"] == "+".join(sorted(task.data["involved_classes"]))
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

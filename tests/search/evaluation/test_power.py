"""Power before paying: the holdout's reach against the margin and the dev pass rate's step, from
split sizes alone."""
from __future__ import annotations

import pytest

from evoharness.compiler.runtime.workload import Task
from evoharness.search.evaluation.power import power, split_power
from evoharness.search.evaluation.stats import quality_test


def tasks(n: int, split: str, per_cluster: int = 1) -> list[Task]:
    return [Task(task_id=f"w/{split}_{i}", split=split, turns=(), tool_names=(), cluster=f"w/{split}_c{i // per_cluster}")  # type: ignore[arg-type]
            for i in range(n)]


def test_the_reach_is_what_an_all_tied_holdout_of_that_many_clusters_shows() -> None:
    for k in (8, 41, 80):
        p = power(holdout_tasks=4 * k, holdout_clusters=k, dev_tasks=160, samples=2, margin=0.05, confidence=0.95)
        tied = quality_test([0.0] * k, [0.0] * k, null=-0.05)
        assert p.reach == pytest.approx(-tied.low, abs=1e-6)
        assert p.holdout_short == (tied.low <= -0.05)


def test_bfcl_sized_holdouts() -> None:
    short = split_power(tasks(164, "holdout", per_cluster=4), tasks(160, "dev", 4), samples=2, margin=0.05, confidence=0.95)
    assert (short.holdout_clusters, round(short.reach, 3), short.clusters_needed) == (41, 0.086, 73)
    (what, fix), = short.problems()
    assert "41 clusters (164 tasks)" in what and "0.086" in what
    assert "at least 73 clusters (about 292 tasks)" in fix and "criteria.margin=0.09" in fix
    ok = split_power(tasks(320, "holdout", per_cluster=4), tasks(160, "dev", 4), samples=2, margin=0.05, confidence=0.95)
    assert ok.holdout_clusters == 80 and ok.reach < 0.05 and ok.problems() == []
    # the same 164 tasks, each its own cluster, can bound the margin
    assert split_power(tasks(164, "holdout"), tasks(160, "dev"), samples=2, margin=0.05, confidence=0.95).problems() == []


def test_a_dev_split_whose_step_exceeds_the_margin_is_named() -> None:
    coarse = split_power(tasks(400, "holdout"), tasks(9, "dev"), samples=2, margin=0.05, confidence=0.95)
    (what, fix), = coarse.problems()
    assert "9 tasks x 2 samples" in what and "0.056" in what and "at least 10 tasks" in fix
    assert split_power(tasks(400, "holdout"), tasks(10, "dev"), samples=2, margin=0.05, confidence=0.95).problems() == []
    # a continuous quality metric has no step
    assert split_power(tasks(400, "holdout"), tasks(9, "dev"), samples=2, margin=0.05, confidence=0.95,
                       metric="score_mean").problems() == []


def test_a_superiority_rule_has_no_margin_to_bound() -> None:
    p = split_power(tasks(8, "holdout"), tasks(4, "dev"), samples=1, margin=None, confidence=0.95)
    assert p.problems() == [] and p.reach > 0.3 and p.clusters_needed is None


def test_a_margin_of_zero_can_never_be_shown_and_says_so() -> None:
    p = split_power(tasks(324, "holdout", per_cluster=4), tasks(152, "dev", 4), samples=2, margin=0.0, confidence=0.95)
    (what, fix), = p.problems()
    assert "within 0:" in what and fix == "no holdout size can show it; set criteria.margin=0.05 or wider"

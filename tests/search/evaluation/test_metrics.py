from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from evoharness.compiler.runtime.trajectory import ModelCallRecord, ToolCallRecord, Trajectory
from evoharness.compiler.runtime.workload import EpisodeScore
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import (
    EvalReport,
    TaskRow,
    aggregate,
    pair_agreement,
    paired_clusters,
    paired_scores,
    quantile_key,
    score_quantile,
)


def ep(task: str = "t0", sample: int = 0, **overrides: Any) -> EpisodeResult:
    base: dict[str, Any] = {
        "task_id": task, "sample": sample, "status": "scored", "passed": True, "score": 1.0,
        "named": {}, "delivered": True, "safety_violations": 0, "cost_usd": 0.01,
        "latency_s": 1.0, "prompt_tokens": 100, "completion_tokens": 10, "model_calls": 2,
        "tool_calls": 1, "tool_errors": 0, "detail": "",
    }
    base.update(overrides)
    if base["status"] == "skipped":
        base.update(passed=False, score=0.0, delivered=False, infra_error="timeout")
    return EpisodeResult(**base)


def report(episodes: list[EpisodeResult], samples: int = 1) -> EvalReport:
    return aggregate(episodes, variant_hash="v", split="dev", samples=samples)


def trajectory(status: str = "completed", infra_error: str | None = None) -> Trajectory:
    calls = (
        ModelCallRecord(turn=0, prompt_tokens=50, completion_tokens=5, cost_usd=0.002,
                        latency_s=0.5, finish_reason="tool_calls"),
        ModelCallRecord(turn=0, prompt_tokens=70, completion_tokens=7, cost_usd=0.003,
                        latency_s=0.25, finish_reason="stop", infra_error=infra_error),
    )
    tools = (
        ToolCallRecord(turn=0, name="ls", arguments={}, result="a", error=None),
        ToolCallRecord(turn=0, name="cd", arguments={"folder": "x"}, result=None, error="no x"),
    )
    return Trajectory(task_id="t0", sample=1, seed=7, variant_hash="v", status=status,  # type: ignore[arg-type]
                      model_calls=calls, tool_calls=tools, infra_error=infra_error)


# --- from_episode ---------------------------------------------------------------------------

def test_from_episode_takes_usage_from_the_trajectory() -> None:
    r = EpisodeResult.from_episode(trajectory(), EpisodeScore(passed=True, score=0.8,
                                                              named={"x": 0.5}))
    assert r.status == "scored" and r.passed and r.score == 0.8 and r.named == {"x": 0.5}
    assert r.cost_usd == pytest.approx(0.005) and r.latency_s == pytest.approx(0.75)
    assert (r.prompt_tokens, r.completion_tokens) == (120, 12)
    assert (r.model_calls, r.tool_calls, r.tool_errors) == (2, 2, 1)


def test_from_episode_infra_error_is_skipped_not_zero() -> None:
    r = EpisodeResult.from_episode(trajectory("infra_error", "HTTP 503"),
                                   EpisodeScore(passed=True, score=1.0))
    assert r.status == "skipped" and r.infra_error == "HTTP 503"
    assert r.cost_usd == pytest.approx(0.005)  # the partial spend is kept


def test_from_episode_without_score_is_skipped() -> None:
    r = EpisodeResult.from_episode(trajectory(), None)
    assert r.status == "skipped" and r.infra_error


def test_contract_gate_zeroes_an_undelivered_episode() -> None:
    score = EpisodeScore(passed=True, score=0.9, named={"x": 1.0}, delivered=False)
    r = EpisodeResult.from_episode(trajectory(), score)
    assert r.status == "scored" and not r.passed and r.score == 0.0 and r.named == {"x": 0.0}
    assert "undelivered" in r.detail


# --- aggregate ------------------------------------------------------------------------------

def test_skipped_episodes_are_excluded_not_zeroed() -> None:
    eps = [ep("t0", passed=True, score=1.0), ep("t1", passed=False, score=0.5),
           ep("t2", status="skipped", cost_usd=0.5)]
    m = report(eps).metrics
    assert m["pass_rate"] == 0.5 and m["score_mean"] == 0.75
    assert m["skipped"] == 1 and m["skipped_rate"] == pytest.approx(1 / 3)
    assert m["episodes"] == 3 and m["scored"] == 2
    assert m["cost_per_task"] == pytest.approx(0.01)  # mean over scored episodes
    assert m["cost_total"] == pytest.approx(0.52)  # every episode's spend
    assert [r.task_id for r in report(eps).tasks] == ["t0", "t1"]


def test_undelivered_counts_as_scored_zero() -> None:
    eps = [ep("t0"), ep("t1", passed=False, score=0.0, delivered=False)]
    m = report(eps).metrics
    assert m["undelivered"] == 1 and m["pass_rate"] == 0.5 and m["score_mean"] == 0.5


def test_score_quantiles_on_constructed_data() -> None:
    scores = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    eps = [ep(f"t{i}", score=s) for i, s in enumerate(scores)]
    m = report(eps).metrics
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        assert m[quantile_key(q)] == pytest.approx(q)
    assert m["score_std"] == pytest.approx(float(np.std(scores)))
    assert score_quantile(eps, 0.33) == pytest.approx(0.33)


def test_quantile_key_names() -> None:
    assert quantile_key(0.1) == "score_p10"
    assert quantile_key(0.95) == "score_p95"
    assert quantile_key(0.29, "style") == "score_p29.style"


def test_latency_tokens_tools_and_safety() -> None:
    eps = [ep(f"t{i}", latency_s=float(i), tool_calls=4, tool_errors=1 if i < 2 else 0,
              safety_violations=1 if i == 1 else 0) for i in range(1, 21)]
    eps.append(ep("tx", status="skipped", latency_s=999.0, safety_violations=1))
    m = report(eps).metrics
    assert m["latency_p50"] == pytest.approx(10.5)
    assert m["latency_p95"] == pytest.approx(float(np.quantile(np.arange(1, 21), 0.95)))
    assert m["tokens_per_task"] == 110
    assert m["tool_failure_rate"] == pytest.approx(1 / 80)
    assert m["safety_violations"] == 2  # a forbidden write counts even when skipped


def test_tool_failure_rate_without_tool_calls_is_zero() -> None:
    assert report([ep(tool_calls=0, tool_errors=0)]).metrics["tool_failure_rate"] == 0.0


def test_named_scores_and_task_floor() -> None:
    eps = [ep("t0", sample=0, score=1.0, named={"a": 1.0}),
           ep("t0", sample=1, score=0.5, named={"a": 0.0, "b": 1.0}),
           ep("t1", sample=0, score=0.2, named={"a": 0.5})]
    m = report(eps, samples=2).metrics
    assert m["score.a"] == pytest.approx(0.5) and m["score.b"] == 1.0
    assert m["task_score_min"] == pytest.approx(0.2)
    assert m["task_score_min.a"] == pytest.approx(0.5)
    row = report(eps, samples=2).task("t0")
    assert row is not None and row.scored == 2 and row.score_mean == 0.75
    assert row.score_std == pytest.approx(0.25) and row.pass_fraction == 1.0


@pytest.mark.parametrize(
    "passes, expected",
    [([True, True], 1.0), ([True, False], 0.0), ([True, True, False], 1 / 3),
     ([False, False, False, False], 1.0), ([True, True, False, False], 2 / 6)],
)
def test_pair_agreement(passes: list[bool], expected: float) -> None:
    assert pair_agreement(passes) == pytest.approx(expected)


def test_determinism_is_mean_agreement_over_tasks_with_two_samples() -> None:
    eps = [ep("t0", 0, passed=True), ep("t0", 1, passed=True),  # agreement 1
           ep("t1", 0, passed=True), ep("t1", 1, passed=False),  # agreement 0
           ep("t2", 0, passed=True), ep("t2", 1, status="skipped"),  # one scored: not counted
           ep("t3", 0, passed=True), ep("t3", 1, passed=True), ep("t3", 2, passed=False)]
    assert report(eps, samples=3).metrics["determinism"] == pytest.approx((1 + 0 + 1 / 3) / 3)


def test_undefined_metrics_are_omitted_not_nan() -> None:
    one_sample = report([ep("t0"), ep("t1")]).metrics
    assert "determinism" not in one_sample
    all_skipped = report([ep(status="skipped")]).metrics
    assert "pass_rate" not in all_skipped and "latency_p95" not in all_skipped
    assert all_skipped["skipped_rate"] == 1.0
    assert all(np.isfinite(v) for v in all_skipped.values())


def test_samples_must_be_positive() -> None:
    with pytest.raises(ValueError, match="samples=0"):
        report([ep()], samples=0)


def test_to_dict_from_dict_round_trip_through_json() -> None:
    eps = [ep("t0", 0, named={"a": 0.5}), ep("t0", 1, passed=False, score=0.0),
           ep("t1", 0, status="skipped")]
    original = report(eps, samples=2)
    restored = EvalReport.from_dict(json.loads(json.dumps(original.to_dict())))
    assert restored == original


def test_task_rows_carry_the_cluster_the_evaluator_gives_and_it_round_trips_through_eval_json() -> None:
    eps = [ep("t0"), ep("t1", passed=False, score=0.0), ep("t2"), ep("t3", status="skipped")]
    r = aggregate(eps, variant_hash="v", split="dev", samples=1, clusters={"t0": "s/0", "t1": "s/0", "t3": "s/1"})
    assert [(row.task_id, row.cluster) for row in r.tasks] == [("t0", "s/0"), ("t1", "s/0"), ("t2", "t2")]  # t2: named by none
    data = json.loads(json.dumps(r.to_dict()))
    assert [row["cluster"] for row in data["tasks"]] == ["s/0", "s/0", "t2"]
    assert EvalReport.from_dict(data) == r
    assert report(eps).task("t0").cluster == "t0"  # type: ignore[union-attr]  # no clusters given: each task its own


def test_a_row_from_an_eval_json_written_before_clusters_reads_as_its_own_task() -> None:
    data = json.loads(json.dumps(aggregate([ep("t0"), ep("t1")], variant_hash="v", split="dev", samples=1,
                                           clusters={"t0": "s/0", "t1": "s/0"}).to_dict()))
    for row in data["tasks"]:
        del row["cluster"]
    assert [row.cluster for row in EvalReport.from_dict(data).tasks] == ["t0", "t1"]
    assert TaskRow("t9", 1, 1.0, 1.0, 0.0, 0.01, 1.0).cluster == "t9"  # positional rows, as before
    assert TaskRow("t9", 1, 1.0, 1.0, 0.0, 0.01, 1.0, cluster="s/4").cluster == "s/4"


def test_paired_clusters_follow_paired_scores_order() -> None:
    clusters = {"t0": "s/b", "t1": "s/a", "t2": "s/b", "t3": "s/c"}
    a = aggregate([ep("t2", score=0.5), ep("t0", score=0.2), ep("t1", score=0.4), ep("t3", status="skipped")],
                  variant_hash="a", split="dev", samples=1, clusters=clusters)
    b = aggregate([ep("t3"), ep("t1", score=0.6), ep("t2"), ep("t0", score=0.8)],
                  variant_hash="b", split="dev", samples=1, clusters=clusters)
    tasks, x, _ = paired_scores(a, b)
    assert tasks == ("t0", "t1", "t2") and x.tolist() == [0.2, 0.4, 0.5]
    assert paired_clusters(a, b) == ("s/b", "s/a", "s/b") == tuple(clusters[t] for t in tasks)
    assert paired_clusters(b, a) == paired_clusters(a, b)


def test_paired_clusters_refuse_reports_of_two_clusterings() -> None:
    a = aggregate([ep("t0"), ep("t1")], variant_hash="a" * 16, split="dev", samples=1, clusters={"t0": "s/0", "t1": "s/0"})
    b = aggregate([ep("t0"), ep("t1")], variant_hash="b" * 16, split="dev", samples=1)
    with pytest.raises(ValueError, match=r"task t0 is in cluster 's/0' in one report \(aaaaaaaaaaaa\) and 't0' in the other"):
        paired_clusters(a, b)


def test_paired_scores_uses_tasks_scored_in_both() -> None:
    a = report([ep("t0", score=0.2), ep("t1", score=0.4), ep("t2", status="skipped")])
    b = report([ep("t2", score=1.0), ep("t1", score=0.6), ep("t0", score=0.8),
                ep("t3", score=1.0)])
    ids, a_means, b_means = paired_scores(a, b)
    assert ids == ("t0", "t1")
    assert a_means.tolist() == [0.2, 0.4] and b_means.tolist() == [0.8, 0.6]

"""The decision headline on constructed summaries: each rule, each verdict, the incumbent kept."""
from __future__ import annotations

from typing import Any

from evoharness.search.records.headline import headline


def summary(verdict: str, *, decision: str = "cheapest_noninferior", diff: float = -0.02, low: float = -0.045,
            high: float = 0.005, champion_cost: float = 0.012, changes: str = "model=sim_small, +step verify") -> dict[str, Any]:
    return {
        "baseline": {"variant_hash": "b" * 64, "holdout": {"pass_rate": 0.83, "cost_per_task": 0.077, "latency_p95": 2.0}},
        "champion": {"variant_hash": "c" * 64, "changes": changes,
                     "holdout": {"pass_rate": 0.81, "cost_per_task": champion_cost, "latency_p95": 1.2}},
        "decision": {"rule": decision, "margin": 0.05},
        "claim": {"verdict": verdict, "decision": decision, "metric": "pass_rate", "margin": 0.05, "min_effect": 0.03,
                  "mean_diff": diff, "low": low, "high": high, "confidence": 0.95, "n": 123},
    }


def test_a_cheaper_non_inferior_win_names_what_ships_quality_interval_and_cost() -> None:
    line = headline(summary("win"))
    assert line.startswith("decision cheapest_noninferior (margin 0.05): ship model=sim_small, +step verify;")
    assert "pass_rate 0.810 vs 0.830" in line and "-0.020, 95% CI -0.045..+0.005: non-inferior within 0.05 and cheaper" in line
    assert "cost/task -84% ($0.0120 vs $0.0770)" in line and "latency p95 -40%" in line and line.endswith("verdict win")


def test_an_unconfirmed_pick_keeps_the_incumbent_and_says_how_many_tasks_would_decide() -> None:
    line = headline(summary("inconclusive", diff=0.024, low=-0.073, high=0.122))
    assert "keep the incumbent: model=sim_small, +step verify is not confirmed" in line and "ship " not in line
    # room = 0.024 + 0.05 = 0.074 against a lower arm of 0.024 + 0.073 = 0.097: (0.097 / 0.074)^2 = 1.7
    assert ("if the observed difference is real, about 1.7x the 123 tasks would "
            "(the interval's lower arm would need to be 0.074, not 0.097)") in line


def test_no_task_count_hint_when_more_tasks_would_not_help() -> None:
    line = headline(summary("inconclusive", diff=-0.06, low=-0.15, high=0.03))
    assert "too few holdout tasks" not in line and "verdict inconclusive" in line


def test_best_quality_words_superiority() -> None:
    line = headline(summary("win", decision="best_quality", diff=0.12, low=0.05, high=0.2, champion_cost=0.1))
    assert line.startswith("decision best_quality (min_effect 0.03): ship ")
    assert "better by more than 0.03" in line and "cost/task +30%" in line
    assert "not better" in headline(summary("no_win", decision="best_quality", diff=0.0, low=-0.05, high=0.05))


def test_the_incumbent_as_champion_is_said_plainly() -> None:
    s = summary("inconclusive", changes="baseline")
    assert headline(s) == "decision cheapest_noninferior (margin 0.05): keep the incumbent; no front member beats it on dev"


def test_a_named_reference_is_what_the_champion_is_compared_with() -> None:
    s = summary("win")
    s["reference"] = {"name": "sim_large", "variant_hash": "r" * 64,
                      "holdout": {"pass_rate": 0.85, "cost_per_task": 0.1, "latency_p95": 2.4}}
    line = headline(s)
    assert "pass_rate 0.810 vs 0.850 for the reference (sim_large)" in line and "cost/task -88%" in line


def test_nothing_cheaper_keeps_the_incumbent_and_the_seal() -> None:
    s = summary("no_win", changes="baseline")
    s["decision"]["evidence"] = "none"
    assert headline(s) == ("decision cheapest_noninferior (margin 0.05): keep the incumbent; no front member is cheaper than "
                           "the incumbent and within 0.05 of its dev quality, so no candidate was claimed and the holdout stays sealed")


def test_an_inconclusive_cost_side_is_not_worded_as_a_quality_failure() -> None:
    s = summary("inconclusive", diff=0.0, low=-0.04, high=0.2)
    s["claim"]["cost_saving_low"] = -0.001
    line = headline(s)
    assert "non-inferior within 0.05, but the cost saving is not shown (saving CI low -0.0010)" in line
    assert "too few holdout tasks" not in line  # quality is decided: more tasks are not what is missing


def test_a_zero_or_nan_reference_metric_is_not_a_percentage() -> None:
    s = summary("no_win")
    s["baseline"]["holdout"] = {"pass_rate": 0.83, "cost_per_task": 0.0, "latency_p95": float("nan")}
    line = headline(s)
    assert "cost/task n/a (compared with 0)" in line and "latency p95 n/a" in line and "nan" not in line

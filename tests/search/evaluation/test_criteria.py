from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from evoharness.search.evaluation.criteria import (
    DEFAULT_OBJECTIVES,
    KINDS,
    CriteriaConfig,
    CriterionConfig,
    Objective,
    build_criteria,
    constraint_values,
    evaluate_criteria,
    objective_values,
    objectives,
    rank_key,
)
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import aggregate

CONF = Path(__file__).resolve().parents[3] / "evoharness" / "conf" / "criteria"


def build(*entries: dict[str, Any], aggregation: str = "all") -> tuple[Any, ...]:
    return build_criteria({"criteria": list(entries), "aggregation": aggregation})


# --- every kind at its boundary ---------------------------------------------------------------

KIND_TABLE = [
    # entry, metric key read, value exactly at the threshold, value just past it (violated)
    ({"kind": "pass_rate", "threshold": 0.4}, "pass_rate", 0.4, 0.39),
    ({"kind": "score_floor", "threshold": 0.3}, "task_score_min", 0.3, 0.29),
    ({"kind": "score_floor", "threshold": 0.3, "scope": "by_name", "score_name": "x"},
     "task_score_min.x", 0.3, 0.29),
    ({"kind": "score_mean", "threshold": 0.6}, "score_mean", 0.6, 0.59),
    ({"kind": "score_mean", "threshold": 0.6, "scope": "by_name", "score_name": "x"},
     "score.x", 0.6, 0.59),
    ({"kind": "score_quantile", "threshold": 0.2, "quantile": 0.1}, "score_p10", 0.2, 0.19),
    ({"kind": "score_quantile", "threshold": 0.2, "quantile": 0.9, "scope": "by_name",
      "score_name": "x"}, "score_p90.x", 0.2, 0.19),
    ({"kind": "latency_p95", "threshold": 10.0}, "latency_p95", 10.0, 10.01),
    ({"kind": "cost_ceiling", "threshold": 0.02}, "cost_per_task", 0.02, 0.0201),
    ({"kind": "determinism", "threshold": 0.8}, "determinism", 0.8, 0.79),
    ({"kind": "tool_failure_rate", "threshold": 0.1}, "tool_failure_rate", 0.1, 0.11),
]


def test_kind_table_covers_every_kind() -> None:
    assert {row[0]["kind"] for row in KIND_TABLE} == set(KINDS)


@pytest.mark.parametrize("entry, metric, at, past", KIND_TABLE)
def test_kind_boundary(entry: dict[str, Any], metric: str, at: float, past: float) -> None:
    (criterion,) = build(entry)
    assert criterion.metric == metric
    on = evaluate_criteria({metric: at}, (criterion,)).results[0]
    assert on.satisfied and on.value == at and on.margin == pytest.approx(0.0, abs=1e-12)
    off = evaluate_criteria({metric: past}, (criterion,)).results[0]
    assert not off.satisfied and off.margin < 0


def test_boundary_tolerates_float_rounding() -> None:
    (c,) = build({"kind": "pass_rate", "threshold": 0.3})
    assert evaluate_criteria({"pass_rate": 0.1 + 0.2 - 1e-16 * 3}, (c,)).passed


def test_missing_metric_is_unmeasured_and_unsatisfied() -> None:
    (c,) = build({"kind": "determinism", "threshold": 0.5})
    r = evaluate_criteria({"pass_rate": 1.0}, (c,)).results[0]
    assert r.value is None and not r.satisfied and r.margin == -1.0


def test_margins_are_absolute_for_rates_and_relative_for_latency_and_cost() -> None:
    crit = build({"kind": "pass_rate", "threshold": 0.4},
                 {"kind": "latency_p95", "threshold": 10.0})
    results = evaluate_criteria({"pass_rate": 0.5, "latency_p95": 5.0}, crit).results
    assert [r.margin for r in results] == pytest.approx([0.1, 0.5])


def test_named_quantile_is_computed_from_the_report() -> None:
    eps = [EpisodeResult(task_id=f"t{i}", sample=0, status="scored", passed=True, score=1.0,
                         named={"x": i / 10}, delivered=True, safety_violations=0, cost_usd=0.0,
                         latency_s=1.0, prompt_tokens=1, completion_tokens=1, model_calls=1,
                         tool_calls=0, tool_errors=0, detail="") for i in range(11)]
    report = aggregate(eps, variant_hash="v", split="dev", samples=1)
    (c,) = build({"kind": "score_quantile", "quantile": 0.3, "threshold": 0.3,
                  "scope": "by_name", "score_name": "x"})
    r = evaluate_criteria(report, (c,)).results[0]
    assert r.value == pytest.approx(0.3) and r.satisfied
    # the same quantile as a search objective is measured the same way, not read as missing
    (o,) = build({"kind": "score_quantile", "quantile": 0.3, "threshold": None, "objective": True, "scope": "by_name", "score_name": "x"})
    assert objective_values(report, (o,), objectives((o,))) == (pytest.approx(0.3),)
    assert objective_values(report, (o,), objectives(())) == tuple(report.metrics.get(m)
                                                                   for m in ("score_mean", "cost_per_task", "latency_p95"))


# --- aggregation ---------------------------------------------------------------------------

SOFT = ({"kind": "pass_rate", "threshold": 0.5}, {"kind": "latency_p95", "threshold": 10.0})
METRICS = {"pass_rate": 0.45, "latency_p95": 5.0}  # margins -0.05 and +0.5


def test_all_requires_every_criterion() -> None:
    v = evaluate_criteria(METRICS, build(*SOFT), "all")
    assert not v.passed and v.feasible and v.weighted_score == pytest.approx(0.225)


def test_weighted_lets_soft_criteria_trade_off() -> None:
    v = evaluate_criteria(METRICS, build(*SOFT), "weighted")
    assert v.passed and v.weighted_score == pytest.approx(0.225)


def test_weights_shift_the_trade_off() -> None:
    heavy = ({**SOFT[0], "weight": 20.0}, SOFT[1])
    v = evaluate_criteria(METRICS, build(*heavy), "weighted")
    assert not v.passed and v.weighted_score == pytest.approx((20 * -0.05 + 0.5) / 21)


def test_margins_are_clipped_in_the_weighted_score() -> None:
    crit = build({"kind": "latency_p95", "threshold": 1.0}, {"kind": "pass_rate", "threshold": 0.5})
    v = evaluate_criteria({"latency_p95": 100.0, "pass_rate": 1.0}, crit, "weighted")
    assert v.results[0].margin == pytest.approx(-99.0)
    assert v.weighted_score == pytest.approx((-1.0 + 0.5) / 2)


def test_hard_criterion_cannot_be_bought_back() -> None:
    crit = build({**SOFT[0], "hard": True}, {**SOFT[1], "weight": 100.0})
    v = evaluate_criteria(METRICS, crit, "weighted")
    assert v.weighted_score > 0
    assert not v.feasible and not v.passed and v.hard_violations == ("pass_rate",)


def test_weighted_score_is_monotone_in_each_metric() -> None:
    crit = build(*SOFT)
    worse = evaluate_criteria({"pass_rate": 0.45, "latency_p95": 6.0}, crit, "weighted")
    better = evaluate_criteria({"pass_rate": 0.46, "latency_p95": 6.0}, crit, "weighted")
    faster = evaluate_criteria({"pass_rate": 0.46, "latency_p95": 5.0}, crit, "weighted")
    assert worse.weighted_score < better.weighted_score < faster.weighted_score


def test_objective_only_criterion_is_not_judged() -> None:
    crit = build({"kind": "cost_ceiling", "threshold": None, "objective": True})
    v = evaluate_criteria({}, crit, "all")
    assert v.results == () and v.passed and v.weighted_score == 0.0
    assert v.objectives == (Objective("cost_per_task", "minimize"),)


def test_unknown_aggregation_in_evaluate() -> None:
    with pytest.raises(ValueError, match="aggregation='best'"):
        evaluate_criteria({}, (), "best")


# --- validation ----------------------------------------------------------------------------

BAD_ENTRIES = [
    ({"kind": "foo", "threshold": 0.5}, "criteria.criteria[1].kind: 'foo'", "pass_rate"),
    ({"kind": "pass_rate"}, "criteria.criteria[1].threshold: missing", "objective: true"),
    ({"kind": "pass_rate", "hard": True, "objective": True}, "criteria.criteria[1].threshold",
     "set a threshold"),
    ({"kind": "pass_rate", "threshold": 40}, "threshold: 40.0 is outside [0, 1]", "0.5"),
    ({"kind": "latency_p95", "threshold": 0}, "threshold: 0.0 must be > 0", "seconds"),
    ({"kind": "score_quantile", "threshold": 0.5}, "quantile: None is not in [0, 1]",
     "quantile: 0.1"),
    ({"kind": "score_quantile", "threshold": 0.5, "quantile": 1.5}, "quantile: 1.5", "[0, 1]"),
    ({"kind": "pass_rate", "threshold": 0.5, "quantile": 0.5}, "quantile: 0.5 is set",
     "remove quantile"),
    ({"kind": "score_mean", "threshold": 0.5, "scope": "by_name"},
     "criteria.criteria[1].score_name: missing", "set score_name"),
    ({"kind": "pass_rate", "threshold": 0.5, "scope": "by_name", "score_name": "x"},
     "scope: 'by_name' does not apply to kind 'pass_rate'", "scope: any"),
    ({"kind": "score_mean", "threshold": 0.5, "score_name": "x"}, "score_name: 'x' is set",
     "scope: by_name"),
    ({"kind": "score_mean", "threshold": 0.5, "scope": "each"}, "scope: 'each'", "by_name"),
    ({"kind": "score_mean", "threshold": 0.5, "weight": 0}, "weight: 0.0", "positive"),
    ({"kind": "score_mean", "threshold": 0.5, "treshold": 0.5}, "criteria.criteria[1]:",
     "treshold"),
    ({"threshold": 0.5}, "criteria.criteria[1]:", "kind"),
    ({"kind": "pass_rate", "threshold": 0.5}, "criteria.criteria[1].name: 'pass_rate'",
     "unique name"),
]


@pytest.mark.parametrize("entry, where, fix", BAD_ENTRIES)
def test_validation_errors_name_the_field_and_the_fix(
    entry: dict[str, Any], where: str, fix: str
) -> None:
    with pytest.raises(ValueError) as info:
        build({"kind": "pass_rate", "threshold": 0.5}, entry)
    message = str(info.value)
    assert where in message and fix in message and "\n" not in message


def test_bad_aggregation_is_named() -> None:
    with pytest.raises(ValueError, match=r"criteria.aggregation: 'any' .*'weighted'"):
        build({"kind": "pass_rate", "threshold": 0.5}, aggregation="any")


def test_error_path_prefix_is_configurable() -> None:
    with pytest.raises(ValueError, match=r"^search.criteria.criteria\[0\].kind"):
        build_criteria({"criteria": [{"kind": "nope", "threshold": 1}]}, path="search.criteria")


def test_default_names_are_derived_and_dataclass_config_accepted() -> None:
    cfg = CriteriaConfig(criteria=[
        CriterionConfig(kind="score_mean", threshold=0.5, scope="by_name", score_name="x"),
        CriterionConfig(kind="score_mean", threshold=0.5),
    ])
    assert [c.name for c in build_criteria(cfg)] == ["score_mean:by_name:x", "score_mean"]


# --- objectives, constraints, ranking --------------------------------------------------------

def test_objectives_default_when_none_flagged() -> None:
    assert objectives(build({"kind": "pass_rate", "threshold": 0.5})) == DEFAULT_OBJECTIVES
    assert DEFAULT_OBJECTIVES == (Objective("score_mean", "maximize"),
                                  Objective("cost_per_task", "minimize"),
                                  Objective("latency_p95", "minimize"))


def test_objectives_from_flags_in_order_deduped_by_metric() -> None:
    crit = build(
        {"name": "a", "kind": "latency_p95", "threshold": 30.0, "objective": True},
        {"name": "b", "kind": "pass_rate", "threshold": 0.3, "objective": True},
        {"name": "c", "kind": "latency_p95", "threshold": 60.0, "objective": True},
        {"name": "d", "kind": "cost_ceiling", "threshold": 0.1},
    )
    assert objectives(crit) == (Objective("latency_p95", "minimize"),
                                Objective("pass_rate", "maximize"))


def test_constraint_values_one_per_hard_criterion_in_optuna_convention() -> None:
    crit = build(
        {"name": "ok", "kind": "pass_rate", "threshold": 0.4, "hard": True},
        {"name": "edge", "kind": "tool_failure_rate", "threshold": 0.1, "hard": True},
        {"name": "bad", "kind": "latency_p95", "threshold": 10.0, "hard": True},
        {"name": "gone", "kind": "determinism", "threshold": 0.5, "hard": True},
        {"name": "soft", "kind": "score_mean", "threshold": 0.9},
    )
    metrics = {"pass_rate": 0.6, "tool_failure_rate": 0.1, "latency_p95": 15.0, "score_mean": 0}
    values = constraint_values(evaluate_criteria(metrics, crit))
    assert len(values) == 4
    assert values[0] == pytest.approx(-0.2) and values[1] <= 0
    assert values[2] == pytest.approx(0.5) and values[3] == 1.0


def test_rank_key_feasible_first_then_score_then_objectives() -> None:
    crit = build({"kind": "tool_failure_rate", "threshold": 0.2, "hard": True},
                 {"kind": "pass_rate", "threshold": 0.3})

    def key(metrics: dict[str, float]) -> tuple[float, ...]:
        return rank_key(evaluate_criteria(metrics, crit, "weighted"), metrics)

    base = {"score_mean": 0.5, "cost_per_task": 0.01, "latency_p95": 5.0}
    infeasible_strong = key({**base, "tool_failure_rate": 0.5, "pass_rate": 1.0})
    feasible_weak = key({**base, "tool_failure_rate": 0.2, "pass_rate": 0.3})
    feasible_cheap = key({**base, "tool_failure_rate": 0.2, "pass_rate": 0.3,
                          "cost_per_task": 0.001})
    feasible_no_cost = key({"tool_failure_rate": 0.2, "pass_rate": 0.3, "score_mean": 0.5})
    assert feasible_weak > infeasible_strong
    assert feasible_cheap > feasible_weak > feasible_no_cost


# --- shipped configs -----------------------------------------------------------------------

def load(path: Path) -> DictConfig:
    raw = OmegaConf.load(path)
    raw.pop("defaults", None)  # Hydra's composition list, not part of the schema
    cfg = OmegaConf.merge(OmegaConf.structured(CriteriaConfig), raw)
    assert isinstance(cfg, DictConfig)
    return cfg


@pytest.mark.parametrize("path", sorted(CONF.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_criteria_configs_load_as_structured_config(path: Path) -> None:
    cfg = load(path)
    criteria = build_criteria(cfg)
    assert criteria and objectives(criteria)


def test_default_config_is_met_by_a_plausible_baseline() -> None:
    cfg = load(CONF / "default.yaml")
    baseline = {"pass_rate": 0.4, "score_mean": 0.45, "tool_failure_rate": 0.25,
                "cost_per_task": 0.002, "latency_p95": 8.0}
    verdict = evaluate_criteria(baseline, build_criteria(cfg), str(cfg.aggregation))
    assert verdict.feasible and verdict.passed

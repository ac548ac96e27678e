"""The decision rules on small tables: each rule's bar, its pick among dev candidates, its holdout
test and its wording; the fastest-noninferior rule picks the fastest qualifying member where the
cheapest rule picks another."""
from __future__ import annotations

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.search.evaluation.claim import make_claim
from evoharness.search.evaluation.decision import (
    RULES,
    BestQuality,
    CheapestNoninferior,
    DevCandidate,
    FastestNoninferior,
    decision_rule,
    rule_of_record,
)
from evoharness.search.evaluation.metrics import EvalReport, TaskRow

REFERENCE = {"pass_rate": 0.85, "cost_per_task": 0.08, "latency_p95": 10.0}


def candidate(quality: float, cost: float, latency: float, *, low: float = 0.0, feasible: bool = True) -> DevCandidate:
    return DevCandidate(quality, low, cost, feasible, latency)


def report(passes: list[float], *, cost: float, latency: float, name: str = "h") -> EvalReport:
    rows = tuple(TaskRow(f"t{i:02d}", 1, p, p, 0.0, cost, latency) for i, p in enumerate(passes))
    metrics = {"pass_rate": sum(passes) / len(passes), "cost_per_task": cost, "latency_p95": latency}
    return EvalReport(name, "holdout", 1, (), metrics, rows)


def test_each_rule_has_its_bar() -> None:
    assert CheapestNoninferior(margin=0.07).bar == 0.07
    assert FastestNoninferior(margin=0.02).bar == 0.02
    assert BestQuality(margin=0.07).bar is None
    assert decision_rule("fastest_noninferior", margin=0.1) == FastestNoninferior(margin=0.1)
    assert set(RULES) == {CheapestNoninferior.name, FastestNoninferior.name, BestQuality.name}


def test_the_fastest_rule_picks_the_fastest_qualifying_member_where_the_cheapest_rule_picks_another() -> None:
    table = [candidate(0.90, 0.10, 3.0),  # dearer than the reference: the cheapest rule never takes it
             candidate(0.86, 0.02, 8.0),  # the cheapest that is as good
             candidate(0.84, 0.05, 2.0),  # the fastest that is as good
             candidate(0.60, 0.001, 1.0, low=-0.3)]  # fastest and cheapest of all, but far worse
    cheapest = CheapestNoninferior(margin=0.05).pick(table, reference=REFERENCE, quality="pass_rate")
    fastest = FastestNoninferior(margin=0.05).pick(table, reference=REFERENCE, quality="pass_rate")
    assert cheapest == (1, "interval") and fastest == (2, "interval")


def test_the_fastest_rule_takes_nothing_slower_than_the_reference() -> None:
    table = [candidate(0.90, 0.01, 12.0), candidate(0.86, 0.02, 10.0)]
    assert FastestNoninferior(margin=0.05).pick(table, reference=REFERENCE, quality="pass_rate") is None
    assert CheapestNoninferior(margin=0.05).pick(table, reference=REFERENCE, quality="pass_rate") == (0, "interval")


def test_each_rule_claims_its_own_question_on_the_holdout() -> None:
    passes = [1.0] * 60 + [0.0] * 20  # 80 tied tasks: enough to bound a 0.05 margin (73 are)
    baseline = report(passes, cost=0.01, latency=4.0, name="base")
    faster = report(passes, cost=0.01, latency=1.0, name="champ")  # as good, as dear, four times as fast
    kwargs = {"confidence": 0.95, "resamples": 500, "min_effect": 0.03, "seed": 1, "hashes": {}}
    fast = make_claim(baseline, faster, rule=FastestNoninferior(margin=0.05), **kwargs)
    cheap = make_claim(baseline, faster, rule=CheapestNoninferior(margin=0.05), **kwargs)
    best = make_claim(baseline, faster, rule=BestQuality(), **kwargs)
    assert fast["verdict"] == "win" and fast["decision"] == "fastest_noninferior" and fast["latency_saving"] == pytest.approx(3.0)
    assert cheap["verdict"] != "win" and "cost_saving_low" in cheap and "latency_saving" not in cheap
    assert best["verdict"] != "win" and "margin" not in best


@pytest.mark.parametrize("rule, verdict, expected", [
    (CheapestNoninferior(margin=0.05), "win", "non-inferior within 0.05 and cheaper"),
    (FastestNoninferior(margin=0.05), "win", "non-inferior within 0.05 and faster"),
    (BestQuality(), "win", "better by more than 0.03"),
    (FastestNoninferior(margin=0.05), "no_win", "worse by more than 0.05"),
    (CheapestNoninferior(margin=0.05), "inconclusive", "non-inferior within 0.05, but the cost saving is not shown"),
    (BestQuality(), "equivalent", "equal within ±0.03: no improvement"),
])
def test_each_rule_words_its_verdict(rule, verdict: str, expected: str) -> None:
    claim = {"low": -0.08, "high": -0.06} if verdict == "no_win" else {"low": -0.01, "high": 0.05}
    assert rule.meaning(verdict, claim, min_effect=0.03) == expected


def test_a_written_claim_names_its_rule() -> None:
    assert rule_of_record({"decision": "fastest_noninferior", "margin": 0.1}, {}) == FastestNoninferior(margin=0.1)
    assert rule_of_record({}, {"rule": "best_quality"}) == BestQuality()


def test_only_a_noninferiority_rule_takes_a_named_reference() -> None:
    assert FastestNoninferior().check_reference("sim_large") == "sim_large"
    with pytest.raises(ConfigError, match="criteria.reference"):
        BestQuality().check_reference("sim_large")
    with pytest.raises(ConfigError, match="unknown decision rule 'cheapest'"):
        decision_rule("cheapest")

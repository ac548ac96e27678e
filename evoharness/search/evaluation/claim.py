"""The holdout claim: champion against baseline on the sealed split, on the quality metric the
search selected by, under the decision rule's test (search/evaluation/stats.py), with the task's
cluster as the unit of evidence."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evoharness.search.evaluation.decision import BestQuality, DecisionRule
from evoharness.search.evaluation.metrics import EvalReport, paired_scores
from evoharness.search.evaluation.stats import MIN_DISCORDANT


def make_claim(
    baseline: EvalReport, champion: EvalReport, *, confidence: float, resamples: int, min_effect: float, seed: int,
    hashes: Mapping[str, str], metric: str = "pass_rate", rule: DecisionRule | None = None,
) -> dict[str, Any]:
    """The claim's record (claim.json without its schema version and look count); ``rule`` decides
    the test (default: best quality, a superiority test)."""
    rule = rule or BestQuality()
    tested = rule.claim(baseline, champion, metric=metric, confidence=confidence, resamples=resamples, min_effect=min_effect,
                        seed=seed)
    task_ids = paired_scores(baseline, champion, metric=metric)[0]
    verdict, result, test, extra = tested.verdict, tested.quality, tested.test, {"decision": rule.name, **tested.extra}
    bm, cm = baseline.metrics, champion.metrics
    return {
        "verdict": verdict,
        "metric": metric,
        "test": test,
        **extra,
        "mean_diff": result.mean_diff,
        "low": result.low,
        "high": result.high,
        "p_value": result.p_value,
        "alpha": (1.0 - confidence) / 2,
        "n": result.n,
        "unit": result.unit,
        "clusters": result.clusters,
        "design_effect": result.design_effect,
        "discordant": result.discordant,
        "min_discordant": MIN_DISCORDANT,
        "confidence": confidence,
        "min_effect": min_effect,
        "resamples": resamples,
        "baseline_hash": baseline.variant_hash,
        "champion_hash": champion.variant_hash,
        "pass_rate_delta": cm.get("pass_rate", 0.0) - bm.get("pass_rate", 0.0),
        "cost_delta": cm.get("cost_per_task", 0.0) - bm.get("cost_per_task", 0.0),
        "latency_delta": cm.get("latency_p95", 0.0) - bm.get("latency_p95", 0.0),
        "tasks": list(task_ids),
        "hashes": dict(hashes),
        "note": "only verdict 'win' is an improvement; 'no_win', 'inconclusive' and 'equivalent' (within ±min_effect) are not",
    }


def no_candidate_claim(*, baseline_hash: str, champion_hash: str, confidence: float, resamples: int, min_effect: float,
                       hashes: Mapping[str, str], metric: str = "pass_rate", rule: DecisionRule | None = None) -> dict[str, Any]:
    """The claim's record when the champion is the incumbent itself: there is nothing to test, so
    the holdout is not run (no paid episode, no look) and the verdict is ``no_win`` on no tasks.
    ``baseline_hash`` is the side a claim would be against (the incumbent, or a named reference)."""
    rule = rule or BestQuality()
    extra = {"margin": rule.margin} if rule.bar is not None else {}
    return {
        "verdict": "no_win", "metric": metric, "test": "none: the champion is the incumbent, so nothing was tested on the holdout",
        "decision": rule.name, **extra, "mean_diff": 0.0, "low": 0.0, "high": 0.0, "p_value": 1.0, "alpha": (1.0 - confidence) / 2,
        "n": 0, "clusters": 0, "discordant": 0, "min_discordant": MIN_DISCORDANT, "confidence": confidence, "min_effect": min_effect,
        "resamples": resamples, "baseline_hash": baseline_hash, "champion_hash": champion_hash, "pass_rate_delta": 0.0,
        "cost_delta": 0.0, "latency_delta": 0.0, "tasks": [], "hashes": dict(hashes),
        "note": "no candidate was claimed: the incumbent stays and the holdout stays sealed",
    }


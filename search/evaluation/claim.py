"""The holdout claim: champion against baseline on the sealed split, on the quality metric the
search selected by: a sign-flip permutation test and a BCa interval over paired tasks."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evoharness.search.evaluation.metrics import EvalReport, paired_scores
from evoharness.search.evaluation.stats import MIN_DISCORDANT, noninferiority_verdict, paired_test, superiority_verdict


def make_claim(
    baseline: EvalReport, champion: EvalReport, *, confidence: float, resamples: int, min_effect: float, seed: int,
    hashes: Mapping[str, str], metric: str = "pass_rate", decision: str = "best_quality", margin: float = 0.05,
) -> dict[str, Any]:
    task_ids, a, b = paired_scores(baseline, champion, metric=metric)
    extra: dict[str, Any] = {"decision": decision}
    if decision == "cheapest_noninferior":
        result = paired_test(a, b, shift=-margin, resamples=resamples, confidence=confidence, seed=seed)
        _, cost_a, cost_b = paired_scores(baseline, champion, metric="cost_per_task")
        saving = paired_test(cost_b, cost_a, shift=0.0, resamples=resamples, confidence=confidence, seed=seed)  # baseline - champion
        verdict = noninferiority_verdict(result, saving, margin=margin)
        test = (f"non-inferiority: {metric} difference > -{margin:g} (one-sided sign-flip test, BCa interval) "
                "and per-task cost saving > 0 (the same)")
        extra |= {"margin": margin, "cost_saving": saving.mean_diff, "cost_saving_low": saving.low, "cost_saving_high": saving.high,
                  "cost_saving_p_value": saving.p_value, "cost_discordant": saving.discordant}
    else:
        result = paired_test(a, b, shift=min_effect, resamples=resamples, confidence=confidence, seed=seed)
        verdict = superiority_verdict(result, min_effect=min_effect)
        test = "superiority: one-sided sign-flip permutation test of mean(champion - baseline) > min_effect, BCa interval"
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

"""The holdout claim: champion against baseline on the sealed split, paired bootstrap CI."""
from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np

from search.evaluation.metrics import EvalReport, paired_scores
from search.evaluation.stats import claim_verdict, paired_bootstrap_ci


def scorer_hash(workload: Any) -> str:
    """sha256 of the scorer's source (and its module), so a changed scorer shows in the claim."""
    fn = type(workload).score
    try:
        source = inspect.getsource(inspect.getmodule(fn) or fn)
    except (OSError, TypeError):
        source = repr(fn)
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def make_claim(
    baseline: EvalReport, champion: EvalReport, *, confidence: float, resamples: int, min_effect: float, seed: int,
    hashes: Mapping[str, str]
) -> dict[str, Any]:
    task_ids, a, b = paired_scores(baseline, champion)
    result = paired_bootstrap_ci(a, b, resamples=resamples, confidence=confidence, rng=np.random.default_rng(seed))
    verdict = claim_verdict(result, min_effect=min_effect)
    bm, cm = baseline.metrics, champion.metrics
    return {
        "verdict": verdict,
        "metric": "score",
        "mean_diff": result.mean_diff,
        "low": result.low,
        "high": result.high,
        "n": result.n,
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
        "note": "only verdict 'win' is an improvement; 'no_win' and 'inconclusive' are not",
    }

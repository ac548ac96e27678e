"""The holdout claim: champion against baseline on the sealed split, on the quality metric the
search selected by: a sign-flip permutation test and a BCa interval over paired tasks."""
from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from search.evaluation.metrics import EvalReport, paired_scores
from search.evaluation.stats import MIN_DISCORDANT, noninferiority_verdict, paired_test, superiority_verdict


def scorer_hash(workload: Any) -> str:
    """sha256 of the scorer's source: the module that defines ``score`` and, when it is part of a
    package (a workload's scorer calls into its environment and scoring modules), every module of
    that package; then every module the workload names in ``scorer_modules`` (the benchmark code
    its scorer calls: a package counts with all its modules), so a change to how episodes are
    judged shows in the claim."""
    fn = type(workload).score
    module = inspect.getmodule(fn)
    if module is None:
        return hashlib.sha256(repr(fn).encode("utf-8")).hexdigest()
    package = module.__name__.rpartition(".")[0] if module.__spec__ and module.__spec__.parent else ""
    files = sorted(Path(module.__file__).parent.glob("*.py")) if package and module.__file__ else []
    try:
        sources = [f.read_text(encoding="utf-8") for f in files] if files else [inspect.getsource(module)]
    except (OSError, TypeError):
        sources = [repr(fn)]
    for name in getattr(workload, "scorer_modules", ()) or ():
        sources += [f"# {name}", *_module_sources(str(name))]
    settings = getattr(workload, "scorer_settings", None)  # what else decides a verdict (e.g. which text matcher ran)
    if settings:
        sources.append("# settings " + json.dumps(dict(settings), sort_keys=True, default=str))
    return hashlib.sha256("\n".join(sources).encode("utf-8")).hexdigest()


def _module_sources(name: str) -> list[str]:
    """The source of module ``name``; of every module under it when it is a package."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        raise ValueError(f"scorer module {name!r} cannot be found; a workload's scorer_modules name importable modules")
    origin = Path(spec.origin)
    files = sorted(origin.parent.rglob("*.py")) if spec.submodule_search_locations else [origin]
    return [f"# {f.relative_to(origin.parent)}\n{f.read_text(encoding='utf-8')}" for f in files]


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

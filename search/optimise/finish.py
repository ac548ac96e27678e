"""After the rounds: the front re-evaluated on dev, the champion chosen by the criteria, the
holdout touched once (champion against baseline), and every record written."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import optuna
import yaml

from compiler.atomic import write_json_atomic, write_text_atomic
from search.evaluation.claim import make_claim
from search.evaluation.criteria import evaluate_criteria, rank_key
from search.evaluation.metrics import EvalReport
from search.genome import BASELINE, Genome, Pools, authors, describe
from search.optimise.study import front_over
from search.records.ledger import unified_diff, write_ledger

if TYPE_CHECKING:
    from search.optimise.run import SearchRun


def _report(res: dict[str, Any] | BaseException, what: str) -> EvalReport:
    if isinstance(res, BaseException):
        raise RuntimeError(f"{what} failed: {type(res).__name__}: {res}") from res
    return EvalReport.from_dict(res["report"])


def _member(run: SearchRun, t: optuna.trial.FrozenTrial, pools: Pools, baseline_variant: Any) -> dict[str, Any]:
    g = Genome.from_dict(t.user_attrs["genome"])
    variant = run.spec(g, pools, "train", "diff").variant()
    return {
        "trial": int(t.user_attrs.get("round_trial", t.number)), "round": int(t.user_attrs.get("round", 0)), "variant_hash": variant.content_hash,
        "genome": g.to_dict(), "authors": list(authors(g, pools, [s["name"] for s in run.agent.get("workflow", [])])), "changes": _changes(run, g, pools), "params": dict(t.user_attrs.get("params", t.params)), "values": list(t.values or []),
        "train": dict(t.user_attrs.get("train", {})), "dev": None, "diff": unified_diff(baseline_variant, variant), "champion": False,
    }


def _changes(run: SearchRun, g: Genome, pools: Pools) -> str:
    base_steps = {s["name"]: bool(s.get("enabled", True)) for s in run.agent.get("workflow", [])}  # every base step: a pooled required step is on by default
    return describe(g, pools, base_format=str(run.agent.get("tool_format", "json")), base_steps=base_steps)


def _quality(run: SearchRun) -> str:
    return next((o.metric for o in run.objectives if o.direction == "maximize"), "score_mean")


def finish(run: SearchRun, frozen: dict[str, Any], studies: list[optuna.Study], pools: Pools) -> dict[str, Any]:
    baseline_variant = run.spec(BASELINE, pools, "train", "baseline").variant()
    front_trials = front_over(studies, run.objectives)
    q = _quality(run)
    front = [_member(run, t, pools, baseline_variant) for t in front_trials]
    unique: dict[str, dict[str, Any]] = {}
    for m in sorted(front, key=lambda m: -float(m["train"].get(q, 0.0))):
        unique.setdefault(m["variant_hash"], m)  # the same variant re-evaluated (controls, re-enqueues) is one member
    front = list(unique.values())
    # dev sees the whole front, not only its top: members evenly spaced from best quality to cheapest
    cap = max(1, int(run.s.max_front_dev))
    picks = list(range(len(front))) if len(front) <= cap else sorted({round(i * (len(front) - 1) / (cap - 1)) for i in range(cap)}) if cap > 1 else [0]
    dev_members = [front[i] for i in picks]

    dev_specs = [run.spec(BASELINE, pools, "dev", "baseline-dev")] + [run.spec(Genome.from_dict(m["genome"]), pools, "dev", f"front-{m['trial']}-dev") for m in dev_members]
    dev_results = run.run_jobs(dev_specs)
    baseline_dev = _report(dev_results[0], "baseline dev evaluation")
    ranked = []
    for m, res in zip(dev_members, dev_results[1:]):
        if isinstance(res, BaseException):
            run.echo(f"warning: dev evaluation of trial {m['trial']} failed: {res}")
            continue
        rep = _report(res, "dev")
        m["dev"] = dict(rep.metrics)
        verdict = evaluate_criteria(rep.metrics, run.criteria, run.aggregation)
        m["dev_verdict"] = verdict.to_dict()
        ranked.append((rank_key(verdict, rep.metrics), m, rep))
    if not ranked:
        raise RuntimeError("no front member could be evaluated on dev; see the job logs under the sweep dir")
    _, champion, champion_dev = max(ranked, key=lambda r: r[0])
    champion["champion"] = True

    hold = run.run_jobs([run.spec(BASELINE, pools, "holdout", "baseline-holdout"), run.spec(Genome.from_dict(champion["genome"]), pools, "holdout", "champion-holdout")])
    baseline_hold, champion_hold = _report(hold[0], "baseline holdout"), _report(hold[1], "champion holdout")
    hashes = {"config": frozen["config_hash"], "workload": frozen["workload_hash"], "splits": frozen["splits_hash"], "scorer": frozen["scorer_hash"]}
    claim = make_claim(baseline_hold, champion_hold, confidence=float(run.s.confidence), resamples=int(run.s.resamples),
                       min_effect=float(run.s.min_effect), seed=run.seed, hashes=hashes)
    write_json_atomic(run.dir / "claim.json", claim)

    baseline_train: dict[str, Any] = next((dict(t.user_attrs["train"]) for s in studies[:1] for t in s.trials if t.user_attrs.get("origin") == "baseline" and t.values), {})
    champion = {**champion, "holdout": dict(champion_hold.metrics)}
    snapshots = _write_snapshots(run, studies, pools, front, champion, claim, baseline_dev, baseline_hold, baseline_train or {})

    trials = []
    for k, s in enumerate(studies):
        for t in s.trials:
            g = t.user_attrs.get("genome")
            trials.append({"trial": t.number, "round": k, "variant_hash": t.user_attrs.get("variant_hash", ""), "genome": g, "authors": t.user_attrs.get("authors", []),
                           "values": list(t.values) if t.values else None, "feasible": bool(t.user_attrs.get("feasible", False)), "state": t.state.name,
                           "origin": t.user_attrs.get("origin", "sampler"), "control": t.user_attrs.get("control"), "train": t.user_attrs.get("train"),
                           "error": t.user_attrs.get("error")})
    front_hashes = {m["variant_hash"] for m in front}
    ledger = [{**t, "decision": _decision(t, front_hashes, champion["variant_hash"]),
               "eval_cost_usd": (t.get("train") or {}).get("cost_total"), "study": str(run.s.study)} for t in trials]
    diffs = {m["variant_hash"]: m["diff"] for m in front}
    for row in ledger:
        row["diff"] = diffs.get(row["variant_hash"]) if row["variant_hash"] in diffs else _diff_for(run, row, pools, baseline_variant)
    write_ledger(run.dir / "ledger.jsonl", ledger)

    results = {"name": str(run.s.study), "objectives": [{"metric": o.metric, "direction": o.direction} for o in run.objectives],
               "solutions": [{"params": m["params"], "values": m["values"], "trial": m["trial"], "round": m["round"], "variant_hash": m["variant_hash"]} for m in front]}
    write_text_atomic(run.dir / "optimization_results.yaml", yaml.safe_dump(results, sort_keys=False))
    summary: dict[str, Any] = {
        "study": str(run.s.study), "created_at": datetime.now(UTC).isoformat(), "storage": run.storage_public,
        "objectives": results["objectives"],
        "baseline": {"variant_hash": baseline_variant.content_hash, "genome": BASELINE.to_dict(), "authors": [], "train": baseline_train,
                     "dev": dict(baseline_dev.metrics), "holdout": dict(baseline_hold.metrics)},
        "trials": trials, "front": front, "champion": champion, "claim": claim, "snapshots": snapshots,
        "paths": {"ledger": str(run.dir / "ledger.jsonl"), "claim": str(run.dir / "claim.json"),
                  "optimization_results": str(run.dir / "optimization_results.yaml"), "report": str(run.dir / "report.html")},
    }
    write_json_atomic(run.dir / "summary.json", summary)
    from search.records.report import write_report

    write_report(summary, run.dir / "report.html")
    return summary


def _decision(t: dict[str, Any], front: set[str], champion: str) -> str:
    if t["state"] != "COMPLETE":
        return "failed"
    if t["variant_hash"] == champion:
        return "champion"
    if t["variant_hash"] in front:
        return "front"
    return "dominated" if t["feasible"] else "infeasible"


def _diff_for(run: SearchRun, row: dict[str, Any], pools: Pools, baseline_variant: Any) -> str | None:
    if not row.get("genome"):
        return None
    try:
        return unified_diff(baseline_variant, run.spec(Genome.from_dict(row["genome"]), pools, "train", "diff").variant())
    except Exception:  # a genome from an older pool layout: the ledger keeps the row without a diff
        return None


def _write_snapshots(run: SearchRun, studies: list[optuna.Study], pools: Pools, front: list[dict[str, Any]], champion: dict[str, Any],
                     claim: dict[str, Any], baseline_dev: EvalReport, baseline_hold: EvalReport, baseline_train: dict[str, Any]) -> dict[str, Any]:
    """Registry snapshots of the baseline, each round's winner and the champion (not promoted)."""
    from search.optimise.snapshots import snapshot_for_search

    return snapshot_for_search(run, studies, pools, front, champion, claim,
                               baseline_metrics={"train": baseline_train, "dev": dict(baseline_dev.metrics), "holdout": dict(baseline_hold.metrics)})


__all__ = ["finish", "json"]

"""After the rounds: the front re-evaluated on dev, the champion chosen by the criteria, the
holdout touched once (champion against baseline; the baseline's run beside the dev selection,
which never reads it), and every record written."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml
from evoharness.compiler.atomic import write_json_atomic, write_text_atomic
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.evaluation.claim import make_claim
from evoharness.search.evaluation.criteria import evaluate_criteria, quality_objective, rank_key
from evoharness.search.evaluation.metrics import EvalReport, paired_scores
from evoharness.search.evaluation.stats import paired_test
from evoharness.search.genome import BASELINE, Genome, Pools, authors, describe, edits
from evoharness.search.optimise.ablation import ablation_jobs, ablation_rows
from evoharness.search.optimise.budget import spent
from evoharness.search.optimise.mutation import losses
from evoharness.search.optimise.select import DevCandidate, champion_index, cheapest_noninferior, distinct_front, ledger_decision
from evoharness.search.optimise.select import dev_members as dev_members_of
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.front_snapshots import snapshot_for_search
from evoharness.search.optimise.study import TrialRecord
from evoharness.search.optimise.trial import TrialResult
from evoharness.search.records.claim_record import claim_record, record_claim
from evoharness.search.records.headline import headline
from evoharness.search.records.ledger import unified_diff, write_ledger
from evoharness.search.records.looks import append_look, champions_seen, look_row, read_looks
from evoharness.search.records.report import write_report
from evoharness.search.records.versions import versioned

Evaluate = Callable[[Sequence[tuple[Genome, str, str]]], list[TrialResult | BaseException]]  # (genome, split, label) jobs


@dataclass(frozen=True)
class Frozen:
    """What freeze.json pins for a study: the hashes a claim is made under."""

    config_hash: str
    workload_hash: str
    splits_hash: str
    scorer_hash: str
    seed: int
    split_strata: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # split -> stratum -> tasks
    tool_outputs_hash: str | None = None  # the replayed tool-output snapshot, when the workload replays one

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Frozen:
        return cls(config_hash=str(d["config_hash"]), workload_hash=str(d["workload_hash"]), splits_hash=str(d["splits_hash"]),
                   scorer_hash=str(d["scorer_hash"]), seed=int(d["seed"]), split_strata=dict(d.get("split_strata") or {}),
                   tool_outputs_hash=d.get("tool_outputs_hash"))

    def hashes(self) -> dict[str, str]:
        out = {"config": self.config_hash, "workload": self.workload_hash, "splits": self.splits_hash, "scorer": self.scorer_hash}
        return {**out, "tool_outputs": self.tool_outputs_hash} if self.tool_outputs_hash else out


class FinishAborted(RuntimeError):
    """An evaluation the selection or the claim needs failed or scored nothing: the study keeps
    every finished trial and evaluation, and a rerun with the same command resumes here."""


def _report(res: TrialResult | BaseException, what: str) -> EvalReport:
    if isinstance(res, BaseException):
        raise FinishAborted(f"{what} failed: {type(res).__name__}: {str(res).splitlines()[0] if str(res) else ''}") from res
    return res.report


def _member(settings: RunSettings, r: TrialRecord, pools: Pools, variant: HarnessVariant, baseline: HarnessVariant) -> dict[str, Any]:
    assert r.genome is not None
    g = r.genome
    return {
        "trial": r.number, "round": r.round, "variant_hash": variant.content_hash, "genome": g.to_dict(),
        "authors": list(authors(g, pools, settings.step_names)),
        "changes": describe(g, pools, base_format=settings.base_format, base_steps=settings.base_steps),
        "edits": edits(g, pools, base_format=settings.base_format, base_steps=settings.base_steps),
        "params": dict(r.params), "values": list(r.values or []), "train": dict(r.train), "dev": None,
        "diff": unified_diff(baseline, variant), "champion": False,
    }


def _trial_row(r: TrialRecord) -> dict[str, Any]:
    return {"trial": r.number, "round": r.round, "variant_hash": r.variant_hash, "genome": r.genome.to_dict() if r.genome else None,
            "authors": list(r.authors), "values": list(r.values) if r.values else None, "feasible": r.feasible, "state": r.state,
            "origin": r.origin, "control": r.control, "train": dict(r.train) or None, "error": r.error}


@dataclass(frozen=True)
class SearchTrials:
    """What the rounds leave for the finish, as records: every trial per round, each round's
    Pareto front, and the front over all rounds."""

    per_round: tuple[tuple[TrialRecord, ...], ...]
    round_fronts: tuple[tuple[TrialRecord, ...], ...]
    front: tuple[TrialRecord, ...]


def finish(
    settings: RunSettings, paths: StudyPaths, frozen: Frozen, trials_of: SearchTrials, pools: Pools, *,
    evaluate: Evaluate, variant_of: Callable[[Genome], HarnessVariant], echo: Callable[[str], None],
    budget: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    criteria, aggregation, objectives = settings.criteria, settings.aggregation, settings.objectives
    q = quality_objective(objectives)
    baseline_variant = variant_of(BASELINE)
    front_records = distinct_front([r for r in trials_of.front if r.genome is not None], q)
    front = [{**_member(settings, r, pools, variant_of(r.genome), baseline_variant), "losses": losses(paths, r.eval_key)}
             for r in front_records if r.genome is not None]
    qualifies = None
    base_train = next((r.train for rs in reversed(trials_of.per_round) for r in rs if r.origin == "baseline" and r.train), None)
    if settings.decision == "cheapest_noninferior" and base_train and q in base_train and settings.reference == "incumbent":
        bar, dear = float(base_train[q]) - settings.margin, float(base_train.get("cost_per_task", float("inf")))
        qualifies = [float(m["train"].get(q, 0.0)) >= bar - 1e-12 and float(m["train"].get("cost_per_task", 0.0)) < dear
                     for m in front]
    dev_members = [front[i] for i in dev_members_of([float(m["train"].get("cost_per_task", 0.0)) for m in front],
                                                    settings.search.max_front_dev, qualifies=qualifies)]

    ref_genome = _reference_genome(settings, pools)
    # the incumbent's holdout run (and a named reference's) is the claim's whatever the champion, and
    # no selection reads it: it shares the dev batch, first, as its longest jobs, so that no worker
    # idles through the batch's last wave and the champion's holdout is then a wave of its own
    fixed_hold = [(BASELINE, "holdout", "baseline-holdout"), *([(ref_genome, "holdout", "reference-holdout")] if ref_genome else [])]
    first_batch = evaluate([*fixed_hold, (BASELINE, "dev", "baseline-dev"),
                            *[(Genome.from_dict(m["genome"]), "dev", f"front-{m['trial']}-dev") for m in dev_members],
                            *([(ref_genome, "dev", "reference-dev")] if ref_genome else [])])
    fixed_results, dev_results = first_batch[:len(fixed_hold)], first_batch[len(fixed_hold):]
    # a failed incumbent (or reference) holdout stops the finish here, before the champion's is paid for
    baseline_hold = _report(fixed_results[0], "baseline holdout")
    reference_hold = _report(fixed_results[-1], "reference holdout") if ref_genome else baseline_hold
    baseline_dev = _report(dev_results[0], "baseline dev evaluation")
    reference_dev = _report(dev_results[-1], "reference dev evaluation") if ref_genome else baseline_dev
    ranked: list[tuple[tuple[float, ...], dict[str, Any]]] = []
    dev_reports: list[EvalReport] = []
    for m, res in zip(dev_members, dev_results[1:1 + len(dev_members)]):
        if isinstance(res, BaseException):
            echo(f"warning: dev evaluation of trial {m['trial']} failed: {res}")
            continue
        m["dev"] = dict(res.report.metrics)
        verdict = evaluate_criteria(res.report.metrics, criteria, aggregation)
        m["dev_verdict"] = verdict.to_dict()
        ranked.append((rank_key(verdict, res.report.metrics), m))
        dev_reports.append(res.report)
    if not ranked:
        raise FinishAborted("no front member could be evaluated on dev; see the job logs under the sweep dir")
    champion: dict[str, Any] | None = ranked[champion_index([key for key, _ in ranked])][1]
    decision: dict[str, Any] = {"rule": settings.decision, "reference": "incumbent", "evidence": "best_quality"}
    if settings.decision == "cheapest_noninferior":
        pick, decision = _cheapest(settings, q, reference_dev, ranked, dev_reports, echo)
        champion = pick
    if champion is None:  # nothing cheaper is as good: the incumbent stays, and so does the seal
        champion = _incumbent_member(settings, trials_of, baseline_variant, baseline_dev)
    champion["champion"] = True

    s = settings.search
    champion_hash = variant_of(Genome.from_dict(champion["genome"])).content_hash
    candidate = champion_hash != baseline_variant.content_hash  # the incumbent itself is no look at a candidate
    seen = champions_seen(read_looks(paths.looks))
    if candidate and seen and champion_hash not in seen and not s.second_look:
        # before the holdout is run: adding rounds until a champion wins would be peeking
        raise ConfigError("search.second_look", f"study {s.study!r} already looked at its holdout for champion {seen[0][:12]}; "
                          f"a claim for champion {champion_hash[:12]} would be a second look at the same sealed split",
                          "start a new search.study, or pass search.second_look=true (the claim and the report then say so)")
    hold_jobs = [(Genome.from_dict(champion["genome"]), "holdout", "champion-holdout")] if candidate else []
    ablate = bool(candidate and champion.get("dev") and q in champion["dev"])
    layers_todo, ablation_batch = (ablation_jobs(Genome.from_dict(champion["genome"]), pools, base_format=settings.base_format,
                                                 base_steps=settings.base_steps) if ablate else ([], []))
    # the ablation's dev runs need only the champion: they share the champion's holdout batch
    both = evaluate([*hold_jobs, *ablation_batch]) if hold_jobs or ablation_batch else []
    hold, ablation_results = both[:len(hold_jobs)], both[len(hold_jobs):]
    champion_hold = _report(hold[0], "champion holdout") if candidate else baseline_hold
    claim = versioned("claim", make_claim(reference_hold, champion_hold, confidence=s.confidence, resamples=s.resamples,
                                          min_effect=s.min_effect, seed=settings.seed, hashes=frozen.hashes(),
                                          metric=quality_objective(settings.objectives), decision=settings.decision,
                                          margin=settings.margin))
    looks = len(seen) + (1 if candidate and champion_hash not in seen else 0)
    claim = {**claim, "looks": looks, "second_look": looks > 1, "reference": settings.reference if ref_genome else "incumbent"}
    if candidate and champion_hash not in seen:  # the same champion again (a resume) is the same look, not a new one
        append_look(paths.looks, look_row(champion_hash=champion_hash, baseline_hash=baseline_variant.content_hash, claim=claim,
                                          look=looks))
    write_json_atomic(paths.claim, claim)
    ablation: list[dict[str, Any]] = []
    if ablate:
        ablation = ablation_rows(layers_todo, ablation_results, incumbent_q=float(baseline_dev.metrics.get(q, 0.0)),
                                 champion_q=float(champion["dev"][q]), metric=q)

    per_round = trials_of.per_round
    baseline_train = next((dict(r.train) for r in per_round[0] if r.origin == "baseline" and r.values), {}) if per_round else {}
    champion = {**champion, "holdout": dict(champion_hold.metrics)}
    snapshots = snapshot_for_search(
        settings, paths, pools, trials_of.round_fronts, champion, claim, config_hash=frozen.config_hash,
        quality=q, variant_of=variant_of,
        baseline_metrics={"train": baseline_train, "dev": dict(baseline_dev.metrics), "holdout": dict(baseline_hold.metrics)},
    )
    # the claim where the trials are, so `promote --if-win` need not trust files placed beside a snapshot
    record_claim(paths.storage, s.study, [o.direction for o in objectives],
                 claim_record(claim=claim, champion=champion, champion_variant=champion_hash,
                              baseline_variant=baseline_variant.content_hash, snapshots=snapshots, registry=settings.registry_dir))

    trials = [_trial_row(r) for rs in per_round for r in rs]
    front_hashes = {m["variant_hash"] for m in front}
    diffs = {m["variant_hash"]: m["diff"] for m in front}
    ledger = []
    for r, row in zip([r for rs in per_round for r in rs], trials):
        diff = diffs[r.variant_hash] if r.variant_hash in diffs else _diff_for(r, variant_of, baseline_variant)
        ledger.append({**row, "decision": ledger_decision(r, front=front_hashes, champion=champion["variant_hash"]),
                       "eval_cost_usd": r.train.get("cost_total"), "study": s.study, "diff": diff})
    write_ledger(paths.ledger, ledger)

    results = {"name": s.study, "objectives": [{"metric": o.metric, "direction": o.direction} for o in objectives],
               "solutions": [{"params": m["params"], "values": m["values"], "trial": m["trial"], "round": m["round"],
                              "variant_hash": m["variant_hash"]} for m in front]}
    write_text_atomic(paths.results, yaml.safe_dump(results, sort_keys=False))
    summary: dict[str, Any] = versioned("summary", {
        "study": s.study, "created_at": datetime.now(UTC).isoformat(), "storage": paths.storage_public,
        "objectives": results["objectives"],
        "baseline": {"variant_hash": baseline_variant.content_hash, "genome": BASELINE.to_dict(), "authors": [], "train": baseline_train,
                     "dev": dict(baseline_dev.metrics), "holdout": dict(baseline_hold.metrics)},
        "trials": trials, "front": front, "champion": champion, "decision": decision, "claim": claim, "snapshots": snapshots,
        "ablation": ablation,
        **({"reference": {"name": settings.reference, "variant_hash": reference_hold.variant_hash, "genome": ref_genome.to_dict(),
                          "changes": f"model={settings.reference}", "dev": dict(reference_dev.metrics),
                          "holdout": dict(reference_hold.metrics)}} if ref_genome else {}),
        "splits": {"hash": frozen.splits_hash, "strata": {k: dict(v) for k, v in frozen.split_strata.items()}},
        "spend": {"spent_usd": round(spent(paths.spend), 6), **dict(budget or {})},
        "paths": {"ledger": str(paths.ledger), "claim": str(paths.claim), "optimization_results": str(paths.results),
                  "report": str(paths.report)},
    })
    summary["headline"] = headline(summary)
    write_json_atomic(paths.summary, summary)
    write_report(summary, paths.report)
    return summary


def _incumbent_member(settings: RunSettings, trials_of: SearchTrials, baseline: HarnessVariant, dev: EvalReport) -> dict[str, Any]:
    """The incumbent as the champion row, when no candidate is chosen."""
    first = next((r for rs in trials_of.per_round[:1] for r in rs if r.origin == "baseline"), None)
    return {"trial": first.number if first else "base", "round": 0, "variant_hash": baseline.content_hash, "genome": BASELINE.to_dict(),
            "authors": [], "changes": "baseline", "edits": [], "params": dict(first.params) if first else {},
            "values": list(first.values or []) if first else [], "train": dict(first.train) if first else {},
            "dev": dict(dev.metrics), "diff": "", "champion": False}


def _reference_genome(settings: RunSettings, pools: Pools) -> Genome | None:
    """The genome a named reference stands for: the incumbent's harness on that model (None for
    the incumbent itself, and for best_quality, which always compares with the incumbent)."""
    if settings.decision != "cheapest_noninferior" or settings.reference == "incumbent":
        return None
    index = next(i for i, e in enumerate(pools.models) if e.value == settings.reference)
    return Genome(model=index)


def _cheapest(settings: RunSettings, q: str, baseline_dev: EvalReport, ranked: Sequence[tuple[Any, dict[str, Any]]],
              reports: Sequence[EvalReport], echo: Callable[[str], None]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The cheapest_noninferior pick, each member's paired dev difference against the reference
    recorded on it; None (with a warning) when nothing cheaper is as good."""
    s, margin = settings.search, settings.margin
    reference = float(baseline_dev.metrics.get(q, 0.0))
    if not any(r.scored for r in baseline_dev.tasks):
        raise FinishAborted(f"the {settings.reference}'s dev evaluation scored no task (every episode was skipped as an "
                           "infrastructure failure), so nothing can be compared with it; see the job logs under the sweep dir")
    candidates = []
    for (_, m), report in zip(ranked, reports):
        tasks, a, b = paired_scores(baseline_dev, report, metric=q)
        if not tasks:  # every episode of this member was skipped: no evidence either way, so never chosen
            m["dev_vs_reference"] = None
            candidates.append(DevCandidate(float("-inf"), float("-inf"), float("inf"), False))
            continue
        test = paired_test(a, b, shift=-margin, resamples=s.resamples, confidence=s.confidence, seed=settings.seed)
        m["dev_vs_reference"] = {"mean_diff": test.mean_diff, "low": test.low, "high": test.high, "n": test.n}
        candidates.append(DevCandidate(float(m["dev"].get(q, 0.0)), test.low, float(m["dev"].get("cost_per_task", 0.0)),
                                       bool(m["dev_verdict"]["feasible"])))
    decision: dict[str, Any] = {"rule": settings.decision, "margin": margin, "reference": settings.reference,
                                "reference_quality": reference}
    pick = cheapest_noninferior(candidates, reference=reference, margin=margin,
                                reference_cost=float(baseline_dev.metrics.get("cost_per_task", float("inf"))))
    if pick is None:
        echo(f"warning: no front member is cheaper than the {settings.reference} and within criteria.margin={margin} of its dev "
             f"{q} ({reference:.3f}); the incumbent stays the champion and no candidate is claimed on the holdout")
        return None, {**decision, "evidence": "none"}
    index, evidence = pick
    if evidence == "point":
        echo(f"warning: no cheaper member's dev interval clears -{margin:g}; the champion is the cheapest whose dev {q} "
             f"point estimate is within the margin, and the holdout may well not confirm it")
    return ranked[index][1], {**decision, "evidence": evidence}


def _diff_for(r: TrialRecord, variant_of: Callable[[Genome], HarnessVariant], baseline: HarnessVariant) -> str | None:
    if r.genome is None:
        return None
    try:
        return unified_diff(baseline, variant_of(r.genome))
    except ValueError:  # a genome from an older pool layout: the ledger keeps the row without a diff
        return None

"""The finish's last stage, write the outcome: claim.json, the registry snapshots, the claim in the
study's database, the ledger, optimization_results.yaml, summary.json (with its headline) and
the report."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import yaml

from evoharness.compiler.atomic import write_json_atomic, write_text_atomic
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.evaluation.criteria import quality_objective
from evoharness.search.genome import BASELINE, Genome, Pools
from evoharness.search.optimise.budget import spent
from evoharness.search.optimise.claim_holdout import HoldoutClaim
from evoharness.search.optimise.dashboard import view_numbers
from evoharness.search.optimise.front_snapshots import snapshot_for_search
from evoharness.search.optimise.select import ledger_decision
from evoharness.search.optimise.select_dev import DevSelection, SearchTrials
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.study import TrialRecord
from evoharness.search.records.claim_record import claim_record, record_claim
from evoharness.search.records.headline import headline
from evoharness.search.records.ledger import unified_diff, write_ledger
from evoharness.search.records.outcome import ABSENT, Claim, Decision, Member, Paths, SearchOutcome, Snapshots, Splits, present
from evoharness.search.records.report import write_report
from evoharness.search.records.transcript_pages import front_pages


def trial_row(r: TrialRecord) -> dict[str, Any]:
    return {"trial": r.number, "round": r.round, "variant_hash": r.variant_hash, "genome": r.genome.to_dict() if r.genome else None,
            "authors": list(r.authors), "values": list(r.values) if r.values else None, "feasible": r.feasible, "state": r.state,
            "origin": r.origin, "control": r.control, "train": dict(r.train) or None, "error": r.error,
            "race": dict(r.race) if r.race else None}


def write_outcome(settings: RunSettings, paths: StudyPaths, trials_of: SearchTrials, pools: Pools, chosen: DevSelection,
                  held: HoldoutClaim, *, config_hash: str, splits_hash: str, split_strata: Mapping[str, Mapping[str, int]],
                  variant_of: Callable[[Genome], HarnessVariant], budget: Mapping[str, Any] | None = None,
                  live_tools: Sequence[str] = (), doctor: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write every record of the finish and return summary.json's content."""
    s, objectives, claim = settings.search, settings.objectives, held.claim
    q = quality_objective(objectives)
    baseline_variant, baseline_dev, baseline_hold = chosen.baseline_variant, chosen.baseline_dev, held.baseline_hold
    claim = Claim.from_dict(claim).to_dict()  # what claim.json holds is what Claim reads
    write_json_atomic(paths.claim, claim)
    per_round = trials_of.per_round
    baseline_train = next((dict(r.train) for r in per_round[0] if r.origin == "baseline" and r.values), {}) if per_round else {}
    # no holdout run when the incumbent stayed: its rows carry no holdout metrics
    held_metrics = {} if baseline_hold is None else dict(baseline_hold.metrics)
    champion = replace(chosen.champion, holdout=dict(held.champion_hold.metrics) if held.champion_hold else {})
    snapshots = snapshot_for_search(
        settings, paths, pools, trials_of.round_fronts, champion.to_dict(), claim, config_hash=config_hash, quality=q,
        variant_of=variant_of, champion_genome=champion.genome,
        baseline_metrics={"train": baseline_train, "dev": dict(baseline_dev.metrics), "holdout": held_metrics},
    )
    # the claim where the trials are, so `promote --if-win` need not trust files placed beside a snapshot
    record_claim(paths.storage, s.study, [o.direction for o in objectives],
                 claim_record(claim=claim, champion=champion.to_dict(), champion_variant=held.champion_hash,
                              baseline_variant=baseline_variant.content_hash, snapshots=snapshots, registry=settings.registry_dir))

    front, champion = _linked(paths, s.study, baseline_variant.content_hash, chosen.front, champion)
    trials = [trial_row(r) for rs in per_round for r in rs]
    write_ledger(paths.ledger, _ledger(settings, per_round, trials, front, champion, variant_of, baseline_variant))

    directions = [{"metric": o.metric, "direction": o.direction} for o in objectives]
    results = {"name": s.study, "objectives": directions,
               "solutions": [{"params": m.params, "values": m.values, "trial": m.trial, "round": m.round,
                              "variant_hash": m.variant_hash} for m in front]}
    write_text_atomic(paths.results, yaml.safe_dump(results, sort_keys=False))
    ref_genome, reference_dev, reference_hold = chosen.reference_genome, chosen.reference_dev, held.reference_hold
    outcome = SearchOutcome(
        study=s.study, created_at=datetime.now(UTC).isoformat(), storage=paths.storage_public, objectives=directions,
        baseline=Member(variant_hash=baseline_variant.content_hash, genome=BASELINE, authors=[], train=baseline_train,
                        dev=dict(baseline_dev.metrics), holdout=held_metrics),
        trials=trials, front=tuple(front), champion=champion, decision=Decision.from_dict(chosen.decision),
        claim=Claim.from_dict(claim), snapshots=Snapshots.from_dict(snapshots), ablation=held.ablation,
        reference=(Member(name=settings.reference, variant_hash=reference_dev.variant_hash, genome=ref_genome,
                          changes=f"model={settings.reference}", dev=dict(reference_dev.metrics),
                          holdout={} if reference_hold is None else dict(reference_hold.metrics))
                   if ref_genome else ABSENT),
        splits=Splits(hash=splits_hash, strata={k: dict(v) for k, v in split_strata.items()}),
        spend={"spent_usd": round(spent(paths.spend), 6), **dict(budget or {})},
        live_tools=list(live_tools) if live_tools else ABSENT,
        # the verdict, not the record's path: summary.json and the report travel, the machine's paths do not
        doctor={k: v for k, v in (doctor or {}).items() if k != "record"} if doctor else ABSENT,
        paths=Paths(ledger=str(paths.ledger), claim=str(paths.claim), optimization_results=str(paths.results), report=str(paths.report)),
    )
    outcome = replace(outcome, headline=headline(outcome))
    summary = outcome.to_dict()
    write_json_atomic(paths.summary, summary)
    write_report(summary, paths.report)
    return summary


def _linked(paths: StudyPaths, study: str, baseline: str, front: Sequence[Member], champion: Member) -> tuple[tuple[Member, ...], Member]:
    """The members with their trial in the dashboard's view and, for the front, their transcript
    page and failed tasks (what the report links)."""
    numbers = view_numbers(paths.storage, study)

    def number(m: Member) -> Any:
        return numbers.get((m.round, m.trial), ABSENT) if isinstance(m.trial, int) and isinstance(m.round, int) else ABSENT

    pages = front_pages(paths.dir, baseline=baseline,
                        members=[(f"trial {m.trial} (round {m.round})", m.variant_hash, bool(present(m.dev, None)))
                                 for m in front if isinstance(m.variant_hash, str)])
    linked = tuple(replace(m, dashboard_trial=number(m), transcripts=pages.get(m.variant_hash, ABSENT)) for m in front)
    return linked, replace(champion, dashboard_trial=number(champion))


def _ledger(settings: RunSettings, per_round: Sequence[Sequence[TrialRecord]], trials: Sequence[dict[str, Any]],
            front: Sequence[Member], champion: Member, variant_of: Callable[[Genome], HarnessVariant],
            baseline: HarnessVariant) -> list[dict[str, Any]]:
    """Every trial with the search's standing on it, its train cost and its diff from the incumbent."""
    front_hashes = {m.variant_hash for m in front}
    diffs = {m.variant_hash: m.diff for m in front}
    ledger = []
    for r, row in zip([r for rs in per_round for r in rs], trials):
        diff = diffs[r.variant_hash] if r.variant_hash in diffs else _diff_for(r, variant_of, baseline)
        ledger.append({**row, "decision": ledger_decision(r, front=front_hashes, champion=champion.variant_hash),
                       "eval_cost_usd": r.train.get("cost_total"), "study": settings.search.study, "diff": diff})
    return ledger


def _diff_for(r: TrialRecord, variant_of: Callable[[Genome], HarnessVariant], baseline: HarnessVariant) -> str | None:
    if r.genome is None:
        return None
    try:
        return unified_diff(baseline, variant_of(r.genome))
    except ValueError:  # a genome from an older pool layout: the ledger keeps the row without a diff
        return None

"""The finish's first stage, select on dev: the front members whose train results leave them a
chance to clear the decision's bar re-evaluated on dev (with the incumbent, and a named
reference), and the champion the decision rule picks from it. The incumbent's (and reference's)
holdout runs wait for the champion's (claim_holdout): a search that keeps its incumbent runs none."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from evoharness.compiler.runtime.workload import Split
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.evaluation.criteria import evaluate_criteria, quality_objective, rank_key
from evoharness.search.evaluation.decision import DevCandidate, TrainChance, TrainStanding
from evoharness.search.evaluation.metrics import EvalReport, paired_clusters, paired_scores
from evoharness.search.evaluation.stats import quality_test
from evoharness.search.genome import BASELINE, Genome, Pools
from evoharness.search.genome_edits import authors, describe, edits
from evoharness.search.optimise.mutation import losses
from evoharness.search.optimise.select import champion_index, dev_skips, distinct_front
from evoharness.search.optimise.select import dev_members as dev_members_of
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.study import TrialRecord
from evoharness.search.optimise.trial import TrialResult, stored_result
from evoharness.search.records.ledger import unified_diff
from evoharness.search.records.outcome import Member

Evaluate = Callable[[Sequence[tuple[Genome, Split, str]]], list[TrialResult | BaseException]]  # (genome, split, label) jobs


class FinishAborted(RuntimeError):
    """An evaluation the selection or the claim needs failed or scored nothing: the study keeps
    every finished trial and evaluation, and a rerun with the same command resumes here."""


def report_of(res: TrialResult | BaseException, what: str) -> EvalReport:
    if isinstance(res, BaseException):
        raise FinishAborted(f"{what} failed: {type(res).__name__}: {str(res).splitlines()[0] if str(res) else ''}") from res
    return res.report


@dataclass(frozen=True)
class SearchTrials:
    """What the rounds leave for the finish, as records: every trial per round, each round's
    Pareto front, and the front over all rounds."""

    per_round: tuple[tuple[TrialRecord, ...], ...]
    round_fronts: tuple[tuple[TrialRecord, ...], ...]
    front: tuple[TrialRecord, ...]


@dataclass(frozen=True)
class DevSelection:
    """The stage's result: the front as summary rows (those with a dev run carry its metrics and
    verdict), the champion's row, the decision record, and the fixed reports."""

    front: list[Member]
    champion: Member
    decision: dict[str, Any]
    baseline_variant: HarnessVariant
    baseline_dev: EvalReport
    reference_dev: EvalReport
    reference_genome: Genome | None


def front_member(settings: RunSettings, r: TrialRecord, pools: Pools, variant: HarnessVariant, baseline: HarnessVariant,
                 *, paths: StudyPaths) -> Member:
    assert r.genome is not None
    g = r.genome
    return Member(
        trial=r.number, round=r.round, variant_hash=variant.content_hash, genome=g, authors=list(authors(g, pools, settings.step_names)),
        changes=describe(g, pools, base_format=settings.base_format, base_steps=settings.base_steps),
        edits=edits(g, pools, base_format=settings.base_format, base_steps=settings.base_steps),
        params=dict(r.params), values=list(r.values or []), train=dict(r.train), dev=None, diff=unified_diff(baseline, variant),
        champion=False, losses=losses(paths, r.eval_key))


def reference_genome(settings: RunSettings, pools: Pools) -> Genome | None:
    """The genome a named reference stands for: the incumbent's harness on that model (None for
    the incumbent itself, and for a rule that always compares with the incumbent)."""
    if not settings.rule.against_reference or settings.reference == "incumbent":
        return None
    index = next(i for i, e in enumerate(pools.models) if e.value == settings.reference)
    return Genome(model=index)


def select_on_dev(settings: RunSettings, paths: StudyPaths, rounds: SearchTrials, pools: Pools, *, evaluate: Evaluate,
                  variant_of: Callable[[Genome], HarnessVariant], echo: Callable[[str], None]) -> DevSelection:
    q = quality_objective(settings.objectives)
    rule = settings.rule
    baseline_variant = variant_of(BASELINE)
    records = [r for r in distinct_front([r for r in rounds.front if r.genome is not None], q) if r.genome is not None]
    front = [front_member(settings, r, pools, variant_of(r.genome), baseline_variant, paths=paths) for r in records
             if r.genome is not None]
    ref_genome = reference_genome(settings, pools)
    chances = train_chances(settings, paths, rounds, records, reference=variant_of(ref_genome or BASELINE), variant_of=variant_of)
    # the axis the rule saves on (cost unless it saves latency): its lowest members with a chance first
    axis = (rule.resource() or ("cost_per_task", "cost"))[0]
    cap = settings.search.max_front_dev
    picked = dev_members_of([float(m.train.get(axis, 0.0)) for m in front], cap,
                            chances=None if chances is None else [c.reach for c in chances], best_quality=rule.resource() is None)
    skipped = dev_skips(len(front), picked, None if chances is None else [c.why for c in chances], cap=cap)
    for i, why in skipped.items():
        front[i] = replace(front[i], dev_skipped=why)
    if skipped:
        echo(f"dev runs: {len(picked)} of {len(front)} front members; no dev run for {len(skipped)}:")
        for i, why in skipped.items():
            echo(f"  trial {front[i].trial} (round {front[i].round}: {front[i].changes}): {why}")

    dev_jobs: list[tuple[Genome, Split, str]] = [(BASELINE, "dev", "baseline-dev"),
                                                 *[(front[i].genome, "dev", f"front-{front[i].trial}-dev") for i in picked]]
    if ref_genome:
        dev_jobs.append((ref_genome, "dev", "reference-dev"))
    dev_results = evaluate(dev_jobs)
    baseline_dev = report_of(dev_results[0], "baseline dev evaluation")
    reference_dev = report_of(dev_results[-1], "reference dev evaluation") if ref_genome else baseline_dev
    ranked: list[tuple[tuple[float, ...], int]] = []  # (rank key, index into front)
    dev_reports: list[EvalReport] = []
    for i, res in zip(picked, dev_results[1:1 + len(picked)]):
        if isinstance(res, BaseException):
            echo(f"warning: dev evaluation of trial {front[i].trial} failed: {res}")
            continue
        verdict = evaluate_criteria(res.report.metrics, settings.criteria, settings.aggregation)
        front[i] = replace(front[i], dev=dict(res.report.metrics), dev_verdict=verdict.to_dict())
        ranked.append((rank_key(verdict, res.report.metrics), i))
        dev_reports.append(res.report)
    if not ranked:
        raise FinishAborted("no front member could be evaluated on dev; see the job logs under the sweep dir")
    chosen: int | None = ranked[champion_index([key for key, _ in ranked])][1]
    decision: dict[str, Any] = {"rule": settings.decision, "reference": "incumbent", "evidence": "best_quality"}
    if rule.against_reference:
        members = [front[i] for _, i in ranked]
        pick, decision, compared = compare_with_reference(
            settings, q, reference_dev, [(m.dev or {}, bool((m.dev_verdict or {}).get("feasible"))) for m in members], dev_reports, echo)
        for (_, i), comparison in zip(ranked, compared):
            front[i] = replace(front[i], dev_vs_reference=comparison)
        chosen = ranked[pick][1] if pick is not None else None
    if chosen is None:  # nothing cheaper (or faster) is as good: the incumbent stays, and so does the seal
        champion = replace(incumbent_member(rounds, baseline_variant, baseline_dev), champion=True)
    else:
        champion = front[chosen] = replace(front[chosen], champion=True)
    return DevSelection(front=front, champion=champion, decision=decision, baseline_variant=baseline_variant,
                        baseline_dev=baseline_dev, reference_dev=reference_dev, reference_genome=ref_genome)


def stored_train(paths: StudyPaths, record: TrialRecord, variant: HarnessVariant) -> EvalReport | None:
    """A trial's stored train evaluation, None when the study holds none under its key."""
    if not record.eval_key:
        return None
    stored = stored_result(paths.evals / f"{record.eval_key}.json", variant)
    return stored.report if stored is not None and stored.split == "train" else None


def paired_interval(reference: EvalReport | None, member: EvalReport | None, *, metric: str, confidence: float
                    ) -> tuple[float, float] | None:
    """The interval of the paired difference member minus reference over the tasks both scored
    (the claim's: clusters as the unit, two-sided at ``confidence``); None without pairs."""
    if reference is None or member is None:
        return None
    tasks, a, b = paired_scores(reference, member, metric=metric)
    if not tasks or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return None
    try:
        clusters = paired_clusters(reference, member)
    except ValueError:  # another clustering of the workload: no pairing holds
        return None
    test = quality_test(a, b, null=0.0, clusters=clusters, confidence=confidence)
    return test.low, test.high


def train_chances(settings: RunSettings, paths: StudyPaths, rounds: SearchTrials, front: Sequence[TrialRecord], *,
                  reference: HarnessVariant, variant_of: Callable[[Genome], HarnessVariant]) -> list[TrainChance] | None:
    """Each front member's chance to clear the decision's bar on dev, from its train result
    (``DecisionRule.train_chance``: its paired train difference against the reference's stored
    train evaluation, on the claim's interval, and whether it saves what the rule saves); None
    when the reference has no train result to judge by (a named reference the search never ran on
    train)."""
    q, rule = quality_objective(settings.objectives), settings.rule
    runs = [r for rs in rounds.per_round for r in rs if r.variant_hash == reference.content_hash and r.state == "COMPLETE" and r.train]
    # a control re-draws the samples under another seed: the reference's own run pairs with the members'
    ref = next((r for r in reversed(runs) if r.origin != "control"), runs[-1] if runs else None)
    if ref is None:
        return None
    axis = (rule.resource() or ("cost_per_task", "cost"))[0]
    ref_report = stored_train(paths, ref, reference)
    against = "incumbent" if settings.reference == "incumbent" or not rule.against_reference else settings.reference
    standing = TrainStanding(quality=float(ref.train.get(q, 0.0)), resource=float(ref.train.get(axis, float("inf"))))
    out: list[TrainChance] = []
    for r in front:
        assert r.genome is not None
        if r.variant_hash == reference.content_hash:
            # a rule that ships the best on dev keeps the incumbent when it is the best: it stays in the running
            out.append(TrainChance("none", f"the {against} itself") if rule.against_reference else TrainChance("possible"))
            continue
        paired = paired_interval(ref_report, stored_train(paths, r, variant_of(r.genome)), metric=q,
                                 confidence=settings.search.confidence)
        mine = TrainStanding(quality=float(r.train.get(q, 0.0)), resource=float(r.train.get(axis, float("inf"))),
                             low=paired[0] if paired else None, high=paired[1] if paired else None)
        out.append(rule.train_chance(mine, standing, min_effect=settings.search.min_effect, quality=q, against=against))
    return out


def incumbent_member(rounds: SearchTrials, baseline: HarnessVariant, dev: EvalReport) -> Member:
    """The incumbent as the champion row, when no candidate is chosen."""
    first = next((r for rs in rounds.per_round[:1] for r in rs if r.origin == "baseline"), None)
    return Member(trial=first.number if first else "base", round=0, variant_hash=baseline.content_hash, genome=BASELINE,
                  authors=[], changes="baseline", edits=[], params=dict(first.params) if first else {},
                  values=list(first.values or []) if first else [], train=dict(first.train) if first else {},
                  dev=dict(dev.metrics), diff="", champion=False)


def pick_noninferior(settings: RunSettings, q: str, reference_dev: EvalReport, ranked: Sequence[tuple[Any, dict[str, Any]]],
                     reports: Sequence[EvalReport], echo: Callable[[str], None]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``compare_with_reference`` on member rows: each row's paired dev difference is recorded on
    it, and the picked row returned (None when nothing cheaper, or faster, is as good)."""
    pick, decision, compared = compare_with_reference(
        settings, q, reference_dev, [(m["dev"], bool(m["dev_verdict"]["feasible"])) for _, m in ranked], reports, echo)
    for (_, m), comparison in zip(ranked, compared):
        m["dev_vs_reference"] = comparison
    return (ranked[pick][1] if pick is not None else None), decision


def compare_with_reference(settings: RunSettings, q: str, reference_dev: EvalReport, members: Sequence[tuple[Mapping[str, float], bool]],
                           reports: Sequence[EvalReport], echo: Callable[[str], None]
                           ) -> tuple[int | None, dict[str, Any], list[dict[str, float] | None]]:
    """The rule's pick among the dev-evaluated members ((dev metrics, feasible), with their dev
    reports): its index, the decision record, and each member's paired dev difference against
    the reference (None: no task paired); None (with a warning) when nothing cheaper (faster) is
    as good."""
    s, rule, margin = settings.search, settings.rule, settings.margin
    reference = float(reference_dev.metrics.get(q, 0.0))
    if not any(r.scored for r in reference_dev.tasks):
        raise FinishAborted(f"the {settings.reference}'s dev evaluation scored no task (every episode was skipped as an "
                            "infrastructure failure), so nothing can be compared with it; see the job logs under the sweep dir")
    candidates: list[DevCandidate] = []
    compared: list[dict[str, float] | None] = []
    for (dev, feasible), report in zip(members, reports):
        tasks, a, b = paired_scores(reference_dev, report, metric=q)
        if not tasks:  # every episode of this member was skipped: no evidence either way, so never chosen
            compared.append(None)
            candidates.append(DevCandidate(float("-inf"), float("-inf"), float("inf"), False, float("inf")))
            continue
        test = quality_test(a, b, null=-margin, clusters=paired_clusters(reference_dev, report), confidence=s.confidence)
        compared.append({"mean_diff": test.mean_diff, "low": test.low, "high": test.high, "n": test.n, "clusters": test.clusters})
        candidates.append(DevCandidate(float(dev.get(q, 0.0)), test.low, float(dev.get("cost_per_task", 0.0)), feasible,
                                       float(dev.get("latency_p95", 0.0))))
    decision: dict[str, Any] = {"rule": settings.decision, "margin": margin, "reference": settings.reference,
                                "reference_quality": reference}
    pick = rule.pick(candidates, reference=reference_dev.metrics, quality=q)
    if pick is None:  # not a warning: the answer's first lines say it, once, and why
        return None, {**decision, "evidence": "none"}, compared
    index, evidence = pick
    if evidence == "point":
        echo(f"warning: no {rule.comparative} member's dev interval clears -{margin:g}; the champion is the {rule.superlative} "
             f"whose dev {q} point estimate is within the margin, and the holdout may well not confirm it")
    return index, {**decision, "evidence": evidence}, compared

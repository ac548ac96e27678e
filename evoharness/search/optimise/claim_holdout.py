"""The finish's second stage, claim on the holdout: the chosen champion's one look at the sealed
split (refused when it would be a second look not asked for), the claim against the incumbent or
the named reference under the decision rule, the look journaled, and the champion's ablation on
dev. The champion's holdout run, the incumbent's (and reference's) and the ablation's dev runs are
one batch; when the champion is the incumbent itself there is nothing to claim, and none of them
runs (no paid episode on the holdout, which stays sealed)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.workload import Split
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.evaluation.claim import make_claim, no_candidate_claim
from evoharness.search.evaluation.criteria import quality_objective
from evoharness.search.evaluation.metrics import EvalReport
from evoharness.search.evaluation.power import power
from evoharness.search.genome import BASELINE, Genome, Pools
from evoharness.search.optimise.ablation import ablation_jobs, ablation_rows
from evoharness.search.optimise.select_dev import DevSelection, Evaluate, report_of
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.trial import TrialResult
from evoharness.search.records.looks import RegistryLooks, Seal, append_look, look_row, looked_at, read_looks, registry_row, seen_looks
from evoharness.search.records.versions import versioned


@dataclass(frozen=True)
class HoldoutClaim:
    """The stage's result: claim.json's record, the champion's holdout report, the ablation rows,
    the champion's variant hash, and the incumbent's and the reference's holdout reports (the
    incumbent's twice without a named reference). No report when the incumbent stayed: no
    holdout was run."""

    claim: dict[str, Any]
    champion_hold: EvalReport | None
    ablation: list[dict[str, Any]]
    champion_hash: str
    baseline_hold: EvalReport | None
    reference_hold: EvalReport | None


def power_fields(settings: RunSettings, chosen: DevSelection, *, tasks: int, clusters: int, metric: str) -> dict[str, Any]:
    """The claim's reach, and whether its splits were too small for its question (run anyway under
    search.allow_underpowered): the same checks the preflight made, on the tasks actually paired
    (on the sealed split's, when no candidate was claimed: what a claim could have shown)."""
    checked = power(holdout_tasks=tasks, holdout_clusters=clusters, dev_tasks=len(chosen.reference_dev.tasks),
                    samples=settings.search.samples, margin=settings.rule.bar, confidence=settings.search.confidence, metric=metric)
    return {"reach": checked.reach, "underpowered": bool(checked.problems())}


def claim_on_holdout(settings: RunSettings, paths: StudyPaths, hashes: Mapping[str, str], chosen: DevSelection, pools: Pools, *,
                     evaluate: Evaluate, variant_of: Callable[[Genome], HarnessVariant], seal: Seal,
                     holdout_tasks: int = 0) -> HoldoutClaim:
    """Count the looks, run the champion's holdout and ablation, make the claim and journal the look
    (claim.json is the caller's to write). The look is journaled in the registry before the holdout
    is run, under the registry journal's lock: a process killed during the run has still looked."""
    s, q = settings.search, quality_objective(settings.objectives)
    champion = chosen.champion
    champion_hash = variant_of(champion.genome).content_hash
    baseline_hash = chosen.baseline_variant.content_hash
    candidate = champion_hash != baseline_hash  # the incumbent itself is no look at a candidate
    not_looks = {baseline_hash, *([variant_of(chosen.reference_genome).content_hash] if chosen.reference_genome else [])}
    with RegistryLooks(settings.registry_dir).locked() as registry:
        rows = registry.rows()
        seen = seen_looks(study=s.study, journal=paths.looks, evals=paths.evals, spend=paths.spend, registry_rows=rows, seal=seal,
                          exclude=not_looks)
        if candidate and seen and champion_hash not in seen and not s.second_look:
            # before the holdout is run: adding rounds (or studies) until a champion wins would be peeking
            raise ConfigError("search.second_look", second_look_refusal(seen, champion_hash, seal),
                              "pass search.second_look=true to claim it anyway (the claim and the report then say so); "
                              "a new search.study or a deleted journal does not reset the count")
        if candidate and not any(looked_at(r) == champion_hash and r.get("study") == s.study and seal.covers(r) for r in rows):
            registry.append(registry_row(variant_hash=champion_hash, by="search", seal=seal, study=s.study,
                                         champion_hash=champion_hash, baseline_hash=baseline_hash))
    if not candidate:
        against = variant_of(chosen.reference_genome).content_hash if chosen.reference_genome else baseline_hash
        claim = versioned("claim", no_candidate_claim(baseline_hash=against, champion_hash=champion_hash, confidence=s.confidence,
                                                      resamples=s.resamples, min_effect=s.min_effect, hashes=hashes, metric=q,
                                                      rule=settings.rule))
        claim = {**claim, "looks": len(seen), "second_look": False,
                 "reference": settings.reference if chosen.reference_genome else "incumbent",
                 **(power_fields(settings, chosen, tasks=holdout_tasks, clusters=len(seal.clusters), metric=q) if holdout_tasks else {})}
        return HoldoutClaim(claim=claim, champion_hold=None, ablation=[], champion_hash=champion_hash, baseline_hold=None,
                            reference_hold=None)
    hold_jobs: list[tuple[Genome, Split, str]] = [(champion.genome, "holdout", "champion-holdout")]
    fixed_jobs = holdout_jobs(chosen.reference_genome)  # the claim's side, beside the champion's
    ablate = bool(champion.dev and q in champion.dev)
    layers_todo, ablation_batch = (ablation_jobs(champion.genome, pools, base_format=settings.base_format,
                                                 base_steps=settings.base_steps) if ablate else ([], []))
    # the ablation's dev runs need only the champion: they share the holdout batch, after its longest jobs
    jobs = [*hold_jobs, *fixed_jobs, *ablation_batch]
    done = evaluate(jobs)
    n, m = len(hold_jobs), len(fixed_jobs)
    hold, fixed, ablation_results = done[:n], done[n:n + m], done[n + m:]
    baseline_hold, reference_hold = holdout_reports(fixed, chosen.reference_genome)
    champion_hold = report_of(hold[0], "champion holdout")
    claim = versioned("claim", make_claim(reference_hold, champion_hold, confidence=s.confidence, resamples=s.resamples,
                                          min_effect=s.min_effect, seed=settings.seed, hashes=hashes, metric=q, rule=settings.rule))
    looks = len(seen) + (1 if champion_hash not in seen else 0)
    claim = {**claim, "looks": looks, "second_look": looks > 1,
             "reference": settings.reference if chosen.reference_genome else "incumbent",
             **power_fields(settings, chosen, tasks=int(claim["n"]), clusters=int(claim["clusters"]), metric=q)}
    if champion_hash not in {looked_at(r) for r in read_looks(paths.looks)}:  # a resume's is the same look
        append_look(paths.looks, look_row(champion_hash=champion_hash, baseline_hash=baseline_hash, claim=claim, look=looks,
                                          study=s.study, seal=seal))
    ablation: list[dict[str, Any]] = []
    if ablate and champion.dev:
        base_cost, champion_cost = chosen.baseline_dev.metrics.get("cost_per_task"), champion.dev.get("cost_per_task")
        ablation = ablation_rows(layers_todo, ablation_results, incumbent_q=float(chosen.baseline_dev.metrics.get(q, 0.0)),
                                 champion_q=float(champion.dev[q]), metric=q,
                                 incumbent_cost=float(base_cost) if isinstance(base_cost, (int, float)) else None,
                                 champion_cost=float(champion_cost) if isinstance(champion_cost, (int, float)) else None)
    return HoldoutClaim(claim=claim, champion_hold=champion_hold, ablation=ablation, champion_hash=champion_hash,
                        baseline_hold=baseline_hold, reference_hold=reference_hold)


def second_look_refusal(seen: Mapping[str, list[str]], champion_hash: str, seal: Seal) -> str:
    """Why a claim for ``champion_hash`` would be a second look: which variants the split was looked at for, and by whom."""
    first, where = next(iter(seen.items()))
    others = f" and {len(seen) - 1} other variant(s)" if len(seen) > 1 else ""
    split = f"splits {seal.splits_hash[:12]}" if seal.splits_hash else f"holdout {seal.holdout_hash[:12]}"
    return (f"the sealed holdout ({split}) was already looked at for variant {first[:12]} ({', '.join(where)}){others}; "
            f"a claim for champion {champion_hash[:12]} would be a second look at the same sealed split")


def holdout_jobs(ref_genome: Genome | None) -> list[tuple[Genome, Split, str]]:
    """The incumbent's holdout run, and a named reference's: the claim's side of the comparison."""
    jobs: list[tuple[Genome, Split, str]] = [(BASELINE, "holdout", "baseline-holdout")]
    return [*jobs, (ref_genome, "holdout", "reference-holdout")] if ref_genome else jobs


def holdout_reports(results: Sequence[TrialResult | BaseException], ref_genome: Genome | None) -> tuple[EvalReport, EvalReport]:
    """The incumbent's and the reference's holdout reports from ``holdout_jobs``' results (the
    incumbent's twice without a named reference); a failed one stops the finish."""
    baseline = report_of(results[0], "baseline holdout")
    return baseline, (report_of(results[1], "reference holdout") if ref_genome else baseline)

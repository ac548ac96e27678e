"""The finish's second stage, claim on the holdout: the chosen champion's one look at the sealed
split (refused when it would be a second look not asked for), the claim against the incumbent or
the named reference under the decision rule, the look journaled, and the champion's ablation on
dev, which shares the holdout's batch."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.workload import Split
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.evaluation.claim import make_claim
from evoharness.search.evaluation.criteria import quality_objective
from evoharness.search.evaluation.metrics import EvalReport
from evoharness.search.evaluation.power import power
from evoharness.search.genome import Genome, Pools
from evoharness.search.optimise.ablation import ablation_jobs, ablation_rows
from evoharness.search.optimise.select_dev import DevSelection, Evaluate, report_of
from evoharness.search.optimise.settings import RunSettings
from evoharness.search.records.looks import append_look, champions_seen, look_row, read_looks
from evoharness.search.records.versions import versioned


@dataclass(frozen=True)
class HoldoutClaim:
    """The stage's result: claim.json's record, the champion's holdout report (the incumbent's when
    the incumbent stayed), the ablation rows and the champion's variant hash."""

    claim: dict[str, Any]
    champion_hold: EvalReport
    ablation: list[dict[str, Any]]
    champion_hash: str


def power_fields(settings: RunSettings, claim: Mapping[str, Any], chosen: DevSelection) -> dict[str, Any]:
    """The claim's reach, and whether its splits were too small for its question (run anyway under
    search.allow_underpowered): the same checks the preflight made, on the tasks actually paired."""
    checked = power(holdout_tasks=int(claim["n"]), holdout_clusters=int(claim["clusters"]), dev_tasks=len(chosen.reference_dev.tasks),
                    samples=settings.search.samples, margin=settings.rule.bar, confidence=settings.search.confidence,
                    metric=str(claim["metric"]))
    return {"reach": checked.reach, "underpowered": bool(checked.problems())}


def claim_on_holdout(settings: RunSettings, looks_path: Path, hashes: Mapping[str, str], chosen: DevSelection, pools: Pools, *,
                     evaluate: Evaluate, variant_of: Callable[[Genome], HarnessVariant]) -> HoldoutClaim:
    """Run the champion's holdout and ablation, make the claim and journal the look (claim.json is the caller's to write)."""
    s, q = settings.search, quality_objective(settings.objectives)
    champion = chosen.champion
    champion_hash = variant_of(champion.genome).content_hash
    candidate = champion_hash != chosen.baseline_variant.content_hash  # the incumbent itself is no look at a candidate
    seen = champions_seen(read_looks(looks_path))
    if candidate and seen and champion_hash not in seen and not s.second_look:
        # before the holdout is run: adding rounds until a champion wins would be peeking
        raise ConfigError("search.second_look", f"study {s.study!r} already looked at its holdout for champion {seen[0][:12]}; "
                          f"a claim for champion {champion_hash[:12]} would be a second look at the same sealed split",
                          "start a new search.study, or pass search.second_look=true (the claim and the report then say so)")
    hold_jobs: list[tuple[Genome, Split, str]] = [(champion.genome, "holdout", "champion-holdout")] if candidate else []
    ablate = bool(candidate and champion.dev and q in champion.dev)
    layers_todo, ablation_batch = (ablation_jobs(champion.genome, pools, base_format=settings.base_format,
                                                 base_steps=settings.base_steps) if ablate else ([], []))
    # the ablation's dev runs need only the champion: they share the champion's holdout batch
    both = evaluate([*hold_jobs, *ablation_batch]) if hold_jobs or ablation_batch else []
    hold, ablation_results = both[:len(hold_jobs)], both[len(hold_jobs):]
    champion_hold = report_of(hold[0], "champion holdout") if candidate else chosen.baseline_hold
    claim = versioned("claim", make_claim(chosen.reference_hold, champion_hold, confidence=s.confidence, resamples=s.resamples,
                                          min_effect=s.min_effect, seed=settings.seed, hashes=hashes, metric=q, rule=settings.rule))
    looks = len(seen) + (1 if candidate and champion_hash not in seen else 0)
    claim = {**claim, "looks": looks, "second_look": looks > 1,
             "reference": settings.reference if chosen.reference_genome else "incumbent", **power_fields(settings, claim, chosen)}
    if candidate and champion_hash not in seen:  # the same champion again (a resume) is the same look, not a new one
        append_look(looks_path, look_row(champion_hash=champion_hash, baseline_hash=chosen.baseline_variant.content_hash,
                                         claim=claim, look=looks))
    ablation: list[dict[str, Any]] = []
    if ablate and champion.dev:
        ablation = ablation_rows(layers_todo, ablation_results, incumbent_q=float(chosen.baseline_dev.metrics.get(q, 0.0)),
                                 champion_q=float(champion.dev[q]), metric=q)
    return HoldoutClaim(claim=claim, champion_hold=champion_hold, ablation=ablation, champion_hash=champion_hash)

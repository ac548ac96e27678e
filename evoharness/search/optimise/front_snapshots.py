"""The search's side of the registry: the snapshots of the baseline, each round's winner and the
champion (none promoted), and the champion's stable path for the release step."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evoharness.compiler.atomic import write_text_atomic
from evoharness.compiler.provenance import git_revision
from evoharness.compiler.release.registry import Registry
from evoharness.compiler.release.snapshot import make_snapshot
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.genome import BASELINE, Genome, Pools, genome_to_config
from evoharness.search.genome_edits import authors
from evoharness.search.optimise.select import round_winner
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.study import TrialRecord


def _author(settings: RunSettings, g: Genome, pools: Pools) -> str:
    """The mutators behind a genome; genes the sampler picked itself (model, format, steps) are NSGA-II's."""
    return "+".join(authors(g, pools, settings.step_names)) or ("baseline" if g == BASELINE else "nsga2")


def _definition(settings: RunSettings, genome: Genome, pools: Pools) -> dict[str, Any]:
    agent, tool, model = genome_to_config(genome, pools, agent=settings.agent, tool=settings.tool, models=settings.models)
    return {"agent": agent, "tool_overrides": tool.get("overrides") or {}, "model": model}


def snapshot_for_search(
    settings: RunSettings, paths: StudyPaths, pools: Pools, round_fronts: Sequence[Sequence[TrialRecord]], champion: Mapping[str, Any],
    claim: Mapping[str, Any], *, config_hash: str, quality: str, variant_of: Callable[[Genome], HarnessVariant],
    baseline_metrics: Mapping[str, Any], champion_genome: Genome,
) -> dict[str, Any]:
    registry = Registry(settings.registry_dir)
    component = str(settings.agent["name"])
    common = {"study": settings.search.study, "config_hash": config_hash, "git_revision": git_revision()}
    base = make_snapshot(component, _definition(settings, BASELINE, pools), author="baseline", metrics=baseline_metrics,
                         provenance={**common, "variant_hash": variant_of(BASELINE).content_hash, "role": "baseline"})
    registry.write_snapshot(base)
    g = champion_genome
    champ = make_snapshot(component, _definition(settings, g, pools), author=_author(settings, g, pools), parent_hash=base.content_hash,
                          metrics={"train": champion.get("train") or {}, "dev": champion.get("dev") or {},
                                   "holdout": champion.get("holdout") or {}},
                          provenance={**common, "round": champion["round"], "trial": champion["trial"],
                                      "variant_hash": variant_of(g).content_hash, "role": "champion", "changes": champion.get("changes"),
                                      "claim": {k: claim[k] for k in ("verdict", "mean_diff", "low", "high", "n", "confidence")}})
    registry.write_snapshot(champ)
    rounds = []
    for k, best in enumerate(round_fronts):
        winner = round_winner(best, quality)
        if winner is None or winner.genome is None:
            continue
        snap = make_snapshot(component, _definition(settings, winner.genome, pools), author=_author(settings, winner.genome, pools),
                             parent_hash=base.content_hash, metrics={"train": dict(winner.train)},
                             provenance={**common, "round": k, "trial": winner.number,
                                         "variant_hash": variant_of(winner.genome).content_hash, "role": "round_winner"})
        registry.write_snapshot(snap)
        rounds.append(snap.content_hash)
    champion_path = paths.champion
    if champ.content_hash == base.content_hash:  # the search found nothing better than what ships
        champion_path.unlink(missing_ok=True)
        return {"baseline": base.content_hash, "rounds": rounds, "champion": champ.content_hash, "champion_path": None}
    # a stable path for the release step: `evoharness promote runs/<study>/champion.json`;
    # a byte copy, since the snapshot's key order is part of its hash
    write_text_atomic(champion_path, Path(registry.path_of(champ.content_hash)).read_text(encoding="utf-8"))
    return {"baseline": base.content_hash, "rounds": rounds, "champion": champ.content_hash, "champion_path": str(champion_path)}

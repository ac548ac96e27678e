"""The search's side of the registry: what it releases from, and the snapshots it writes."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna

from compiler.atomic import write_text_atomic
from compiler.provenance import git_revision
from compiler.release.registry import Registry, make_snapshot
from compiler.variant import compile_agent
from search.genome import BASELINE, Genome, Pools, authors, genome_to_config

if TYPE_CHECKING:
    from search.optimise.run import SearchRun


def _author(g: Genome, pools: Pools, run: SearchRun) -> str:
    """The mutators behind a genome; genes the sampler picked itself (model, format, steps) are NSGA-II's."""
    return "+".join(authors(g, pools, [s["name"] for s in run.agent.get("workflow", [])])) or ("baseline" if g == BASELINE else "nsga2")


def _definition(run: SearchRun, genome: Genome, pools: Pools) -> tuple[dict[str, Any], str]:
    agent, tool, model = genome_to_config(genome, pools, agent=run.agent, tool=run.tool, models=run.models)
    variant = compile_agent(agent, tool=tool, model=model)
    return {"agent": agent, "tool_overrides": tool.get("overrides") or {}, "model": model}, variant.content_hash


def snapshot_for_search(
    run: SearchRun, studies: Sequence[optuna.Study], pools: Pools, front: list[dict[str, Any]], champion: dict[str, Any],
    claim: dict[str, Any], *, baseline_metrics: dict[str, Any],
) -> dict[str, Any]:
    """Write the baseline, each round's winner and the champion as snapshots (none is promoted)."""
    registry = Registry(str(run.cfg.registry_dir))
    component = str(run.agent["name"])
    study = str(run.s.study)
    common = {"study": study, "config_hash": run.config_hash, "git_revision": git_revision()}
    definition, variant_hash = _definition(run, BASELINE, pools)
    base = make_snapshot(component, definition, author="baseline", metrics=baseline_metrics,
                         provenance={**common, "variant_hash": variant_hash, "role": "baseline"})
    registry.write_snapshot(base)
    g = Genome.from_dict(champion["genome"])
    d, vh = _definition(run, g, pools)
    champ = make_snapshot(component, d, author=_author(g, pools, run), parent_hash=base.content_hash,
                          metrics={"train": champion.get("train") or {}, "dev": champion.get("dev") or {}, "holdout": champion.get("holdout") or {}},
                          provenance={**common, "round": champion["round"], "trial": champion["trial"], "variant_hash": vh, "role": "champion",
                                      "claim": {k: claim[k] for k in ("verdict", "mean_diff", "low", "high", "n", "confidence")}})
    registry.write_snapshot(champ)
    q = next((o.metric for o in run.objectives if o.direction == "maximize"), "score_mean")
    rounds = []
    for k, s in enumerate(studies):
        best = [t for t in s.best_trials if t.user_attrs.get("genome")]
        if not best:
            continue
        t = max(best, key=lambda t: float(t.user_attrs.get("train", {}).get(q, 0.0)))
        g = Genome.from_dict(t.user_attrs["genome"])
        d, vh = _definition(run, g, pools)
        snap = make_snapshot(component, d, author=_author(g, pools, run), parent_hash=base.content_hash,
                             metrics={"train": t.user_attrs.get("train", {})},
                             provenance={**common, "round": k, "trial": t.number, "variant_hash": vh, "role": "round_winner"})
        registry.write_snapshot(snap)
        rounds.append(snap.content_hash)
    champion_path = Path(run.dir) / "champion.json"
    if champ.content_hash == base.content_hash:  # the search found nothing better than what ships
        champion_path.unlink(missing_ok=True)
        return {"baseline": base.content_hash, "rounds": rounds, "champion": champ.content_hash, "champion_path": None}
    # a stable path for the release step: `evoharness promote runs/<study>/champion.json`
    # a byte copy: the snapshot's key order is part of its hash
    write_text_atomic(champion_path, Path(registry.path_of(champ.content_hash)).read_text(encoding="utf-8"))
    return {"baseline": base.content_hash, "rounds": rounds, "champion": champ.content_hash, "champion_path": str(champion_path)}

"""How much of the reachable harness lift the default search finds for a cheap model, on response
surfaces it cannot know, and whether it ships edits that hurt.

For each blind surface of the simulated model (docs/sim-model.md, "Blind surfaces": the cue words
and effect sizes drawn from a seed) and each search seed, the default search runs in-process with
sim_small as the incumbent and the only model (every gain is a harness edit), under
``criteria=quality_first``. Then, on dev, with shared draws over several simulated worlds (the
benchmark's low-noise yardstick; the search itself ran with the default, unshared draws):

* base: the base harness;
* shipped: the champion if its holdout claim is a ``win`` (what ``promote --if-win`` ships), else base;
* oracle: the best harness reachable from the product's own edit library on that surface. The
  library is what the built-in mutators propose from the base harness's train failures over many
  rng seeds (steps, and rule lines naming tool and argument); the oracle reads the surface (a
  benchmark may, the product may not) to keep the entries whose wording is live there, then
  enumerates the subsets {step, rules} on train and takes the best.

Figures: per run, lift = (shipped − base) / (oracle − base) (NaN when the oracle finds no lift);
over runs, the median and the minimum; the same for the champion the search found, shipped or not
(``harness_lift_found_median``: the search's part, apart from the holdout claim's gate);
harmful edits shipped = shipped edits whose leave-one-out
effect on dev (shipped − shipped without that edit) is below −1 task in the split; the search's wall.

``--ceiling-worlds N`` adds, per surface, what a perfect search would ship: the oracle itself goes
through the product's own holdout claim (``criteria=quality_first``'s superiority test, as the
searches here run, with search/default.yaml's confidence, min_effect and samples; search overrides
given to this script do not reach it) against base in N simulated worlds with unshared draws, as
N searches would meet it. Its win rate bounds the shipped lift from above: no search ships more
than the gate lets through.

    python bench/harness_lift.py [--surfaces 5 | --surface-seeds 0,1,8] [--seeds 2] [--worlds 3] [--ceiling-worlds 6]
                                 [--surface documented] [overrides...]
"""
from __future__ import annotations

import argparse
import contextlib
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import TOOL, base_agent, figure, model_config

CATEGORIES = ["multi_turn_base", "multi_turn_miss_param", "multi_turn_long_context"]
LIBRARY_RNG_SEEDS = 40  # rng seeds the mutators are asked with, to collect every wording they can give
PAIR = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def quality(variant: Any, workload: Any, split: str, worlds: Sequence[int]) -> float:
    """Mean pass rate over simulated worlds, shared draws (a per-task monotone yardstick)."""
    from evoharness.compiler.sim import configure_sim
    from evoharness.search.evaluation.evaluate import evaluate_variant

    values = []
    for w in worlds:
        configure_sim(None, shared_draws=True, world=w)
        values.append(evaluate_variant(variant, workload, split, samples=1, seed=w).metrics["pass_rate"])
    configure_sim(None, shared_draws=False, world=0)
    return statistics.fmean(values)


def ceiling(base: Any, oracle: Any, workload: Any, worlds: Sequence[int]) -> list[dict[str, Any]]:
    """The product's holdout claim of the oracle against base, once per world (unshared draws)."""
    from omegaconf import OmegaConf

    from evoharness.compiler.sim import configure_sim
    from evoharness.search.evaluation.claim import make_claim
    from evoharness.search.evaluation.decision import BestQuality
    from evoharness.search.evaluation.evaluate import evaluate_variant

    s = OmegaConf.load(Path(__file__).resolve().parent.parent / "evoharness" / "conf" / "search" / "default.yaml")
    out = []
    for w in worlds:
        configure_sim(None, shared_draws=False, world=w)
        b, o = (evaluate_variant(v, workload, "holdout", samples=int(s.samples), seed=0) for v in (base, oracle))
        c = make_claim(b, o, confidence=float(s.confidence), resamples=int(s.resamples), min_effect=float(s.min_effect),
                       seed=w, hashes={}, rule=BestQuality())  # criteria=quality_first's rule, as the searches here run
        out.append({"verdict": c["verdict"], "diff": round(c["mean_diff"], 3), "low": round(c["low"], 3), "n": c["n"],
                    "clusters": c["clusters"]})
    configure_sim(None, shared_draws=False, world=0)
    return out


def library(agent: Mapping[str, Any], workload: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """What the built-in mutators propose from the base harness's train failures: steps, and
    the rule lines of the rule miner's section edits, over many rng seeds."""
    import random

    from evoharness.compiler.catalog import build_catalog, select_tools
    from evoharness.compiler.runtime.workload import Failure
    from evoharness.compiler.variant import compile_agent
    from evoharness.search.evaluation.evaluate import evaluate_variant
    from evoharness.search.genome import initial_pools
    from evoharness.search.mutators.base import FailedEpisode, MutationContext, make_mutator

    base = compile_agent(dict(agent), tool=TOOL, model=model_config("sim_small"))
    report = evaluate_variant(base, workload, "train", samples=1, seed=0)
    evidence = tuple(FailedEpisode(e.task_id, failures=tuple(Failure.from_dict(f) for f in e.failures))
                     for e in report.episodes if e.failures)
    tools = {s.name: s for s in select_tools(agent["tools"], build_catalog(TOOL))}
    pools = initial_pools(agent, models=[], temperatures=[], base_model="base", base_temperature=0.0)
    ctx = MutationContext(agent=agent, tools=tools, pools=pools, front=(), evidence=evidence, models=("base",), round=1)
    steps: dict[str, dict[str, Any]] = {}
    lines: dict[str, None] = {}
    for name, params in (("workflow_step_append", {}), ("rule_miner", {"top_k": 25, "targets": "section"})):
        mutator = make_mutator(name, **params)
        for s in range(LIBRARY_RNG_SEEDS):
            for p in mutator.propose(ctx, rng=random.Random(s)):
                value = getattr(p, "entry", None) and p.entry.value
                if p.kind == "step" and isinstance(value, Mapping):
                    steps.setdefault(f"{value['name']}|{value['instructions']}", dict(value))
                elif p.kind == "section" and isinstance(value, str):
                    lines.update((ln[2:].strip(), None) for ln in value.splitlines() if ln.startswith("- "))
    return list(steps.values()), list(lines)


def oracle_agents(agent: Mapping[str, Any], surface: Any, steps: Sequence[Mapping[str, Any]],
                  lines: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The library's entries whose wording is live on ``surface``, in every combination."""
    import copy

    review = next((s for s in steps if s.get("trigger") == "before_final" and surface.is_review(s["name"], s["instructions"])), None)
    live: dict[tuple[str, ...], str] = {}
    for line in lines:  # one counting wording per (tool, argument): more only lengthen the prompt
        if surface.counts_as_rule(line):
            live.setdefault(tuple(PAIR.findall(line)[:2]), line)
    out: dict[str, dict[str, Any]] = {}
    for with_step in (False, True):
        for with_rules in (False, True):
            if (with_step and review is None) or (with_rules and not live):
                continue
            a = copy.deepcopy(dict(agent))
            if with_step and review is not None:
                a["workflow"] = [*a["workflow"], {**review, "after": [a["workflow"][-1]["name"]], "optional": False}]
            if with_rules:
                rules = "\n".join(f"- {ln}" for ln in live.values())
                a["prompt_sections"]["policy"] = a["prompt_sections"]["policy"].rstrip() + "\n" + rules
            out[f"step={with_step},rules={with_rules}"] = a
    return out


def edits(genome: Any, pools: Any, base_format: str) -> list[tuple[str, Any]]:
    """Each non-baseline gene of ``genome``, as (label, genome without it)."""
    from evoharness.search.genome import Genome

    out: list[tuple[str, Genome]] = []
    out += [(f"section {k} ({pools.sections[k][i].author})", replace(genome, sections={**genome.sections, k: 0}))
            for k, i in genome.sections.items() if i]
    out += [(f"tool {k} ({pools.tools[k][i].author})", replace(genome, tools={**genome.tools, k: 0}))
            for k, i in genome.tools.items() if i]
    out += [(f"step {k} ({pools.steps[k].author})", replace(genome, steps={**genome.steps, k: False}))
            for k, on in genome.steps.items() if on and k in pools.steps and pools.steps[k].author != "baseline"]
    if genome.toolset:
        out.append((f"toolset ({pools.toolsets[genome.toolset].author})", replace(genome, toolset=0)))
    if genome.context:
        out.append((f"context ({pools.contexts[genome.context].author})", replace(genome, context=0)))
    if genome.temperature:
        out.append((f"temperature {pools.temperatures[genome.temperature].value}", replace(genome, temperature=0)))
    if genome.tool_format not in (None, base_format):
        out.append((f"format {genome.tool_format}", replace(genome, tool_format=None)))
    return out


def run_search(runs: Path, study: str, seed: int, overrides: Sequence[str]) -> tuple[Any, Any, float]:
    import json

    from evoharness import api
    from evoharness.search.genome import Pools

    start = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the figure lines only
        # a runs dir per search: each surface is its own world, with its own sealed holdout's looks
        outcome = api.search([f"runs_dir={runs / study}", "model=sim_small", "search.models=[]", "criteria=quality_first",
                              f"search.study={study}", f"search.seed={seed}", "hydra/launcher=basic", *overrides])
    seconds = time.perf_counter() - start
    last = max((runs / study / study).glob("pools/r*.json"), key=lambda p: int(p.stem[1:]))
    return outcome, Pools.from_dict(json.loads(last.read_text(encoding="utf-8"))["pools"]), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surfaces", type=int, default=5, help="blind surfaces 0..N-1")
    parser.add_argument("--surface-seeds", default=None, help="blind surfaces by seed, comma-separated (instead of --surfaces)")
    parser.add_argument("--seeds", type=int, default=2, help="search seeds per surface")
    parser.add_argument("--worlds", type=int, default=3, help="simulated worlds the dev yardstick averages")
    parser.add_argument("--ceiling-worlds", type=int, default=0,
                        help="per surface, the oracle's holdout claim in this many worlds: what a perfect search ships")
    parser.add_argument("--surface", choices=("blind", "documented"), default="blind")
    args, overrides = parser.parse_known_args(argv)
    if args.ceiling_worlds < 0:
        parser.error(f"--ceiling-worlds {args.ceiling_worlds}: use 0 (none) or a positive number of worlds")

    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.sim.surface import surface_for
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.genome import Genome, genome_to_config

    workload = BfclWorkload(categories=CATEGORIES)
    agent = base_agent()
    models = {"base": model_config("sim_small")}
    worlds = range(args.worlds)
    runs = Path(tempfile.mkdtemp(prefix="harness-lift-"))
    lifts: list[float] = []
    found_lifts: list[float] = []
    harmful_total, walls = 0, []
    ship_rates: list[float] = []
    seeds = [int(x) for x in args.surface_seeds.split(",")] if args.surface_seeds else list(range(args.surfaces))
    for sf in seeds if args.surface == "blind" else [0]:
        configure_sim(None, time_scale=0.0, surface=args.surface, surface_seed=sf, shared_draws=False, world=0)
        surface = surface_for(args.surface, sf)
        base = compile_agent(dict(agent), tool=TOOL, model=models["base"])
        steps, lines = library(agent, workload)
        candidates = {k: compile_agent(a, tool=TOOL, model=models["base"])
                      for k, a in oracle_agents(agent, surface, steps, lines).items()}
        on_train = {k: quality(v, workload, "train", worlds[:2]) for k, v in candidates.items()}
        best = max(on_train, key=lambda k: on_train[k], default=None)
        base_dev = quality(base, workload, "dev", worlds)
        oracle_dev = max(base_dev, quality(candidates[best], workload, "dev", worlds)) if best else base_dev
        if args.ceiling_worlds and best and oracle_dev > base_dev:
            # worlds apart from the yardstick's and the searches' (world 0)
            claims = ceiling(base, candidates[best], workload, range(1000, 1000 + args.ceiling_worlds))
            rate = sum(c["verdict"] == "win" for c in claims) / len(claims)
            ship_rates.append(rate)
            figure(f"perfect_search_ship_rate_{surface.name}", round(rate, 3), None, None, oracle_gain=round(oracle_dev - base_dev, 3),
                   claims=claims)
        for seed in range(args.seeds):
            outcome, pools, seconds = run_search(runs, f"lift-{args.surface}{sf}-s{seed}", seed, overrides)
            walls.append(seconds)
            configure_sim(None, time_scale=0.0, surface=args.surface, surface_seed=sf)
            won = outcome.claim.verdict == "win" and not outcome.kept_incumbent
            genome = outcome.champion.genome if won else Genome()

            def compiled(g: Genome, pools: Any = pools) -> Any:
                a, t, m = genome_to_config(g, pools, agent=agent, tool=TOOL, models=models)
                return compile_agent(a, tool=t, model=m)

            shipped_dev = quality(compiled(genome), workload, "dev", worlds) if won else base_dev
            lift = (shipped_dev - base_dev) / (oracle_dev - base_dev) if oracle_dev > base_dev else math.nan
            # what the search found, whether or not its holdout claim let it ship: the search's part of the
            # lift, apart from the sealed holdout's gate
            found = outcome.champion.genome if isinstance(outcome.champion.genome, Genome) else Genome()
            found_dev = shipped_dev if found == genome else quality(compiled(found), workload, "dev", worlds)
            found_lift = (found_dev - base_dev) / (oracle_dev - base_dev) if oracle_dev > base_dev else math.nan
            if not math.isnan(found_lift):
                found_lifts.append(found_lift)
            n_dev = len(list(workload.tasks("dev")))
            effects = {label: round(shipped_dev - quality(compiled(without), workload, "dev", worlds), 4)
                       for label, without in (edits(genome, pools, str(agent["tool_format"])) if won else [])}
            harmful = [label for label, effect in effects.items() if effect < -1.0 / n_dev]
            harmful_total += len(harmful)
            if not math.isnan(lift):
                lifts.append(lift)
            figure(f"lift_{surface.name}_seed{seed}", None if math.isnan(lift) else round(lift, 3), None, None,
                   base=round(base_dev, 3), shipped=round(shipped_dev, 3), found=round(found_dev, 3),
                   found_lift=None if math.isnan(found_lift) else round(found_lift, 3), oracle=round(oracle_dev, 3), oracle_pick=best,
                   verdict=outcome.claim.verdict, champion=outcome.champion.changes, edit_effects=effects, harmful=harmful,
                   live={"review": surface.review_cues, "rules": surface.rule_cues}, search_s=round(seconds, 1))
    configure_sim(None, surface="documented", surface_seed=0, world=0, shared_draws=False)
    median = statistics.median(lifts) if lifts else math.nan
    low = min(lifts) if lifts else math.nan
    figure("harness_lift_median", round(median, 3), ">= 0.7", median >= 0.7, runs=len(lifts))
    figure("harness_lift_min", round(low, 3), ">= 0.4", low >= 0.4)
    figure("harmful_edits_shipped", harmful_total, 0, harmful_total == 0)
    found_median = statistics.median(found_lifts) if found_lifts else math.nan
    figure("harness_lift_found_median", round(found_median, 3), None, None, runs=len(found_lifts),
           min=round(min(found_lifts), 3) if found_lifts else None)
    if ship_rates:
        # a perfect search's lift is 1 in a world whose claim wins and 0 elsewhere: when fewer than half of its
        # runs can ship, no search's median lift reaches 0.7
        figure("perfect_search_ship_rate_mean", round(statistics.fmean(ship_rates), 3), None, None, surfaces=len(ship_rates),
               min=round(min(ship_rates), 3), max=round(max(ship_rates), 3))
    figure("search_wall_s_median", round(statistics.median(walls), 1) if walls else None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())

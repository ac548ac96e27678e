"""The search's yardstick: how much of the true Pareto front does NSGA-II find per trial?

The simulated model's response surface is known and deterministic (samples=1, one seed), so a
small genome can be enumerated exhaustively:

    model {sim_small, sim_medium, sim_large} x tool_format {json, bash}
    x verify step {off, on} x temperature {0.0, 0.7}  = 24 variants

Each is compiled and evaluated on the first N BFCL train tasks (N=20; 10 with --quick). The true
front over (pass_rate max, cost_per_task min) and its exact 2-D hypervolume (reference point:
pass_rate 0, cost 1.1 x the largest cost) are the target. Then the project's NSGA-II sampler
(evoharness.search.optimise.study.make_sampler: population 6, uniform crossover) and Optuna's RandomSampler search the
same space; each trial is answered from the enumerated table (identical to re-evaluating, which
the script checks once). Budgets count trials, repeats included: a sampler that proposes a genome
twice pays twice. Four setups: the plain samplers; the baseline enqueued first, as
search/optimise/run.py does; that plus a fix that books enqueued trials into an NSGA-II
generation (Optuna leaves them out, see run_search); and that plus free repeats (a known genome
answered from the ledger, so the budget counts distinct genomes).

    python bench/search_efficiency.py [--quick]
"""
from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import optuna
from _common import TOOL, agent_with_verify, model_config, same_metrics, table

MODELS = ("sim_small", "sim_medium", "sim_large")
TEMPERATURES = (0.0, 0.7)
FORMATS = ("json", "bash")
POPULATION = 6
BUDGETS = (6, 12, 18)
SEEDS = (0, 1, 2)
MORE_SEEDS = tuple(range(30))  # the table lookup is free, so a 30-seed row shows the spread

Key = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Point:
    pass_rate: float  # maximise
    cost: float  # USD per task, minimise


def key_of(params: Mapping[str, Any]) -> Key:
    return tuple(sorted(params.items()))


# -- exact 2-D hypervolume -----------------------------------------------------------------

def front(points: Sequence[Point]) -> list[Point]:
    """The non-dominated points (pass_rate up, cost down); equal points are all kept."""
    def dominated(p: Point) -> bool:
        return any(q.pass_rate >= p.pass_rate and q.cost <= p.cost and q != p for q in points)

    return [p for p in points if not dominated(p)]


def hypervolume(points: Sequence[Point], ref_cost: float, ref_pass: float = 0.0) -> float:
    """Area dominated by ``points`` and bounded by (ref_pass, ref_cost): sweep by cost, then the
    strip between the best pass rate so far and this point's belongs to this point's cost."""
    hv, best = 0.0, ref_pass
    for p in sorted(points, key=lambda p: (p.cost, -p.pass_rate)):
        if p.cost < ref_cost and p.pass_rate > best:
            hv += (ref_cost - p.cost) * (p.pass_rate - best)
            best = p.pass_rate
    return hv


# -- the enumerated surface ----------------------------------------------------------------

def enumerate_surface(n_tasks: int, sim_surface: str = "documented", surface_seed: int = 0
                      ) -> tuple[dict[Key, Point], list[tuple[Key, dict[str, float]]], dict[str, Any], float]:
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant
    from evoharness.search.genome import genome_to_config, initial_pools
    from evoharness.search.genome_params import param_space, params_to_genome

    # shared draws: the enumerated surface is the low-variance true front the search is measured against
    configure_sim(None, time_scale=0.0, shared_draws=True,  # cost and pass rate do not depend on the sleep
                  surface=sim_surface, surface_seed=surface_seed)
    agent = agent_with_verify()
    pools = replace(
        initial_pools(agent, models=MODELS, temperatures=TEMPERATURES, base_model="sim_small", base_temperature=0.0),
        formats=FORMATS,
    )
    space = param_space(pools)
    assert set(space) == {"model", "temperature", "tool_format", "step.verify"}, space
    models = {m: model_config(m) for m in MODELS}
    workload = BfclWorkload()
    tasks = list(workload.tasks("train"))[:n_tasks]

    def run(params: Mapping[str, Any]) -> dict[str, float]:
        a, t, m = genome_to_config(params_to_genome(params), pools, agent=agent, tool=TOOL, models=models)
        variant = compile_agent(a, tool=t, model=m)
        return dict(evaluate_variant(variant, workload, "train", samples=1, seed=0, tasks=tasks, concurrency=16).metrics)

    names = sorted(space)
    surface: dict[Key, Point] = {}
    rows: list[tuple[Key, dict[str, float]]] = []
    start = time.perf_counter()
    for values in itertools.product(*(space[n] for n in names)):
        params = dict(zip(names, values))
        metrics = run(params)
        surface[key_of(params)] = Point(metrics["pass_rate"], metrics["cost_per_task"])
        rows.append((key_of(params), metrics))
    seconds = time.perf_counter() - start
    # the table stands in for re-evaluation only if evaluation is deterministic: check one variant
    again = run(dict(rows[-1][0]))
    if not same_metrics(again, rows[-1][1]):
        sys.exit("re-evaluating a variant gave different metrics: the surface is not deterministic")
    labels = {"models": [e.value for e in pools.models], "temperatures": [e.value for e in pools.temperatures], "space": space}
    return surface, rows, labels, seconds


# -- the search against the table ----------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    label: str
    enqueue_baseline: bool  # the search's start: the baseline genome is trial 0
    generation_fix: bool  # give enqueued trials their NSGA-II generation (see below)
    repeats_free: bool  # a repeated genome is answered from the ledger: the budget counts distinct genomes


SETUPS = (
    Setup("plain samplers", False, False, False),
    Setup("baseline enqueued", True, False, False),
    Setup("  + generation fix", True, True, False),
    Setup("  + generation fix, repeats free (as optimise/run.py)", True, True, True),
)
MAX_TRIALS = 300  # repeats-free runs stop here if a sampler keeps proposing known genomes


def run_search(make_sampler: Callable[[int], optuna.samplers.BaseSampler], seed: int, surface: Mapping[Key, Point],
               space: Mapping[str, tuple[Any, ...]], baseline: Mapping[str, Any], setup: Setup, budget: int) -> list[Key]:
    """Ask/tell one generation (POPULATION trials) at a time, like search/optimise/run.py.
    Returns the genome key of every trial in order (until ``budget`` trials, or ``budget``
    distinct genomes when repeats are free).

    Optuna evaluates an NSGA-II trial's relative params lazily, and an enqueued trial's fixed
    params never need them, so it never gets an ``NSGAIISampler:generation``: it is in no
    generation's population and never a parent. ``generation_fix`` touches ``relative_params``
    after ``ask`` so it is booked into the current generation like any other trial."""
    from evoharness.search.optimise.study import distributions

    study = optuna.create_study(directions=["maximize", "minimize"], sampler=make_sampler(seed))
    if setup.enqueue_baseline:
        study.enqueue_trial(dict(baseline))
    dists = distributions(space)
    keys: list[Key] = []

    def spent() -> int:
        return len(set(keys)) if setup.repeats_free else len(keys)

    while spent() < budget and len(keys) < MAX_TRIALS:
        trials = [study.ask(dists) for _ in range(POPULATION if setup.repeats_free else min(POPULATION, budget - len(keys)))]
        for t in trials:
            if setup.generation_fix:
                _ = t.relative_params
            k = key_of(t.params)
            p = surface[k]
            study.tell(t, values=[p.pass_rate, p.cost])
            keys.append(k)
    return keys


@dataclass
class BudgetStats:
    hv_ratio: list[float]  # one per seed
    front_found: list[int]
    trials: list[int]  # trials asked
    distinct: list[int]  # distinct genomes among them


def score_runs(runs: Sequence[list[Key]], surface: Mapping[Key, Point], true_front_keys: set[Key],
               ref_cost: float, true_hv: float, repeats_free: bool, budgets: Sequence[int] = BUDGETS) -> dict[int, BudgetStats]:
    out: dict[int, BudgetStats] = {}
    for b in budgets:
        stats = BudgetStats([], [], [], [])
        for keys in runs:
            n = len(keys)
            if repeats_free:  # the shortest prefix holding b distinct genomes
                n = next((i + 1 for i in range(len(keys)) if len(set(keys[: i + 1])) >= b), len(keys))
            seen = set(keys[:n] if repeats_free else keys[:b])
            stats.hv_ratio.append(hypervolume([surface[k] for k in seen], ref_cost) / true_hv)
            stats.front_found.append(len(seen & true_front_keys))
            stats.trials.append(n if repeats_free else b)
            stats.distinct.append(len(seen))
        out[b] = stats
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 train tasks instead of 20")
    parser.add_argument("--tasks", type=int, default=None, help="train tasks per variant (default 20, --quick 10)")
    parser.add_argument("--blind", type=int, default=0, metavar="N",
                        help="instead: the paid-budget figures on blind surfaces 0..N-1 (docs/sim-model.md)")
    args = parser.parse_args(argv)
    n_tasks = args.tasks or (10 if args.quick else 20)
    optuna.logging.set_verbosity(logging.WARNING)
    wall = time.perf_counter()
    if args.blind:
        return blind_surfaces(args.blind, n_tasks)

    surface, rows, labels, enum_s = enumerate_surface(n_tasks)
    space = labels["space"]
    ref_cost = 1.1 * max(p.cost for p in surface.values())
    true_front = front(list(surface.values()))
    true_front_keys = {k for k, p in surface.items() if p in true_front}
    true_hv = hypervolume(true_front, ref_cost)

    def describe(k: Key) -> list[Any]:
        d = dict(k)
        return [labels["models"][d["model"]], d["tool_format"], "on" if d["step.verify"] else "off",
                labels["temperatures"][d["temperature"]]]

    print(f"Enumerated surface: {len(surface)} variants x {n_tasks} BFCL train tasks, samples=1, seed 0 "
          f"({enum_s:.1f} s at time_scale 0)")
    ordered = sorted(rows, key=lambda r: (surface[r[0]].cost, -surface[r[0]].pass_rate))
    print(table(["model", "format", "verify", "T", "pass_rate", "cost/task $", "front"],
                [describe(k) + [m["pass_rate"], m["cost_per_task"], "*" if k in true_front_keys else ""] for k, m in ordered]))
    print(f"\nTrue front: {len(true_front_keys)} of {len(surface)} variants; hypervolume {true_hv:.6g} "
          f"(ref: pass_rate 0, cost {ref_cost:.5g} $/task)\n")

    baseline = {"model": 0, "temperature": 0, "tool_format": "json", "step.verify": False}
    from evoharness.search.optimise.study import make_sampler

    samplers: dict[str, Callable[[int], optuna.samplers.BaseSampler]] = {
        "nsga2": lambda s: make_sampler(population_size=POPULATION, seed=s, crossover="uniform"),
        "random": lambda s: optuna.samplers.RandomSampler(seed=s),
    }

    def results(seeds: Sequence[int], setup: Setup) -> dict[str, dict[int, BudgetStats]]:
        return {name: score_runs([run_search(mk, s, surface, space, baseline, setup, max(BUDGETS)) for s in seeds],
                                 surface, true_front_keys, ref_cost, true_hv, setup.repeats_free)
                for name, mk in samplers.items()}

    mean = statistics.fmean
    body = []
    headline: dict[str, tuple[float, float, float, float]] = {}
    for setup in SETUPS:
        res, more = results(SEEDS, setup), results(MORE_SEEDS, setup)
        for b in BUDGETS:
            n, r = res["nsga2"][b], res["random"][b]
            n30, r30 = more["nsga2"][b], more["random"][b]
            diffs = [x - y for x, y in zip(n30.hv_ratio, r30.hv_ratio)]
            wtl = f"{sum(d > 1e-12 for d in diffs)}/{sum(abs(d) <= 1e-12 for d in diffs)}/{sum(d < -1e-12 for d in diffs)}"
            spend = (f"{b} distinct ({mean(n30.trials):.0f}/{mean(r30.trials):.0f} trials)" if setup.repeats_free
                     else f"{b} trials ({mean(n30.distinct):.1f}/{mean(r30.distinct):.1f} distinct)")
            capped = sum(d < b for d in n30.distinct + r30.distinct) if setup.repeats_free else 0
            if capped:
                spend += f", {capped} runs capped at {MAX_TRIALS} trials"
            body.append([
                setup.label, spend,
                f"{100 * mean(n.hv_ratio):.1f}% ({', '.join(f'{100 * x:.0f}' for x in n.hv_ratio)})",
                f"{100 * mean(r.hv_ratio):.1f}% ({', '.join(f'{100 * x:.0f}' for x in r.hv_ratio)})",
                f"{mean(n.hv_ratio) / mean(r.hv_ratio):.2f}",
                f"{100 * mean(n30.hv_ratio):.1f}% / {100 * mean(r30.hv_ratio):.1f}%",
                f"{mean(n30.front_found):.1f} / {mean(r30.front_found):.1f}",
                wtl,
            ])
            if b == 12:
                headline[setup.label.strip()] = (mean(n.hv_ratio), mean(r.hv_ratio), mean(n30.hv_ratio), mean(r30.hv_ratio))
    print(f"Search over the same {len(surface)}-variant space (population {POPULATION}, one generation asked at a time). "
          f"HV% = found/true hypervolume; N = NSGA-II, R = random search; "
          f"seeds {SEEDS[0]}..{SEEDS[-1]} (mean and per-seed) and seeds 0..{MORE_SEEDS[-1]} (means, counts)")
    print(table(["setup", f"budget (N/R, seeds 0..{MORE_SEEDS[-1]})", "NSGA-II HV%", "random HV%", "N/R",
                 f"HV% N/R, 0..{MORE_SEEDS[-1]}", f"front pts found of {len(true_front_keys)}, N/R", "N vs R win/tie/loss"], body))
    for label, (nsga12, rand12, nsga12_30, rand12_30) in headline.items():
        unit = "distinct evaluations" if "repeats free" in label else "trials"
        print(f"\nHeadline [{label}]: NSGA-II reaches {100 * nsga12:.0f}% of the true front's hypervolume in 12 {unit} "
              f"(random search: {100 * rand12:.0f}%); over {len(MORE_SEEDS)} seeds: {100 * nsga12_30:.0f}% vs {100 * rand12_30:.0f}%.")
    paid_budgets(surface, space, baseline, true_front_keys, ref_cost, true_hv)
    print(f"Total wall time {time.perf_counter() - wall:.1f} s")
    return 0


def blind_surfaces(n: int, n_tasks: int) -> int:
    """The paid-budget figures of each sampler on blind surfaces 0..n-1 (where the verify step's
    wording may or may not be live), then each sampler's median over surfaces."""
    import json

    per: dict[str, list[float]] = {}
    for seed in range(n):
        surface, _, labels, _ = enumerate_surface(n_tasks, "blind", seed)
        ref_cost = 1.1 * max(p.cost for p in surface.values())
        true_front = front(list(surface.values()))
        keys = {k for k, p in surface.items() if p in true_front}
        baseline = {"model": 0, "temperature": 0, "tool_format": "json", "step.verify": False}
        for name, value in paid_budgets(surface, labels["space"], baseline, keys, ref_cost, hypervolume(true_front, ref_cost),
                                        label=f"blind{seed}_").items():
            per.setdefault(name, []).append(value)
    for name, values in sorted(per.items()):
        sampler, pct = name.rsplit("_", 1)
        random_values = per[f"random_{pct}"]
        met = statistics.median(values) >= statistics.median(random_values) if sampler != "random" else None
        print(json.dumps({"figure": f"hv_ratio_{name}_blind_median", "value": round(statistics.median(values), 4),
                          "target": ">= random" if sampler != "random" else None, "met": met,
                          "range": [round(min(values), 4), round(max(values), 4)], "surfaces": n}))
    return 0


def paid_budgets(surface: Mapping[Key, Point], space: Mapping[str, tuple[Any, ...]], baseline: Mapping[str, Any],
                 true_front_keys: set[Key], ref_cost: float, true_hv: float, label: str = "") -> dict[str, float]:
    """NSGA-II against random search and Optuna's TPE at equal paid budgets (distinct genomes, as
    optimise/run.py counts them) of 10 %, 25 % and 50 % of the space, 10 seeds: one JSON line per
    figure (median and range of found / true hypervolume)."""
    import json

    from evoharness.search.optimise.study import make_sampler

    setup = SETUPS[-1]
    seeds = range(10)
    budgets = {pct: max(1, round(pct * len(surface))) for pct in (0.10, 0.25, 0.50)}
    samplers: dict[str, Callable[[int], optuna.samplers.BaseSampler]] = {
        "nsga2": lambda s: make_sampler(population_size=POPULATION, seed=s, crossover="uniform"),
        "random": lambda s: optuna.samplers.RandomSampler(seed=s),
        "tpe": lambda s: optuna.samplers.TPESampler(seed=s, n_startup_trials=POPULATION),
    }
    stats = {name: score_runs([run_search(mk, s, surface, space, baseline, setup, max(budgets.values())) for s in seeds], surface,
                              true_front_keys, ref_cost, true_hv, True, budgets=tuple(budgets.values()))
             for name, mk in samplers.items()}
    medians: dict[str, float] = {}
    for pct, b in budgets.items():
        med = {name: statistics.median(st[b].hv_ratio) for name, st in stats.items()}
        medians.update({f"{name}_{round(pct * 100)}pct": m for name, m in med.items()})
        for name, st in stats.items():
            target, met = None, None
            if name == "nsga2":
                target = ">= 0.95 and >= random" if pct == 0.25 else ">= random"
                met = med["nsga2"] >= med["random"] and (pct != 0.25 or med["nsga2"] >= 0.95)
            print(json.dumps({"figure": f"hv_ratio_{label}{name}_{round(pct * 100)}pct", "value": round(med[name], 4), "target": target,
                              "met": met, "range": [round(min(st[b].hv_ratio), 4), round(max(st[b].hv_ratio), 4)],
                              "paid_budget": b, "seeds": len(seeds)}))
    b25 = budgets[0.25]
    print(f"At {b25} paid evaluations (25% of {len(surface)}): NSGA-II {statistics.median(stats['nsga2'][b25].hv_ratio):.3f}, "
          f"random {statistics.median(stats['random'][b25].hv_ratio):.3f}, TPE {statistics.median(stats['tpe'][b25].hv_ratio):.3f} "
          "of the true hypervolume (median of 10 seeds)")
    return medians


if __name__ == "__main__":
    raise SystemExit(main())

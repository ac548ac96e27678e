"""How much shared random draws flatter an offline comparison (the model card's "Draws" figure).

The simulator can key its draws by what a variant sends (the default: two prompts get
independent noise, as on a real model) or share them between variants (common random numbers).
This script evaluates one harness-only edit, sim_small + the verify step against sim_small, on
the BFCL holdout with the search's settings (samples 2, the claim's statistics at min_effect 0.03)
for several seeds (each a draw of the simulated world, SimConfig.world), in both modes, interleaved,
and prints per mode: how many seeds the claim calls a `win`, the median number of tasks on which
the two variants differ, and the median p-value.

    python bench/shared_draws.py [--quick]     # 6 seeds (~2 min); --quick 3 seeds
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

from _common import TOOL, agent_with_verify, model_config

SPLIT = "holdout"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.claim import make_claim
    from evoharness.search.evaluation.evaluate import evaluate_variant
    from evoharness.search.genome import genome_to_config, initial_pools
    from evoharness.search.genome_params import params_to_genome

    agent = agent_with_verify()
    pools = initial_pools(agent, models=("sim_small",), temperatures=(0.0,), base_model="sim_small", base_temperature=0.0)
    models = {"sim_small": model_config("sim_small")}
    workload = BfclWorkload()

    def variant(verify: bool):
        params = {"step.verify": verify, "tool_format": "json", "model": 0}
        a, t, m = genome_to_config(params_to_genome(params), pools, agent=agent, tool=TOOL, models=models)
        return compile_agent(a, tool=t, model=m)

    base, edit = variant(False), variant(True)
    seeds = range(3 if args.quick else 6)
    rows: dict[str, list[dict[str, float]]] = {"shared": [], "unshared": []}
    for seed in seeds:
        for mode in rows:  # interleaved: machine load hits both modes alike
            # at temperature 0 no request field changes a greedy answer: a replicate is another draw of
            # the simulated world (its `world` knob), which only a benchmark sets
            configure_sim(None, time_scale=0.0, shared_draws=mode == "shared", world=seed)
            a = evaluate_variant(base, workload, SPLIT, samples=2, seed=seed)
            b = evaluate_variant(edit, workload, SPLIT, samples=2, seed=seed)
            claim = make_claim(a, b, confidence=0.95, resamples=2000, min_effect=0.03, seed=seed, hashes={})
            rows[mode].append({"win": claim["verdict"] == "win", "differ": claim["discordant"], "p": claim["p_value"],
                               "effect": claim["mean_diff"]})
    configure_sim(None, shared_draws=False, world=0)
    for mode, rs in rows.items():
        wins = sum(r["win"] for r in rs)
        print(json.dumps({"figure": f"{mode}_draws_wins_of_{len(rs)}", "value": wins, "target": None, "met": None}))
        print(json.dumps({"figure": f"{mode}_draws_median_tasks_differ", "value": statistics.median(r["differ"] for r in rs),
                          "range": [min(r["differ"] for r in rs), max(r["differ"] for r in rs)], "target": None, "met": None}))
        print(json.dumps({"figure": f"{mode}_draws_median_p", "value": round(statistics.median(r["p"] for r in rs), 4),
                          "range": [round(min(r["p"] for r in rs), 4), round(max(r["p"] for r in rs), 4)], "target": None, "met": None}))
        print(json.dumps({"figure": f"{mode}_draws_median_effect", "value": round(statistics.median(r["effect"] for r in rs), 3),
                          "target": None, "met": None}))
    more = statistics.median(r["differ"] for r in rows["unshared"]) > statistics.median(r["differ"] for r in rows["shared"])
    print(json.dumps({"figure": "unshared_more_discordant", "value": more, "target": True, "met": more}))
    print(f"small + verify vs small on {SPLIT}: wins {sum(r['win'] for r in rows['shared'])}/{len(seeds)} shared, "
          f"{sum(r['win'] for r in rows['unshared'])}/{len(seeds)} unshared")
    return 0


if __name__ == "__main__":
    sys.exit(main())

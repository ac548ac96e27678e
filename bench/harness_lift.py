"""How much of the reachable harness lift the default search finds for a cheap model, and who
authored it.

Runs the default search with sim_small as the incumbent and the only model (so every gain is a
harness edit), under ``criteria=quality_first`` (the best harness, not the cheapest), then
evaluates on dev, interleaved over seeds:

* base: the base harness;
* found: the search's champion;
* ablated: the champion without its mutator-authored entries (sections, tool edits, and the steps
  and tool lists a mutator made, back to the baseline; the format, the base config's own steps and
  a pooled temperature stay);
* oracle: a harness built from the simulator's model card (docs/sim-model.md): a rule line naming
  the tool and the argument for every tool/argument pair that failed on train under the base
  harness, an example per tool, a verify step (the card's verify-type step). Only the card is
  read, never the simulator.

Figures: lift ratio = (found - base) / (oracle - base), target >= 0.8; mutator share of the found
lift = (found - ablated) / (found - base), target >= 0.5.

    python bench/harness_lift.py [--seeds N] [overrides...]     # ~6 min
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, TOOL, agent_with_verify, base_agent, model_config

CATEGORIES = ["multi_turn_base", "multi_turn_miss_param", "multi_turn_long_context"]


def figure(name: str, value: object, target: object, met: object, **extra: object) -> None:
    print(json.dumps({"figure": name, "value": value, "target": target, "met": met, **extra}), flush=True)


def oracle_tool(workload: Any, agent: dict[str, Any]) -> dict[str, Any]:
    """Tool overrides from the model card: a rule naming tool and argument (RULE_ARG) for each pair
    that failed on train under the base harness, and an example line per tool (EX)."""
    from evoharness.compiler.variant import compile_agent
    from evoharness.search.evaluation.evaluate import evaluate_variant

    base = compile_agent(agent, tool=TOOL, model=model_config("sim_small"))
    report = evaluate_variant(base, workload, "train", samples=1, seed=0)
    pairs: dict[str, set[str]] = {}
    for e in report.episodes:
        for f in e.failures:
            if f.get("tool") and f.get("argument"):
                pairs.setdefault(str(f["tool"]), set()).add(str(f["argument"]))
    tools = {c.name for t in workload.tasks("train") for turn in t.gold for c in turn}
    overrides = {t: {"rules": [f"When calling `{t}`, copy `{a}` exactly from the request or the tool result it comes from."
                               for a in sorted(pairs.get(t, ()))],
                     "examples": [f"call `{t}` with the exact values the request or an earlier result gives."]}
                 for t in sorted(tools)}
    return {**TOOL, "overrides": overrides}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args, overrides = parser.parse_known_args(argv)
    runs = Path(tempfile.mkdtemp(prefix="harness-lift-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "evoharness.search", f"runs_dir={runs}", "model=sim_small", "search.models=[]", "criteria=quality_first",
           "search.study=lift", *overrides]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(f"search failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
        return 0
    study = runs / "lift"
    summary = json.loads((study / "summary.json").read_text(encoding="utf-8"))
    last = max(study.glob("pools/r*.json"), key=lambda p: int(p.stem[1:]))

    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant
    from evoharness.search.genome import Genome, Pools, authors, genome_to_config
    from evoharness.search.optimise.ablation import layers

    configure_sim(None, time_scale=0.0)  # quality does not depend on the simulated latency
    workload = BfclWorkload(categories=CATEGORIES)
    agent = base_agent()
    pools = Pools.from_dict(json.loads(last.read_text(encoding="utf-8"))["pools"])
    models = {"base": model_config("sim_small")}
    found_g = Genome.from_dict(summary["champion"]["genome"])
    # without every mutator-authored entry (sections, tool edits, the steps and tool lists a mutator
    # made): the search's own ablation layers, whose last non-mutator layer is what the base config gave
    base_steps = {str(st["name"]): bool(st.get("enabled", True)) for st in agent["workflow"] if st.get("optional")}
    peeled = [g for name, g in layers(found_g, pools, base_format=str(agent["tool_format"]), base_steps=base_steps)
              if name != "mutator edits"]
    ablated_g = peeled[-1] if peeled else Genome()

    def compiled(genome: Genome) -> Any:
        a, t, m = genome_to_config(genome, pools, agent=agent, tool=TOOL, models=models)
        return compile_agent(a, tool=t, model=m)

    oracle_agent = agent_with_verify()
    for step in oracle_agent["workflow"]:
        if step["name"] == "verify":
            step["enabled"] = True
    variants = {"base": compiled(Genome()), "found": compiled(found_g), "ablated": compiled(ablated_g),
                "oracle": compile_agent(oracle_agent, tool=oracle_tool(workload, agent), model=model_config("sim_small"))}
    quality: dict[str, list[float]] = {k: [] for k in variants}
    from evoharness.compiler.sim import configure_sim

    for seed in range(args.seeds):
        # at temperature 0 no request field changes a greedy answer: a replicate is another draw of the
        # simulated world (its `world` knob), which only a benchmark sets
        configure_sim(None, world=seed)
        for name, v in variants.items():  # interleaved per seed
            quality[name].append(evaluate_variant(v, workload, "dev", samples=1, seed=seed).metrics["pass_rate"])
    configure_sim(None, world=0)
    mean = {k: statistics.fmean(v) for k, v in quality.items()}
    lift = (mean["found"] - mean["base"]) / (mean["oracle"] - mean["base"]) if mean["oracle"] > mean["base"] else float("nan")
    share = (mean["found"] - mean["ablated"]) / (mean["found"] - mean["base"]) if mean["found"] > mean["base"] else 0.0
    for name, values in quality.items():
        figure(f"dev_pass_rate_{name}", round(mean[name], 3), None, None, per_seed=[round(x, 3) for x in values])
    figure("harness_lift_ratio", round(lift, 3), ">= 0.8", lift >= 0.8)
    figure("mutator_share_of_lift", round(share, 3), ">= 0.5", share >= 0.5,
           authors=list(authors(found_g, pools, [s["name"] for s in agent["workflow"]])), changes=summary["champion"].get("changes"))
    figure("search_wall_s", round(seconds, 1), None, None)
    print(f"sim_small dev pass rate: base {mean['base']:.3f}, found {mean['found']:.3f} (without its mutator edits "
          f"{mean['ablated']:.3f}), oracle {mean['oracle']:.3f}; lift ratio {lift:.2f}, mutator share {share:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""False wins on a null: how often does the whole search claim an improvement that is not there?

A null model (litellm provider ``null/coin``: bench/null_provider.py, loaded as the plugin
``plugins=[null_provider]`` so the search's workers have it too) passes or fails each episode by a
coin whose bias depends on the task only: every harness has exactly the same expected quality.
Each episode's coin is drawn from (task, seed, sample, what the variant sends: system prompt,
tools, temperature), so two variants get independent noise, as two prompts do on a real model. On
a pass it replays the task's reference calls (in the tool format the harness asked for), on a fail
it answers without calling a tool.

1. **Through the search.** The default main job (BFCL, the default budget, rounds and mutators)
   with ``model.route=null/coin``, ``search.models=[]`` (no model to swap to) and
   ``criteria.decision=best_quality`` (a superiority claim: on the null, "cheaper and as good" can
   be true, "better" cannot), for 10 seeds, two at a time. Target: at most 1 ``win`` in 10.
2. **The statistic alone.** Monte-Carlo: paired null data of the holdout's shape (324 tasks in 81 scenarios of 4, 2
   samples, per-task pass rates spread over [0.2, 0.8], champion and baseline independent), the
   claim's test at its defaults. Target: false-win rate within [0, 0.03] (nominal 0.025).

    python bench/null_claims.py [--quick]      # 10 seeds + 2000 draws (~25 min); --quick 3 seeds + 400
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import ROOT
from null_provider import ROUTE  # the null model, a plugin: the search's workers import it too

PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")]))}


def search_command(seed: int, runs_dir: str) -> list[str]:
    # each seed is an independent null world: a registry of its own, so its claim is not a later look at
    # the holdout the other seeds' searches already claimed on
    return [sys.executable, "-m", "evoharness", "search", "plugins=[null_provider]", f"runs_dir={runs_dir}",
            f"search.study=null{seed}", f"search.seed={seed}", f"seed={seed}", f"registry_dir={runs_dir}/registry-null{seed}",
            f"model.route={ROUTE}", "search.models=[]", "criteria.decision=best_quality"]


# -- the statistic alone ---------------------------------------------------------------------

def monte_carlo(draws: int, *, tasks: int = 324, samples: int = 2, min_effect: float = 0.03) -> float:
    import numpy as np

    from evoharness.search.evaluation.stats import quality_test, superiority_verdict

    rng = np.random.default_rng(0)
    p = 0.2 + 0.6 * rng.random(tasks)
    wins = 0
    for _ in range(draws):
        a = rng.binomial(samples, p) / samples
        b = rng.binomial(samples, p) / samples
        result = quality_test(a, b, null=min_effect, clusters=[str(t // 4) for t in range(tasks)], confidence=0.95)
        wins += superiority_verdict(result, min_effect=min_effect) == "win"
    return wins / draws


def figure(name: str, value: Any, target: str, met: bool, **extra: Any) -> None:
    print(json.dumps({"figure": name, "value": value, "target": target, "met": met, **extra}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    seeds = range(3 if args.quick else 10)
    base = Path(tempfile.mkdtemp(prefix="null-claims-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **PLUGIN_ENV}

    def run(seed: int) -> tuple[int, dict[str, Any] | None, float]:
        start = time.perf_counter()
        proc = subprocess.run(search_command(seed, str(base)), cwd=ROOT, env=env, capture_output=True, text=True)
        claim_path = base / f"null{seed}" / "claim.json"
        if proc.returncode != 0 or not claim_path.exists():
            print(f"seed {seed} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return seed, None, time.perf_counter() - start
        return seed, json.loads(claim_path.read_text()), time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=2) as pool:  # two searches at a time: the machine has 2 cores
        results = list(pool.map(run, seeds))
    claims = [c for _, c, _ in results if c is not None]
    verdicts = [c["verdict"] for c in claims]
    wins = verdicts.count("win")
    figure("null_search_wins", wins, f"<= 1 of {len(seeds)}", wins <= 1 and len(claims) == len(seeds),
           seeds=len(seeds), completed=len(claims), verdicts={v: verdicts.count(v) for v in sorted(set(verdicts))},
           median_diff=round(statistics.median(c["mean_diff"] for c in claims), 3) if claims else None,
           minutes_per_search=round(statistics.median(t for *_, t in results) / 60, 1))
    draws = 400 if args.quick else 2000
    rate = monte_carlo(draws)
    figure("null_statistic_false_win_rate", rate, "within [0, 0.03]", 0.0 <= rate <= 0.03, draws=draws)
    # at min_effect 0 the test's own size shows: it should sit near the nominal one-sided 0.025
    calibration = monte_carlo(draws, min_effect=0.0)
    figure("null_statistic_false_win_rate_min_effect_0", calibration, "near 0.025 (nominal)", 0.01 <= calibration <= 0.04,
           draws=draws)
    print(f"null: {wins} win(s) in {len(claims)} searches; the statistic's false-win rate {rate:.4f} over {draws} draws")
    return 0


if __name__ == "__main__":
    sys.exit(main())

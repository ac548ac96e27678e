"""How often the holdout claim's statistics call a false non-inferiority or a false saving, at the
small holdouts the product accepts and on clustered tasks (the yardstick the claim must meet).

Monte-Carlo on the claim's own functions (``paired_test`` and ``noninferiority_verdict``), one
sample per task, 95% confidence (one-sided alpha 0.025, the nominal rate of every figure here):

1. **Quality.** Baseline passes each task with a probability spread over [0.5, 0.9]; the champion
   is truly worse by 0.08 (beyond the 0.05 margin), so "non-inferior" is false. ``independent``:
   tasks independent. ``clustered``: tasks come in scenarios of 4 whose difference shares a
   scenario effect (within-scenario correlation of the paired differences ~0.3).
2. **Saving** (the cost or latency side of a non-inferiority win). No true saving: both arms'
   per-task values come from the same distribution, with a scenario effect on the difference in
   the clustered case.

A figure is met when the binomial 95% interval of its rate reaches down to 0.025.

    python bench/claim_error_rates.py [--reps 1000] [--resamples 1000]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import figure  # noqa: E402
from evoharness.search.evaluation.stats import MIN_DISCORDANT, noninferiority_verdict, paired_test  # noqa: E402

ALPHA, MARGIN, WORSE, SCENARIO = 0.025, 0.05, 0.08, 4


def _scenarios(n: int) -> np.ndarray:
    return np.arange(n) // SCENARIO


def quality_pair(rng: np.random.Generator, n: int, clustered: bool) -> tuple[np.ndarray, np.ndarray]:
    base = rng.uniform(0.5, 0.9, n)
    shift = rng.normal(0.0, 0.25, _scenarios(n).max() + 1)[_scenarios(n)] if clustered else 0.0
    champ = np.clip(base - WORSE + shift, 0.0, 1.0)
    return (rng.random(n) < base).astype(float), (rng.random(n) < champ).astype(float)


def saving_pair(rng: np.random.Generator, n: int, clustered: bool) -> tuple[np.ndarray, np.ndarray]:
    task = rng.gamma(2.0, 0.5, n)
    arm_effect = (lambda: rng.normal(0.0, 0.3, _scenarios(n).max() + 1)[_scenarios(n)]) if clustered else (lambda: 0.0)
    return task + arm_effect() + rng.gamma(2.0, 0.2, n), task + arm_effect() + rng.gamma(2.0, 0.2, n)


def false_noninferior(rng: np.random.Generator, n: int, clustered: bool, resamples: int, seed: int) -> bool:
    a, b = quality_pair(rng, n, clustered)
    quality = paired_test(a, b, shift=-MARGIN, resamples=resamples, confidence=0.95, seed=seed)
    return quality.n >= 2 and quality.p_value < ALPHA and quality.low > -MARGIN


def false_saving(rng: np.random.Generator, n: int, clustered: bool, resamples: int, seed: int) -> bool:
    a, b = saving_pair(rng, n, clustered)
    saving = paired_test(b, a, shift=0.0, resamples=resamples, confidence=0.95, seed=seed)  # baseline - champion
    return saving.n >= 2 and saving.p_value < ALPHA and saving.low > 0 and saving.discordant >= MIN_DISCORDANT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    _ = noninferiority_verdict  # the figures reproduce its two conditions one side at a time
    for side, draw in (("noninferior", false_noninferior), ("saving", false_saving)):
        for n in (6, 10, 20, 41):
            for clustered in (False, True):
                rng = np.random.default_rng(1000 * n + clustered)
                hits = sum(draw(rng, n, clustered, args.resamples, seed) for seed in range(args.reps))
                ci = binomtest(hits, args.reps).proportion_ci(confidence_level=0.95)
                figure(f"false_{side}_rate_n{n}_{'clustered' if clustered else 'independent'}", round(hits / args.reps, 4), ALPHA,
                       bool(ci.low <= ALPHA), ci=[round(ci.low, 4), round(ci.high, 4)], reps=args.reps)


if __name__ == "__main__":
    main()

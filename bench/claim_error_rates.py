"""The Monte-Carlo size of the holdout claim's statistics: how often a non-inferiority claim, or a
saving, is called when it is false, at every holdout size and with clustered tasks.

Monte-Carlo on the claim's own functions (``quality_test``, ``saving_test``), 95% confidence
(one-sided alpha 0.025, the nominal rate of every figure here). The champion is worse by exactly the
0.05 margin (the null's boundary, where a valid test's false rate is highest):

1. **Quality, ``trinomial``.** One sample per task; the paired difference is -1, 0 or +1 with
   P(+1) = ``gain`` in {0, 0.05, 0.15} and P(-1) = gain + 0.05. ``gain`` 0 is the hardest case: a
   model that loses 5% of tasks and gains none ties everywhere else.
2. **Quality, ``pass_rate``.** Two samples per task; the baseline passes task i with p_i in
   [0.3, 0.9], the champion with p_i - 0.05.
3. **Clusters.** Tasks in scenarios of 4 with intra-cluster correlation ``icc`` of the paired
   differences (0, 0.1, 0.3): a task copies its scenario's draw with probability sqrt(icc). The
   claim uses scenarios as the unit, as it does for BFCL.
4. **Saving** (the cost or latency side). No true saving: both arms' per-task values come from the
   same distribution; clustered: a scenario effect on the difference.

Sizes are the holdout's units (tasks, or scenarios of 4). A size below ``clusters_needed(0.05)``
is refused by the product before any paid work (``accepted: false``; its figure is the rate under
the explicit override). A figure is met when the rate is at most 0.03 or the size is refused.

    python bench/claim_error_rates.py [--reps 4000]
"""
from __future__ import annotations

import argparse
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import figure  # noqa: E402

from evoharness.search.evaluation.stats import MIN_DISCORDANT, clusters_needed, quality_test, saving_test  # noqa: E402

ALPHA, MARGIN, TARGET, SCENARIO = 0.025, 0.05, 0.03, 4
Draw = Callable[[np.random.Generator, int, float], tuple[np.ndarray, np.ndarray]]


def _copy(rng: np.random.Generator, units: int, icc: float, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """Per task, its scenario's draw with probability sqrt(icc), else its own (the marginal is kept)."""
    own, shared = draw(units * SCENARIO), np.repeat(draw(units), SCENARIO)
    return np.where(rng.random(units * SCENARIO) < np.sqrt(icc), shared, own)


def trinomial(gain: float) -> Draw:
    def draw(rng: np.random.Generator, units: int, icc: float) -> tuple[np.ndarray, np.ndarray]:
        cells = lambda m: rng.choice([1.0, -1.0, 0.0], size=m, p=[gain, gain + MARGIN, 1 - 2 * gain - MARGIN])  # noqa: E731
        diff = _copy(rng, units, icc, cells) if icc >= 0 else cells(units)
        return np.zeros(diff.size), diff  # only the difference matters to the test
    return draw


def right_skew(rng: np.random.Generator, units: int, icc: float) -> tuple[np.ndarray, np.ndarray]:
    """Many small losses and a few large gains (continuous scores): -0.1, or +0.96 with the
    probability that puts the mean at -0.05. The score statistic alone runs liberal here."""
    q = (0.1 - MARGIN) / 1.06
    cells = lambda m: np.where(rng.random(m) < q, 0.96, -0.1)  # noqa: E731
    diff = _copy(rng, units, icc, cells) if icc >= 0 else cells(units)
    return np.zeros(diff.size), diff


def pass_rate(rng: np.random.Generator, units: int, icc: float) -> tuple[np.ndarray, np.ndarray]:
    if icc < 0:
        p = rng.uniform(0.3, 0.9, units)
        return (rng.random((2, units)) < p).mean(axis=0), (rng.random((2, units)) < p - MARGIN).mean(axis=0)
    p = np.repeat(rng.uniform(0.3, 0.9, units), SCENARIO)  # a scenario's tasks share a difficulty

    def u() -> np.ndarray:  # one sample's uniforms, shared by the scenario with probability sqrt(icc)
        return _copy(rng, units, icc, lambda m: rng.random(m))

    return np.mean([u() < p, u() < p], axis=0), np.mean([u() < p - MARGIN, u() < p - MARGIN], axis=0)


def _arm_effect(rng: np.random.Generator, units: int, clustered: bool) -> np.ndarray | float:
    """A scenario's shared effect on one arm (clustered), else none."""
    return np.repeat(rng.normal(0.0, 0.3, units), SCENARIO) if clustered else 0.0


def clusters_of(n: int, clustered: bool) -> list[str] | None:
    return [str(i // SCENARIO) for i in range(n)] if clustered else None


def rate(hits: int, reps: int) -> tuple[float, list[float]]:
    ci = binomtest(hits, reps).proportion_ci(confidence_level=0.95)
    return round(hits / reps, 4), [round(ci.low, 4), round(ci.high, 4)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    args = parser.parse_args()
    needed = clusters_needed(MARGIN)
    families: dict[str, Draw] = {"trinomial_gain0": trinomial(0.0), "trinomial_gain0.05": trinomial(0.05),
                                 "trinomial_gain0.15": trinomial(0.15), "right_skew": right_skew, "pass_rate": pass_rate}
    # (units, icc): icc -1 is tasks without clusters; else scenarios of 4, the scenario the unit
    designs = [(6, -1.0), (10, -1.0), (20, -1.0), (40, -1.0), (73, -1.0), (164, -1.0), (320, -1.0),
               *[(k, icc) for k in (41, 80) for icc in (0.0, 0.1, 0.3)]]
    worst = 0.0
    for name, draw in families.items():
        for units, icc in designs:
            rng = np.random.default_rng(zlib.crc32(f"{name}/{units}/{icc}".encode()))
            hits = 0
            for _ in range(args.reps):
                a, b = draw(rng, units, icc)
                t = quality_test(a, b, null=-MARGIN, clusters=clusters_of(a.size, icc >= 0))
                hits += t.p_value < ALPHA and t.low > -MARGIN
            value, ci = rate(hits, args.reps)
            accepted = units >= needed
            worst = max(worst, value) if accepted else worst
            design = f"{units}_scenarios_icc{icc:g}" if icc >= 0 else f"{units}_tasks"
            figure(f"noninferior_size_{name}_{design}", value, TARGET, bool(value <= TARGET or not accepted), ci=ci,
                   accepted=accepted, reps=args.reps)
    figure("noninferior_size_worst_accepted", worst, TARGET, worst <= TARGET, clusters_needed=needed)
    for units, clustered in ((6, False), (20, False), (41, True), (80, True)):
        rng = np.random.default_rng(units)
        hits = 0
        for seed in range(args.reps // 4):  # the permutation test and bootstrap are the slow part
            n = units * SCENARIO if clustered else units
            task = rng.gamma(2.0, 0.5, n)
            a, b = (task + _arm_effect(rng, units, clustered) + rng.gamma(2.0, 0.2, n) for _ in range(2))
            s = saving_test(b, a, clusters=clusters_of(n, clustered), resamples=1000, seed=seed)
            hits += s.p_value < ALPHA and s.low > 0 and s.discordant >= MIN_DISCORDANT
        value, ci = rate(hits, args.reps // 4)
        figure(f"false_saving_rate_{units}_{'scenarios' if clustered else 'tasks'}", value, TARGET, value <= TARGET, ci=ci,
               reps=args.reps // 4)


if __name__ == "__main__":
    main()

"""The claim statistics, on paired differences (champion minus baseline, same tasks), with the
cluster as the unit of evidence: tasks that share a cluster (BFCL's four variants of a scenario)
are not independent, so each cluster counts once, as the mean of its tasks' differences (samples of
a task are averaged before). When every task is its own cluster this is the per-task analysis.

Quality (bounded, tie-heavy, often binary): a **score test with the variance restricted to the
null**, inverted for the interval. The shifted sign-flip test it replaces read a tied task as a
``+margin`` observation, so "all tied" was strong evidence at any size; a Wald or bootstrap
interval has the same flaw (no spread, no width). Here the variance is the one of the most likely
distribution whose mean is the null value (empirical likelihood over the observed cluster values,
with the worst score, -1, added to the support at zero count). For independent binary tasks this is
Tango's score test for paired proportions; for all-tied data it gives the exact answer's shape:
``n`` tied clusters reject "worse by delta" only when ``n > z^2 (1 - delta) / delta`` (73 at a 0.05
margin), since a model worse by delta through a few bad clusters ties on all of them with
probability ``(1 - delta)^n``. The score statistic alone runs liberal on right-skewed differences
(many small losses, a few large gains: 0.046 at BFCL's shape), where the signed root of the
empirical likelihood ratio over the same support holds, and the reverse on symmetric ties: a
rejection needs both. Decision and interval are the same test, so they cannot disagree.

Savings (cost, latency: unbounded, not tie-heavy): an exact or Monte-Carlo sign-flip permutation
test of the cluster values and a one-sample t-test of their mean, both needed (the sign-flip test
alone tests symmetry, and a skewed cost difference with mean 0 passes it), with a BCa interval, all
from scipy.stats. ``n`` equal positive differences have the exact sign-flip p ``2^-n``. No test of
an unbounded mean survives a rare enough overspend (a cheaper model that runs away in 2% of
clusters): the holdout has to contain it.

A sparse difference is weak evidence however large its mean: a ``win`` also needs at least
``MIN_DISCORDANT`` tasks that differ.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, stats

ClaimVerdict = Literal["win", "no_win", "inconclusive", "equivalent"]
MIN_DISCORDANT = 5  # tasks whose scores differ; below it no verdict is a win
_LOWEST = -1.0  # the worst paired difference of a score in [0, 1]


@dataclass(frozen=True)
class PairedTest:
    mean_diff: float  # mean of (b - a) over clusters (over tasks when each task is its own cluster)
    low: float  # confidence interval of the mean difference
    high: float
    p_value: float  # one-sided test of H0: mean difference <= ``shift``
    n: int  # paired tasks
    discordant: int  # tasks whose difference is not 0
    confidence: float
    resamples: int
    shift: float  # the null's value: min_effect for superiority, -margin for non-inferiority, 0 for a saving
    clusters: int = 0  # units of evidence (== n when every task is its own cluster)
    design_effect: float = 1.0  # variance of the mean with clusters as the unit over that with tasks as the unit
    method: str = ""

    @property
    def unit(self) -> str:
        return "task" if self.clusters == self.n else "cluster"


def _paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-d and paired by task; got shapes {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError("no paired tasks: a and b are empty; evaluate both on the same split")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite; drop skipped tasks before pairing")
    return y - x


def cluster_values(diff: np.ndarray, clusters: Sequence[str] | None) -> tuple[np.ndarray, float]:
    """Each cluster's total difference over the mean cluster size (its mean difference when the
    clusters are equal; in first-seen order) and the design effect: the variance of
    the overall mean with clusters as the unit over its variance with tasks as the unit (1.0 when
    every task is its own cluster or the tasks do not vary)."""
    if clusters is None:
        return diff, 1.0
    if len(clusters) != diff.size:
        raise ValueError(f"clusters names {len(clusters)} tasks, the differences {diff.size}; pass one cluster per paired task")
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(str(c), len(index)) for c in clusters])
    k, n = len(index), diff.size
    totals, sizes = np.bincount(codes, weights=diff, minlength=k), np.bincount(codes, minlength=k)
    # a cluster's total over the mean cluster size: their mean is the per-task mean difference the margin
    # is about, however unequal the clusters (a cluster's plain mean would let one big cluster count once)
    means = totals / (n / k)
    if k == n or k < 2:
        return means, 1.0
    mean = diff.mean()
    var_tasks = float(diff.var(ddof=1)) / n
    var_clusters = k / (k - 1) * float(np.sum((totals - sizes * mean) ** 2)) / n ** 2
    return means, (var_clusters / var_tasks if var_tasks > 0 else 1.0)


def _restricted_fit(values: np.ndarray, null: float) -> tuple[np.ndarray, float]:
    """The most likely distribution with mean ``null`` (below the observed mean) over the observed
    values plus the worst score at zero count: each observation's weight, and the worst point's
    mass. Empirical likelihood whose weights, when the worst point carries mass, have the closed
    form w_i = (null - lo) / (K (v_i - lo))."""
    lo = _LOWEST
    inv = 1.0 / np.maximum(values - lo, 1e-300)
    extra = 1.0 - (null - lo) * float(inv.mean())
    if extra > 0:
        return (null - lo) * inv / values.size, extra
    # the observed values reach below the null: ordinary empirical likelihood on them alone
    d = values - null
    lam_lo, lam_hi = -1.0 / d.max() + 1e-12, -1.0 / d.min() - 1e-12

    def moment(lam: float) -> float:
        return float(np.sum(d / (1.0 + lam * d)))

    with np.errstate(divide="ignore"):
        lam = optimize.brentq(moment, lam_lo, lam_hi, xtol=1e-14) if moment(lam_lo) * moment(lam_hi) < 0 else 0.0
    w = 1.0 / (values.size * (1.0 + lam * d))
    return w / np.sum(w), 0.0


def score_z(values: np.ndarray, null: float) -> float:
    """The statistic of H0: mean <= ``null`` for cluster values in [-1, 1] (large: evidence against):
    the smaller of the score statistic with the null-restricted variance and the signed root of the
    empirical likelihood ratio, both from one restricted fit."""
    mean = float(values.mean())
    if mean == null:
        return 0.0
    # above the null the worst point is -1; below it, mirror the data so the worst point is +1
    v, n0 = (values, null) if mean > null else (-values, -null)
    w, extra = _restricted_fit(v, n0)
    var = float(np.sum(w * (v - n0) ** 2)) + extra * (_LOWEST - n0) ** 2
    score = (float(v.mean()) - n0) / math.sqrt(var / values.size) if var > 0 else math.inf
    ratio = math.sqrt(max(0.0, -2.0 * float(np.sum(np.log(np.maximum(values.size * w, 1e-300))))))
    # the score statistic runs liberal when a few large gains sit among many small losses (skew), the
    # likelihood ratio's root does not, and vice versa on symmetric ties: evidence needs both
    return min(score, ratio) if mean > null else -max(score, ratio)


def _bound(values: np.ndarray, z: float, *, upper: bool) -> float:
    """The value where the score statistic equals ``z``: the interval's end on that side."""
    mean = float(values.mean())
    v, m = (-values, -mean) if upper else (values, mean)
    if m <= _LOWEST:
        end = _LOWEST
    else:
        f = lambda mu: score_z(v, mu) - z  # noqa: E731  (decreasing in mu: from +inf at -1 to -z at the mean)
        end = optimize.brentq(f, _LOWEST + 1e-12, m, xtol=1e-10) if f(_LOWEST + 1e-12) > 0 else _LOWEST
    return -end if upper else end


def quality_test(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, null: float, clusters: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> PairedTest:
    """Test mean(b - a) > ``null`` for scores in [0, 1] (wider ones scaled by their largest
    difference), clusters as the unit, and interval it (two-sided at ``confidence``; the one-sided
    test has alpha = (1 - confidence) / 2)."""
    _check_confidence(confidence)
    diff = _paired(a, b)
    values, deff = cluster_values(diff, clusters)
    # a named sub-score need not lie in [0, 1], nor a large cluster's weighted value in [-1, 1]: the worst
    # difference is then the largest one observed
    scale = max(1.0, float(np.abs(values).max()))
    values = values / scale
    z = float(stats.norm.ppf(1.0 - (1.0 - confidence) / 2))
    p = float(stats.norm.sf(score_z(values, null / scale))) if abs(null) < scale else (0.0 if null <= -scale else 1.0)
    return PairedTest(mean_diff=float(values.mean()) * scale, low=_bound(values, z, upper=False) * scale,
                      high=_bound(values, z, upper=True) * scale, p_value=p, n=int(diff.size),
                      discordant=int(np.count_nonzero(diff)), confidence=confidence, resamples=0,
                      shift=null, clusters=int(values.size), design_effect=deff, method="score")


def saving_test(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, clusters: Sequence[str] | None = None,
    resamples: int = 10_000, confidence: float = 0.95, seed: int = 0,
) -> PairedTest:
    """Test mean(b - a) > 0 (a sign-flip permutation test of the cluster values, exact when
    2^clusters <= ``resamples``, and a t-test of their mean: the larger p) and interval it (BCa
    bootstrap of the cluster values). Deterministic for a given ``seed``."""
    if resamples < 100:
        raise ValueError(f"resamples={resamples} must be >= 100 (10000 is the usual choice)")
    _check_confidence(confidence)
    diff = _paired(a, b)
    values, deff = cluster_values(diff, clusters)
    k, mean = int(values.size), float(values.mean())
    rng = np.random.default_rng(seed)
    if np.all(values == 0):
        p = 1.0
    else:
        # equal positive values: every other sign pattern has a lower mean, so p = 2^-k exactly
        p = float(stats.permutation_test((values,), np.mean, permutation_type="samples", alternative="greater",
                                         n_resamples=resamples, vectorized=True, random_state=rng).pvalue)
        if k >= 2 and np.ptp(values) > 0:  # the mean, not only the symmetry (a t-test of equal values is undefined)
            p = max(p, float(stats.ttest_1samp(values, 0.0, alternative="greater").pvalue))
    if k < 2 or np.all(values == values[0]):
        low = high = mean  # no resample can move the mean (and BCa is undefined)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa warns on heavily tied data; its interval is still returned
            ci = stats.bootstrap((values,), np.mean, method="BCa", confidence_level=confidence, n_resamples=resamples,
                                 vectorized=True, random_state=rng).confidence_interval
        low, high = float(ci.low), float(ci.high)
        if not (np.isfinite(low) and np.isfinite(high)):  # degenerate jackknife: fall back to the percentile interval
            ci = stats.bootstrap((values,), np.mean, method="percentile", confidence_level=confidence, n_resamples=resamples,
                                 vectorized=True, random_state=rng).confidence_interval
            low, high = float(ci.low), float(ci.high)
    return PairedTest(mean_diff=mean, low=low, high=high, p_value=p, n=int(diff.size), discordant=int(np.count_nonzero(diff)),
                      confidence=confidence, resamples=resamples, shift=0.0, clusters=k, design_effect=deff, method="sign-flip")


def _check_confidence(confidence: float) -> None:
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence={confidence} must be in [0.5, 1), e.g. 0.95")


def reach(clusters: int, *, confidence: float = 0.95) -> float:
    """The smallest distance below the observed mean the quality interval's low end can be with
    ``clusters`` units: its value when every cluster ties, z^2 / (K + z^2). A non-inferiority
    margin at or below it cannot be shown however the candidate scores, short of beating the reference."""
    z = float(stats.norm.ppf(1.0 - (1.0 - confidence) / 2))
    return z * z / (clusters + z * z) if clusters > 0 else 1.0


def clusters_needed(margin: float, *, confidence: float = 0.95) -> int:
    """The fewest clusters whose reach is below ``margin``."""
    if not 0 < margin < 1:
        raise ValueError(f"margin={margin} must be in (0, 1)")
    z = float(stats.norm.ppf(1.0 - (1.0 - confidence) / 2))
    return math.floor(z * z * (1.0 - margin) / margin) + 1


def superiority_verdict(result: PairedTest, *, min_effect: float) -> ClaimVerdict:
    """``win`` only when the challenger is better by more than ``min_effect``: the one-sided test
    rejects at alpha = (1 - confidence) / 2, the interval clears ``min_effect`` and at least
    MIN_DISCORDANT tasks differ. ``no_win``: the interval is at or below ``min_effect``.
    ``equivalent``: the interval lies inside ±``min_effect`` (a tight null). Else ``inconclusive``."""
    if min_effect < 0:
        raise ValueError(f"min_effect={min_effect} must be >= 0; a negative threshold would call a loss a win")
    alpha = (1.0 - result.confidence) / 2
    if result.n >= 2 and result.p_value < alpha and result.low > min_effect and result.discordant >= MIN_DISCORDANT:
        return "win"
    if min_effect > 0 and -min_effect <= result.low and result.high <= min_effect:
        return "equivalent"
    if result.n >= 2 and result.high <= min_effect:
        return "no_win"
    return "inconclusive"


def noninferiority_verdict(quality: PairedTest, saving: PairedTest, *, margin: float) -> ClaimVerdict:
    """For a non-inferiority rule: ``win`` when quality is non-inferior (the one-sided test of
    mean difference > -``margin`` rejects, and the interval's low end is above -``margin``) AND the
    per-task saving is positive by the same standard, with at least MIN_DISCORDANT tasks whose
    cost (latency) differs. ``no_win`` when quality is shown inferior (interval below -``margin``) or the
    saving is shown absent (interval at or below 0). Else ``inconclusive``."""
    alpha = (1.0 - quality.confidence) / 2
    noninferior = quality.p_value < alpha and quality.low > -margin
    cheaper = saving.n >= 2 and saving.p_value < alpha and saving.low > 0 and saving.discordant >= MIN_DISCORDANT
    if noninferior and cheaper:
        return "win"
    if quality.high < -margin or saving.high <= 0:
        return "no_win"
    return "inconclusive"

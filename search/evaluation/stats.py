"""The claim statistics, on per-task paired differences (champion minus baseline, same tasks):
an exact or Monte-Carlo sign-flip permutation test for the p-value and a BCa bootstrap for the
interval, both from scipy.stats. The task is the unit of evidence: task-to-task variance cancels
in the pairing, and samples of one task are averaged before.

A sparse difference is weak evidence however large its mean: 4 tasks better and 36 tied give a
sign-flip p of 1/16. So a ``win`` also needs at least ``MIN_DISCORDANT`` tasks that differ.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

ClaimVerdict = Literal["win", "no_win", "inconclusive", "equivalent"]
MIN_DISCORDANT = 5  # tasks whose scores differ; below it no verdict is a win


@dataclass(frozen=True)
class PairedTest:
    mean_diff: float  # observed mean of (b - a) over paired tasks
    low: float  # BCa confidence interval of the mean difference
    high: float
    p_value: float  # one-sided sign-flip test of H0: differences symmetric about ``shift``
    n: int  # paired tasks
    discordant: int  # tasks whose difference is not 0
    confidence: float
    resamples: int
    shift: float  # the null's centre: min_effect for superiority, -margin for non-inferiority


def _paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-d and paired by task; got shapes {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError("no paired tasks: a and b are empty; evaluate both on the same split")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite; drop skipped tasks before pairing")
    return y - x


def paired_test(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, shift: float = 0.0, resamples: int = 10_000,
    confidence: float = 0.95, seed: int = 0,
) -> PairedTest:
    """Test mean(b - a) > ``shift`` and interval it. Deterministic for a given ``seed``."""
    if resamples < 100:
        raise ValueError(f"resamples={resamples} must be >= 100 (10000 is the usual choice)")
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence={confidence} must be in [0.5, 1), e.g. 0.95")
    diff = _paired(a, b)
    n, mean = int(diff.size), float(diff.mean())
    discordant = int(np.count_nonzero(diff))
    centred = diff - shift
    if n < 2 or np.all(centred == centred[0]):
        # every difference equal: no resampling can move the mean (and BCa is undefined)
        p = 0.0 if n >= 2 and centred[0] > 0 else 1.0
        low = high = mean
    else:
        rng = np.random.default_rng(seed)
        p = float(stats.permutation_test((centred,), np.mean, permutation_type="samples", alternative="greater",
                                         n_resamples=resamples, vectorized=True, random_state=rng).pvalue)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa warns on heavily tied data; its interval is still returned
            ci = stats.bootstrap((diff,), np.mean, method="BCa", confidence_level=confidence, n_resamples=resamples,
                                 vectorized=True, random_state=rng).confidence_interval
        low, high = float(ci.low), float(ci.high)
        if not (np.isfinite(low) and np.isfinite(high)):  # degenerate jackknife: fall back to the percentile interval
            ci = stats.bootstrap((diff,), np.mean, method="percentile", confidence_level=confidence, n_resamples=resamples,
                                 vectorized=True, random_state=rng).confidence_interval
            low, high = float(ci.low), float(ci.high)
    return PairedTest(mean_diff=mean, low=low, high=high, p_value=p, n=n, discordant=discordant, confidence=confidence,
                      resamples=resamples, shift=shift)


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


def noninferiority_verdict(quality: PairedTest, cost_saving: PairedTest, *, margin: float) -> ClaimVerdict:
    """For ``cheapest_noninferior``: ``win`` when quality is non-inferior (the one-sided test of
    mean difference > -``margin`` rejects, and the interval's low end is above -``margin``) AND the
    per-task cost saving is positive by the same standard, with at least MIN_DISCORDANT tasks whose
    cost differs. ``no_win`` when quality is shown inferior (interval below -``margin``) or the
    saving is shown absent (interval at or below 0). Else ``inconclusive``."""
    alpha = (1.0 - quality.confidence) / 2
    noninferior = quality.n >= 2 and quality.p_value < alpha and quality.low > -margin
    cheaper = cost_saving.n >= 2 and cost_saving.p_value < alpha and cost_saving.low > 0 and cost_saving.discordant >= MIN_DISCORDANT
    if noninferior and cheaper:
        return "win"
    if quality.high < -margin or cost_saving.high <= 0:
        return "no_win"
    return "inconclusive"

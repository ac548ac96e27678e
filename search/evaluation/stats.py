"""The claim statistics: a paired bootstrap over per-task score differences.

The holdout comparison pairs champion and baseline on the same tasks, so the task-to-task
variance cancels and the bootstrap resamples tasks (not episodes): each task's difference is
the unit of evidence.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

ClaimVerdict = Literal["win", "no_win", "inconclusive"]

# bound on the (resamples x n) index matrix held at once, to keep memory flat for large n
_MAX_CELLS_PER_CHUNK = 2_000_000


@dataclass(frozen=True)
class BootstrapResult:
    mean_diff: float  # observed mean of (b - a) over paired tasks
    low: float  # lower bound of the percentile confidence interval of the mean difference
    high: float  # upper bound
    n: int  # paired tasks
    confidence: float = 0.95
    resamples: int = 10_000


def paired_bootstrap_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    rng: np.random.Generator,
) -> BootstrapResult:
    """Percentile bootstrap CI of mean(b - a), resampling paired tasks with replacement.

    ``a`` is the baseline and ``b`` the challenger, aligned by task (see
    ``search.evaluation.metrics.paired_scores``). Deterministic for a given ``rng`` state.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(
            f"a and b must be 1-d and paired by task; got shapes {x.shape} and {y.shape}"
        )
    if x.size == 0:
        raise ValueError("no paired tasks: a and b are empty; evaluate both on the same split")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite; drop skipped tasks before pairing")
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be >= 1 (10000 is the usual choice)")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} must be in (0, 1), e.g. 0.95")
    diff = y - x
    n = diff.size
    chunk = max(1, _MAX_CELLS_PER_CHUNK // n)
    means = np.empty(resamples, dtype=float)
    for start in range(0, resamples, chunk):
        stop = min(start + chunk, resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = diff[idx].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1.0 - alpha / 2])
    return BootstrapResult(
        mean_diff=float(diff.mean()),
        low=float(low),
        high=float(high),
        n=int(n),
        confidence=confidence,
        resamples=resamples,
    )


def claim_verdict(result: BootstrapResult, *, min_effect: float = 0.0) -> ClaimVerdict:
    """The only verdict that may be called an improvement is ``win``.

    - ``win``: the whole CI clears the superiority threshold, ``low > min_effect``.
    - ``no_win``: the whole CI is at or below it, ``high <= min_effect`` (a loss, or a tie
      measured tightly enough to rule out the effect; identical scores give [0, 0] -> no_win).
    - ``inconclusive``: the CI straddles it (``low <= min_effect < high``), or fewer than 2
      paired tasks (a one-task bootstrap has zero width and proves nothing).
    """
    if min_effect < 0:
        raise ValueError(
            f"min_effect={min_effect} must be >= 0; a negative threshold would call a loss a win"
        )
    if result.n < 2:
        return "inconclusive"
    if result.low > min_effect:
        return "win"
    if result.high <= min_effect:
        return "no_win"
    return "inconclusive"

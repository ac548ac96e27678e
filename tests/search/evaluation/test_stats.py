from __future__ import annotations

import numpy as np
import pytest

from search.evaluation.stats import BootstrapResult, claim_verdict, paired_bootstrap_ci


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def scores(n: int = 60, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.0, 0.6, size=n)


def test_known_win() -> None:
    a = scores()
    b = a + 0.3 + np.random.default_rng(2).normal(0.0, 0.02, size=a.size)
    result = paired_bootstrap_ci(a, b, rng=rng())
    assert result.n == 60
    assert result.mean_diff == pytest.approx(0.3, abs=0.01)
    assert 0.25 < result.low < result.mean_diff < result.high < 0.35
    assert claim_verdict(result) == "win"
    assert claim_verdict(result, min_effect=0.5) == "no_win"


def test_identical_scores_are_not_a_win() -> None:
    a = scores()
    result = paired_bootstrap_ci(a, a.copy(), rng=rng())
    assert result.low <= 0.0 <= result.high
    assert claim_verdict(result) == "no_win"


def test_noisy_tie_is_inconclusive() -> None:
    a = scores()
    b = a + np.random.default_rng(3).normal(0.0, 0.2, size=a.size)
    b -= (b - a).mean()  # observed mean difference exactly 0
    result = paired_bootstrap_ci(a, b, rng=rng())
    assert result.low < 0.0 < result.high
    assert claim_verdict(result) == "inconclusive"


def test_known_loss() -> None:
    a = scores()
    b = a - 0.2 + np.random.default_rng(4).normal(0.0, 0.02, size=a.size)
    result = paired_bootstrap_ci(a, b, rng=rng())
    assert result.high < 0
    assert claim_verdict(result) == "no_win"


def test_same_seed_same_interval_and_chunking_is_transparent() -> None:
    a, b = scores(), scores(seed=9)
    first = paired_bootstrap_ci(a, b, resamples=5000, rng=rng(42))
    second = paired_bootstrap_ci(a, b, resamples=5000, rng=rng(42))
    assert first == second
    other = paired_bootstrap_ci(a, b, resamples=5000, rng=rng(43))
    assert other.mean_diff == first.mean_diff and (other.low, other.high) != (first.low, first.high)


def test_wider_confidence_gives_wider_interval() -> None:
    a, b = scores(), scores(seed=9)
    narrow = paired_bootstrap_ci(a, b, confidence=0.8, rng=rng())
    wide = paired_bootstrap_ci(a, b, confidence=0.99, rng=rng())
    assert wide.low < narrow.low and wide.high > narrow.high
    assert (wide.confidence, wide.resamples) == (0.99, 10_000)


def test_large_n_is_chunked_and_matches_sample_size() -> None:
    a = np.zeros(5000)
    b = np.full(5000, 0.1)
    result = paired_bootstrap_ci(a, b, resamples=1000, rng=rng())
    assert result.n == 5000
    assert result.low == pytest.approx(0.1) and result.high == pytest.approx(0.1)


@pytest.mark.parametrize(
    "low, high, n, min_effect, verdict",
    [
        (0.01, 0.2, 30, 0.0, "win"),
        (0.0, 0.2, 30, 0.0, "inconclusive"),  # low must clear the threshold strictly
        (0.04, 0.2, 30, 0.05, "inconclusive"),
        (0.06, 0.2, 30, 0.05, "win"),
        (-0.1, 0.05, 30, 0.05, "no_win"),  # high at the threshold: the effect is ruled out
        (-0.3, -0.1, 30, 0.0, "no_win"),
        (0.2, 0.2, 1, 0.0, "inconclusive"),  # one pair proves nothing
    ],
)
def test_claim_verdict_rule(
    low: float, high: float, n: int, min_effect: float, verdict: str
) -> None:
    result = BootstrapResult(mean_diff=(low + high) / 2, low=low, high=high, n=n)
    assert claim_verdict(result, min_effect=min_effect) == verdict


@pytest.mark.parametrize(
    "a, b, kwargs, message",
    [
        ([], [], {}, "no paired tasks"),
        ([0.1, 0.2], [0.1], {}, "shapes (2,) and (1,)"),
        ([0.1, float("nan")], [0.1, 0.2], {}, "finite"),
        ([0.1], [0.2], {"resamples": 0}, "resamples=0"),
        ([0.1], [0.2], {"confidence": 1.0}, "confidence=1.0"),
    ],
)
def test_bad_inputs_are_named(
    a: list[float], b: list[float], kwargs: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        paired_bootstrap_ci(a, b, rng=rng(), **kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_negative_min_effect_is_rejected() -> None:
    result = BootstrapResult(mean_diff=0.0, low=-0.1, high=0.1, n=10)
    with pytest.raises(ValueError, match="min_effect=-0.1"):
        claim_verdict(result, min_effect=-0.1)

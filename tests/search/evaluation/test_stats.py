"""The claim statistics: a sign-flip permutation test and a BCa interval (scipy.stats) over paired
per-task differences, and the verdicts they support, on constructed data."""
from __future__ import annotations

import numpy as np
import pytest
from evoharness.search.evaluation.stats import MIN_DISCORDANT, PairedTest, paired_test, superiority_verdict


def pair(diffs: list[float], base: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    a = np.full(len(diffs), base)
    return a, a + np.asarray(diffs, dtype=float)


def test_a_clear_improvement_is_a_win() -> None:
    a, b = pair([0.5] * 20 + [0.0] * 20)
    r = paired_test(a, b, seed=1)
    assert r.discordant == 20 and r.p_value < 0.001 and 0.1 < r.low < r.mean_diff < r.high and r.mean_diff == pytest.approx(0.25)
    assert superiority_verdict(r, min_effect=0.03) == "win"


def test_four_better_of_forty_is_not_a_win() -> None:
    a, b = pair([1.0] * 4 + [0.0] * 36)
    r = paired_test(a, b, seed=1)
    assert r.discordant == 4 < MIN_DISCORDANT
    # ties flip to themselves: only the four that differ carry signs, so p is 1/16 (estimated by Monte Carlo)
    assert r.p_value == pytest.approx(1 / 16, abs=0.01)
    assert superiority_verdict(r, min_effect=0.0) != "win"


def test_the_p_value_is_the_exact_sign_flip_one_for_small_n() -> None:
    a, b = pair([0.2] * 10)
    r = paired_test(a, b, seed=0)
    assert r.low == r.high == pytest.approx(0.2)  # every difference equal: no resample can move the mean
    mixed = paired_test(*pair([0.2] * 9 + [-0.1]), seed=0)
    assert mixed.p_value == pytest.approx(2 / 1024)  # all +, or all + but the smallest: 2 of 2^10 patterns


def test_a_tight_null_is_equivalent() -> None:
    rng = np.random.default_rng(3)
    diffs = list(rng.choice([-0.01, 0.0, 0.01], size=200))
    r = paired_test(*pair(diffs), seed=2)
    assert -0.03 <= r.low and r.high <= 0.03
    assert superiority_verdict(r, min_effect=0.03) == "equivalent"
    assert superiority_verdict(r, min_effect=0.0) in ("no_win", "inconclusive")


def test_a_loss_is_no_win_and_noise_is_inconclusive() -> None:
    assert superiority_verdict(paired_test(*pair([-0.5] * 30 + [0.0] * 10), seed=0), min_effect=0.03) == "no_win"
    rng = np.random.default_rng(0)
    noisy = paired_test(*pair(list(rng.choice([-1.0, 0.0, 1.0], size=30))), seed=0)
    assert superiority_verdict(noisy, min_effect=0.03) == "inconclusive"


def test_deterministic_for_a_seed() -> None:
    rng = np.random.default_rng(5)
    a, b = pair(list(rng.normal(0.05, 0.3, size=60)))
    assert paired_test(a, b, seed=7) == paired_test(a, b, seed=7)
    assert paired_test(a, b, seed=7).low != paired_test(a, b, seed=8).low


@pytest.mark.parametrize("a, b, kwargs, match", [
    ([0.1, 0.2], [0.1], {}, "paired by task"),
    ([], [], {}, "no paired tasks"),
    ([0.1, float("nan")], [0.1, 0.2], {}, "finite"),
    ([0.1, 0.2], [0.3, 0.4], {"resamples": 10}, "resamples=10"),
    ([0.1, 0.2], [0.3, 0.4], {"confidence": 1.0}, "confidence=1.0"),
])
def test_bad_input_is_refused(a: list[float], b: list[float], kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        paired_test(a, b, **kwargs)  # type: ignore[arg-type]


def test_negative_min_effect_is_rejected() -> None:
    r = PairedTest(mean_diff=0.1, low=0.05, high=0.2, p_value=0.01, n=40, discordant=10, confidence=0.95, resamples=1000, shift=0.0)
    with pytest.raises(ValueError, match="min_effect=-0.1"):
        superiority_verdict(r, min_effect=-0.1)


def test_noninferiority_needs_both_quality_within_margin_and_a_real_saving() -> None:
    from evoharness.search.evaluation.stats import noninferiority_verdict

    rng = np.random.default_rng(4)
    same = list(rng.choice([-0.02, 0.0, 0.02], size=80))
    quality = paired_test(*pair(same), shift=-0.05, seed=1)
    saving = paired_test(*pair(list(rng.uniform(0.05, 0.1, size=80)), base=0.01), seed=1)  # 80 tasks each cheaper
    none = paired_test(*pair([0.0] * 80, base=0.01), seed=1)
    worse = paired_test(*pair([-0.5] * 40 + [0.0] * 40), shift=-0.05, seed=1)
    assert noninferiority_verdict(quality, saving, margin=0.05) == "win"
    assert noninferiority_verdict(quality, none, margin=0.05) == "no_win"  # not cheaper: nothing to claim
    assert noninferiority_verdict(worse, saving, margin=0.05) == "no_win"  # cheaper but clearly worse
    few = paired_test(*pair([0.05] * 3 + [0.0] * 77, base=0.01), seed=1)
    assert noninferiority_verdict(quality, few, margin=0.05) != "win"  # three cheaper tasks are not a saving

"""The claim statistics on constructed data: the quality score test with its null-restricted
variance (checked against a brute-force restricted maximum likelihood), its reach with all-tied
clusters, clusters as the unit, the sign-flip saving test, and the verdicts they support."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from evoharness.search.evaluation.stats import (
    MIN_DISCORDANT,
    PairedTest,
    clusters_needed,
    noninferiority_verdict,
    quality_test,
    reach,
    saving_test,
    superiority_verdict,
)


def pair(diffs: list[float], base: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    a = np.full(len(diffs), base)
    return a, a + np.asarray(diffs, dtype=float)


def test_all_tied_clusters_show_non_inferiority_only_from_the_size_the_exact_bound_needs() -> None:
    needed = clusters_needed(0.05)
    assert needed == 73  # z^2 (1 - d) / d = 72.99: a model losing 5% of tasks ties on all 72 with probability 0.025
    short, enough = quality_test(*pair([0.0] * (needed - 1)), null=-0.05), quality_test(*pair([0.0] * needed), null=-0.05)
    assert short.low <= -0.05 < enough.low and short.p_value >= 0.025 > enough.p_value
    assert enough.low == pytest.approx(-reach(needed), abs=1e-6) and short.high == pytest.approx(reach(needed - 1), abs=1e-6)
    # six tied tasks were a win before: here they bound nothing closer than 0.39
    assert quality_test(*pair([0.0] * 6), null=-0.05).low == pytest.approx(-0.390, abs=0.001)


def _brute_force_z(values: np.ndarray, null: float) -> float:
    """The score statistic with the restricted MLE found by a general optimiser over the support
    {observed values} + {-1}: an independent check of the closed form and the empirical likelihood."""
    support = np.unique(np.append(values, -1.0))
    counts = np.array([np.sum(values == s) for s in support], dtype=float)

    def neg(w: np.ndarray) -> float:
        return -float(np.sum(counts[counts > 0] * np.log(np.maximum(w[counts > 0], 1e-300))))

    cons = [{"type": "eq", "fun": lambda w: w.sum() - 1}, {"type": "eq", "fun": lambda w: w @ support - null}]
    w0 = np.full(support.size, 1 / support.size)
    w = optimize.minimize(neg, w0, bounds=[(0, 1)] * support.size, constraints=cons, method="SLSQP",
                          options={"ftol": 1e-14, "maxiter": 500}).x
    var = float(w @ (support - null) ** 2)
    return (values.mean() - null) / math.sqrt(var / values.size)


@pytest.mark.parametrize("diffs", [[1.0] * 5 + [-1.0] + [0.0] * 35, [1.0] * 3 + [0.0] * 30, [0.5, 0.25, 0.0, 0.0, -0.25, 1.0] * 5,
                                   [-1.0] * 4 + [1.0] * 6 + [0.0] * 20, [0.0] * 40])
def test_the_score_test_uses_the_restricted_maximum_likelihood_variance(diffs: list[float]) -> None:
    r = quality_test(*pair(diffs), null=-0.05)
    assert stats.norm.isf(r.p_value) == pytest.approx(_brute_force_z(np.asarray(diffs), -0.05), rel=2e-3)


def test_the_interval_inverts_the_test() -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        diffs = list(rng.choice([-1.0, 0.0, 1.0], size=int(rng.integers(10, 200)), p=[0.12, 0.78, 0.10]))
        r = quality_test(*pair(diffs), null=-0.05)
        assert (r.p_value < 0.025) == (r.low > -0.05)
        assert r.low < r.mean_diff < r.high


def test_clusters_are_the_unit_and_carry_the_design_effect() -> None:
    rng = np.random.default_rng(1)
    scenario = rng.choice([-1.0, 0.0, 1.0], size=50, p=[0.2, 0.6, 0.2])
    diffs = np.repeat(scenario, 4)  # each scenario's four tasks move together
    names = [f"s{i // 4}" for i in range(200)]
    as_tasks, as_clusters = quality_test(*pair(list(diffs)), null=-0.05), quality_test(*pair(list(diffs)), null=-0.05, clusters=names)
    assert (as_tasks.unit, as_tasks.clusters, as_tasks.design_effect) == ("task", 200, 1.0)
    assert (as_clusters.unit, as_clusters.clusters, as_clusters.n) == ("cluster", 50, 200)
    assert as_clusters.design_effect == pytest.approx(4.0, rel=0.05)  # perfectly correlated: m = 4
    assert as_clusters.high - as_clusters.low > 1.8 * (as_tasks.high - as_tasks.low)  # about sqrt(4) wider
    independent = rng.choice([-1.0, 0.0, 1.0], size=200, p=[0.2, 0.6, 0.2])
    assert quality_test(*pair(list(independent)), null=-0.05, clusters=names).design_effect == pytest.approx(1.0, abs=0.35)


def test_the_size_at_the_smallest_accepted_holdout_is_nominal() -> None:
    """Monte-Carlo at the boundary (truly 0.05 worse), 73 tasks, the hardest tie pattern the bench
    finds near nominal: 2000 draws, so the rate's standard error is 0.0035."""
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(2000):
        diffs = rng.choice([1.0, -1.0, 0.0], size=73, p=[0.05, 0.10, 0.85])
        r = quality_test(np.zeros(73), diffs, null=-0.05)
        hits += r.p_value < 0.025
    assert hits / 2000 <= 0.035


def test_right_skewed_differences_keep_the_size() -> None:
    """Many small losses and a few large gains at the null (BFCL's shape: 81 scenarios of 4 whose
    value is +0.75 or -0.125): the score statistic alone rejected 4.6% of the time."""
    rng = np.random.default_rng(5)
    names = [f"s{i // 4}" for i in range(324)]
    hits = sum(quality_test(np.zeros(324), np.repeat(np.where(rng.random(81) < 0.075 / 0.875, 0.75, -0.125), 4), null=-0.05,
                            clusters=names).p_value < 0.025 for _ in range(1500))
    assert hits / 1500 <= 0.033


def test_unequal_clusters_are_weighted_by_their_tasks() -> None:
    # one cluster of 80 tasks, each 0.2 worse, and 79 tied single tasks: the pass rate is 0.10 worse
    diffs = [-0.2] * 80 + [0.0] * 79
    names = ["big"] * 80 + [f"s{i}" for i in range(79)]
    r = quality_test(*pair(diffs), null=-0.05, clusters=names)
    assert r.mean_diff == pytest.approx(-16 / 159) and r.low < -0.05 and r.p_value > 0.5 and r.clusters == 80


def test_a_saving_of_n_equal_differences_has_the_exact_p() -> None:
    for n in (5, 8):
        r = saving_test(*pair([0.2] * n), seed=0)
        assert r.p_value == pytest.approx(2.0 ** -n) and r.low == r.high == pytest.approx(0.2)
    assert saving_test(*pair([0.0] * 8), seed=0).p_value == 1.0
    mixed = saving_test(*pair([0.2] * 9 + [-0.1]), seed=0)
    assert mixed.p_value == pytest.approx(2 / 1024)  # all +, or all + but the smallest: 2 of 2^10 patterns


def test_a_saving_is_tested_on_cluster_means() -> None:
    # ten clusters of three, nine of mean 0.3 and one of -0.1: the sign flips are of ten values, not thirty
    diffs = [0.3] * 27 + [-0.1] * 3
    names = [f"c{i // 3}" for i in range(30)]
    r = saving_test(*pair(diffs), clusters=names, seed=0)
    assert r.clusters == 10 and r.p_value == pytest.approx(2 / 1024)  # the observed signs, or the negative one flipped
    assert saving_test(*pair(diffs), seed=0).p_value < 1e-4


def test_superiority_verdicts() -> None:
    rng = np.random.default_rng(3)
    clear = quality_test(*pair([0.5] * 20 + [0.0] * 20), null=0.03)
    assert superiority_verdict(clear, min_effect=0.03) == "win"
    sparse = quality_test(*pair([1.0] * 4 + [0.0] * 36), null=0.0)
    assert sparse.discordant == 4 < MIN_DISCORDANT and superiority_verdict(sparse, min_effect=0.0) != "win"
    tight = quality_test(*pair(list(rng.normal(0, 0.05, 400).clip(-1, 1))), null=0.1)
    assert superiority_verdict(tight, min_effect=0.1) == "equivalent"
    loss = quality_test(*pair([-0.5] * 30), null=0.03)
    assert superiority_verdict(loss, min_effect=0.03) == "no_win"
    with pytest.raises(ValueError, match="min_effect"):
        superiority_verdict(clear, min_effect=-0.01)


def _verdict(quality: list[float], saving: list[float]) -> str:
    return noninferiority_verdict(quality_test(*pair(quality), null=-0.05), saving_test(*pair(saving), seed=0), margin=0.05)


def test_noninferiority_needs_both_quality_within_margin_and_a_real_saving() -> None:
    tied, cheaper = [0.0] * 200, [0.05] * 200
    assert _verdict(tied, cheaper) == "win"
    assert _verdict([0.0] * 20, [0.05] * 20) == "inconclusive"  # too few tasks to bound the margin
    assert _verdict(tied, [0.0] * 200) == "no_win"  # no saving at all
    assert _verdict([-1.0] * 40 + [0.0] * 160, cheaper) == "no_win"  # 0.2 worse: shown inferior


@pytest.mark.parametrize(("a", "b", "match"), [([0.1], [0.1, 0.2], "paired"), ([], [], "no paired"),
                                                ([0.1, float("nan")], [0.1, 0.2], "finite")])
def test_bad_input_is_refused(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        quality_test(a, b, null=0.0)


def test_a_score_wider_than_one_is_scaled_by_its_largest_difference() -> None:
    diffs = [0.5, 0.0, -0.25, 1.0] * 10
    unit, wide = quality_test(*pair(diffs), null=-0.05), quality_test(*pair([4 * d for d in diffs]), null=-0.2)
    assert (wide.low, wide.high, wide.mean_diff) == pytest.approx((4 * unit.low, 4 * unit.high, 4 * unit.mean_diff))
    assert wide.p_value == pytest.approx(unit.p_value)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="resamples"):
        saving_test([0.1, 0.2], [0.2, 0.3], resamples=10)
    with pytest.raises(ValueError, match="confidence"):
        quality_test([0.1, 0.2], [0.2, 0.3], null=0.0, confidence=1.0)
    with pytest.raises(ValueError, match="clusters"):
        quality_test([0.1, 0.2], [0.2, 0.3], null=0.0, clusters=["a"])
    with pytest.raises(ValueError, match="margin"):
        clusters_needed(0.0)


def test_paired_test_is_frozen() -> None:
    r = quality_test(*pair([0.1, 0.0, 0.2]), null=0.0)
    assert isinstance(r, PairedTest)
    with pytest.raises(AttributeError):
        r.low = 0.0  # type: ignore[misc]

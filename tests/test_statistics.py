"""mlm_course.statistics against scipy and statsmodels, and against cases worked out by hand."""

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.descriptivestats import sign_test
from statsmodels.stats.multitest import multipletests

from mlm_course.statistics import (
    exact_mcnemar,
    holm,
    mean_interval,
    paired_bootstrap,
    paired_t,
    standard_error,
    t_half_width,
    wilson_interval,
)

T_975_2DF = 4.302653  # t(0.975) with 2 degrees of freedom, the table value


@pytest.mark.parametrize(("successes", "trials", "confidence"),
                         [(150, 1000, 0.999), (0, 50, 0.999), (117_000, 780_000, 0.999), (7, 9, 0.95), (1, 3, 0.8)])
def test_wilson_interval_is_scipys_wilson(successes, trials, confidence):
    ref = stats.binomtest(successes, trials).proportion_ci(confidence, method="wilson")
    assert wilson_interval(successes, trials, confidence) == pytest.approx((ref.low, ref.high), abs=1e-9)


@pytest.mark.parametrize("trials", [2, 7, 40, 1000])
def test_wilson_interval_reaches_0_and_1_exactly_at_the_extremes(trials):
    """All successes: the upper bound is exactly 1 (the formula alone gave 0.9999999999999999 at 40/40)."""
    assert wilson_interval(trials, trials)[1] == 1.0
    assert wilson_interval(0, trials)[0] == 0.0
    low, high = wilson_interval(trials // 2, trials)
    assert 0.0 < low < high < 1.0


def test_wilson_interval_by_hand():
    z2 = 1.959964**2  # 0 of 10 at 95 %: the upper bound is z² / (n + z²)
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)), abs=1e-6)
    # 5 of 10: centre ½, half-width z √(¼ / 10 + z² / 400) / (1 + z² / 10) = 1.96 · 0.18602 / 1.38415 = 0.2634
    assert wilson_interval(5, 10) == pytest.approx((0.5 - 0.2634, 0.5 + 0.2634), abs=1e-4)


def test_wilson_interval_refuses_impossible_counts():
    with pytest.raises(ValueError, match="trials must be positive"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="not between 0 and trials"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="between 0 and 1"):
        wilson_interval(1, 10, confidence=95)


def test_mean_interval_is_the_t_interval():
    values = [6.21, 6.213, 6.209]
    mean, half = mean_interval(values)
    low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
    assert mean == pytest.approx(np.mean(values)) and half == pytest.approx((high - low) / 2)
    assert half / stats.sem(values) == pytest.approx(T_975_2DF, abs=1e-6)
    assert standard_error(values) == pytest.approx(stats.sem(values))
    assert mean_interval([0.6, 0.7, 0.8], 0.99)[1] == pytest.approx(stats.t.ppf(0.995, 2) * 0.1 / math.sqrt(3))


def test_mean_interval_of_one_and_of_no_values():
    assert mean_interval([1.0])[0] == 1.0 and math.isnan(mean_interval([1.0])[1])
    with pytest.raises(ValueError, match="at least one"):
        mean_interval([])
    with pytest.raises(ValueError, match="between 0 and 1"):
        mean_interval([1.0, 2.0], confidence=95)


def test_t_half_width_is_the_t_quantile_times_the_standard_error():
    assert t_half_width(0.1, 3) == pytest.approx(T_975_2DF * 0.1)
    assert t_half_width(0.1, 3, 0.99) == pytest.approx(stats.t.ppf(0.995, 2) * 0.1)
    assert math.isnan(t_half_width(math.nan, 1))
    with pytest.raises(ValueError, match="between 0 and 1"):
        t_half_width(0.1, 3, confidence=95)


def test_paired_t_is_scipys_ttest_rel():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.6, 0.05, 7), rng.normal(0.58, 0.05, 7)
    ours, ref = paired_t(a, b, 0.9), stats.ttest_rel(a, b)
    low, high = ref.confidence_interval(0.9)
    assert ours["t"] == pytest.approx(ref.statistic) and ours["p"] == pytest.approx(ref.pvalue)
    assert (ours["low"], ours["high"]) == pytest.approx((low, high)) and ours["n"] == 7
    assert ours["mean_difference"] == pytest.approx(np.mean(a - b))


def test_paired_t_by_hand():
    """Differences 1, 2, 3: mean 2, sd 1, t = 2√3; with 2 df the two-sided p is 1 − t/√(t² + 2) = 1 − √(6/7)."""
    got = paired_t([11, 22, 33], [10, 20, 30])
    assert got["mean_difference"] == pytest.approx(2.0) and got["t"] == pytest.approx(2 * math.sqrt(3))
    assert got["p"] == pytest.approx(1 - math.sqrt(6 / 7))
    assert (got["low"], got["high"]) == pytest.approx((2 - T_975_2DF / math.sqrt(3), 2 + T_975_2DF / math.sqrt(3)))


def test_paired_t_uses_the_pairing():
    """Seeds that move both runs alike: paired, a steady +0.01 is clear; as two independent samples it is not."""
    b = np.array([0.55, 0.62, 0.70, 0.58, 0.66])
    a = b + np.array([0.011, 0.009, 0.010, 0.012, 0.008])
    assert paired_t(a, b)["p"] < 1e-3 < 0.5 < stats.ttest_ind(a, b, equal_var=False).pvalue
    assert paired_t(a, b[::-1])["p"] > 0.5  # pairs by position: another order is another test


def test_paired_t_without_spread():
    assert paired_t([1.0, 2.0], [0.0, 1.0])["t"] == math.inf and paired_t([1.0, 2.0], [0.0, 1.0])["p"] == 0.0
    same = paired_t([1.0, 2.0], [1.0, 2.0])
    assert same["mean_difference"] == 0.0 and math.isnan(same["t"]) and math.isnan(same["p"])


def test_paired_t_refuses_what_cannot_be_paired():
    with pytest.raises(ValueError, match="pairs by position: pass two flat lists of the same length"):
        paired_t([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 2 pairs"):
        paired_t([1.0], [2.0])


def test_exact_mcnemar_without_discordant_pairs():
    assert exact_mcnemar([True, False, True], [True, False, True]) == {"only_a": 0, "only_b": 0, "n": 3, "p": 1.0}


@pytest.mark.parametrize(("k", "p"), [(1, 1.0), (5, 2 / 2**5), (10, 2 / 2**10)])
def test_exact_mcnemar_with_every_discordant_pair_one_way(k, p):
    """k items only a got right, none only b: p = 2 · ½^k (capped at 1)."""
    a, b = [True] * k + [True, False], [False] * k + [True, False]
    assert exact_mcnemar(a, b) == {"only_a": k, "only_b": 0, "n": k + 2, "p": pytest.approx(p)}
    assert exact_mcnemar(b, a) == {"only_a": 0, "only_b": k, "n": k + 2, "p": pytest.approx(p)}


def test_exact_mcnemar_is_statsmodels_exact_mcnemar():
    rng = np.random.default_rng(2)
    a, b = rng.random(300) < 0.8, rng.random(300) < 0.74
    table = [[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]]
    got = exact_mcnemar(a, b)
    assert (got["only_a"], got["only_b"]) == (table[0][1], table[1][0])
    assert got["p"] == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert exact_mcnemar(a.astype(int), b.astype(int)) == got  # 0/1 as well as booleans


def test_exact_mcnemar_on_signs_is_the_sign_test():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.3, 1, 40).round(1), rng.normal(0, 1, 40).round(1)
    assert exact_mcnemar(a > b, b > a)["p"] == pytest.approx(sign_test(a - b)[1])


def test_exact_mcnemar_refuses_scores_and_unequal_lists():
    with pytest.raises(ValueError, match="booleans"):
        exact_mcnemar([0.7, 0.2], [1, 0])
    with pytest.raises(ValueError, match="same length"):
        exact_mcnemar([True], [True, False])
    with pytest.raises(ValueError, match="at least 1 pairs"):
        exact_mcnemar([], [])


def test_paired_bootstrap_is_seeded_and_exact_for_a_constant_difference():
    rng = np.random.default_rng(4)
    a, b = rng.normal(1, 1, 50), rng.normal(0.8, 1, 50)
    assert paired_bootstrap(a, b, resamples=500, seed=7) == paired_bootstrap(a, b, resamples=500, seed=7)
    assert paired_bootstrap(a, b, resamples=500, seed=7) != paired_bootstrap(a, b, resamples=500, seed=8)
    shifted = paired_bootstrap(b + 0.25, b, resamples=200)  # b varies a lot, a − b not at all
    assert shifted["low"] == pytest.approx(0.25) and shifted["high"] == pytest.approx(0.25)
    assert shifted["mean_difference"] == pytest.approx(0.25) and shifted["n"] == 50


def test_paired_bootstrap_is_scipys_percentile_bootstrap():
    rng = np.random.default_rng(5)
    a, b = rng.exponential(1.0, 120), rng.exponential(0.8, 120)
    got = paired_bootstrap(a, b, resamples=20_000, seed=0)
    ref = stats.bootstrap((a - b,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(1))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert got["low"] == pytest.approx(ref.confidence_interval.low, abs=0.03 * width)
    assert got["high"] == pytest.approx(ref.confidence_interval.high, abs=0.03 * width)


def test_paired_bootstrap_covers_the_true_difference_about_95_percent_of_the_time():
    rng = np.random.default_rng(6)
    covered = 0
    for trial in range(200):
        b = rng.normal(0, 1, 60)
        a = b + 0.5 + rng.normal(0, 0.3, 60)  # true difference 0.5
        got = paired_bootstrap(a, b, resamples=1000, seed=trial)
        covered += got["low"] <= 0.5 <= got["high"]
        assert got["low"] > 0  # and far from no difference
    assert 0.89 <= covered / 200 <= 0.99


def test_paired_bootstrap_draws_large_samples_in_blocks():
    """100,000 items: the resamples come in blocks; the interval is still the normal one, ±1.96 sd / √n."""
    rng = np.random.default_rng(7)
    d = rng.normal(0.1, 1, 100_000)
    got = paired_bootstrap(d, np.zeros_like(d), resamples=300)
    half = 1.96 * d.std() / math.sqrt(d.size)
    assert (got["low"], got["high"]) == pytest.approx((d.mean() - half, d.mean() + half), abs=0.2 * half)


def test_paired_bootstrap_refuses_bad_arguments():
    with pytest.raises(ValueError, match="resamples=0"):
        paired_bootstrap([1.0, 2.0], [1.0, 1.0], resamples=0)
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="at least 2 pairs"):
        paired_bootstrap([1.0], [1.0])
    with pytest.raises(ValueError, match="between 0 and 1"):
        paired_bootstrap([1.0, 2.0], [1.0, 1.0], confidence=1.0)


def test_holm_by_hand():
    """Sorted: 0.005 × 4 = 0.02, 0.01 × 3 = 0.03, 0.03 × 2 = 0.06, 0.04 × 1 = 0.04 → 0.06 (monotone)."""
    got = holm([0.01, 0.04, 0.03, 0.005])
    assert [d.p for d in got] == [0.01, 0.04, 0.03, 0.005]
    assert [d.adjusted_p for d in got] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [d.rejected for d in got] == [True, False, False, True]


def test_holm_steps_down():
    """Rejects more than Bonferroni (0.04 × 1 after 0.001 × 2) but stops at the first hypothesis it keeps."""
    assert [d.rejected for d in holm([0.001, 0.04])] == [True, True]
    assert [d.rejected for d in holm([0.03, 0.001, 0.04])] == [False, True, False]  # 0.03 × 2 > 0.05: stop
    assert [d.adjusted_p for d in holm([0.4, 0.7, 0.9])] == [1.0, 1.0, 1.0]  # capped at 1
    assert [d.rejected for d in holm([0.02, 0.03], alpha=0.1)] == [True, True]
    assert holm([]) == []


@pytest.mark.parametrize("size", [1, 5, 24])
def test_holm_is_statsmodels_holm(size):
    p = np.random.default_rng(size).random(size) ** 3
    p[: size // 3] = p[0]  # ties
    rejected, adjusted, _, _ = multipletests(p, alpha=0.05, method="holm")
    got = holm(p)
    assert [d.adjusted_p for d in got] == pytest.approx(adjusted) and [d.rejected for d in got] == list(rejected)


def test_holm_refuses_what_is_not_a_probability():
    with pytest.raises(ValueError, match="probabilities between 0 and 1"):
        holm([0.5, 1.2])
    with pytest.raises(ValueError, match="family-wise level"):
        holm([0.5], alpha=0)

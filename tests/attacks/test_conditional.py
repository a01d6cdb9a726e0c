"""The conditional bound on a ratio of two rates (audit/statistics/conditional.py, docs/theory.md 3.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats.contingency import odds_ratio

from dpaudit.auditing.statistics.conditional import conditional_epsilon, conditional_epsilon_estimate, odds_ratio_lower
from dpaudit.auditing.statistics.confidence import Counts
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, finish_epsilon, plan_epsilon


@pytest.mark.parametrize("big, n_big, small, n_small", [
    (200, 90_000, 18, 90_000), (5, 1000, 0, 1000), (3, 100, 3, 100), (40, 50, 1, 60), (500, 1000, 100, 1000),
])
def test_odds_ratio_bound_is_scipys_exact_conditional_limit(big, n_big, small, n_small):
    # SciPy's conditional (Cornfield) limit, computed independently; ours is rounded down, never up
    expected = odds_ratio([[big, n_big - big], [small, n_small - small]],
                          kind="conditional").confidence_interval(0.95, alternative="greater").low
    ours = odds_ratio_lower(big, n_big, small, n_small, 0.05)
    assert ours == pytest.approx(expected, rel=1e-8)
    assert ours <= expected * (1 + 1e-12)


def test_one_clopper_pearson_rule_for_both_former_call_sites():
    """The conditional bound's rates and the estimators' error rates come from one helper, bit for bit."""
    from dpaudit.auditing.statistics import conditional, confidence, estimators
    from dpaudit.auditing.statistics.conditional import RATE_SHARE, conditional_parts

    assert conditional.cp_upper is confidence.cp_upper is estimators.cp_upper
    assert conditional.cp_lower is confidence.cp_lower
    for big, n_big, small, n_small, failure in ((200, 90_000, 18, 90_000, 0.05), (3, 100, 0, 100, 1e-6),
                                                (999, 1000, 1, 1000, 0.2)):
        parts = conditional_parts(big, n_big, small, n_small, delta=1e-5, failure=failure)
        share = failure * RATE_SHARE / 3
        lower, upper = confidence.clopper_pearson(np.array([big, small]), np.array([n_big, n_small]), share)
        assert parts["big_rate_upper"] == confidence.cp_upper(big, n_big, share) == upper[0]
        assert parts["big_rate_lower"] == confidence.cp_lower(big, n_big, share) == lower[0]
        assert parts["small_rate_lower"] == lower[1]


def test_clopper_pearson_is_the_exact_binomial_bound():
    # at the upper bound p_u, P(Binomial(n, p_u) <= k) equals the failure probability (Clopper & Pearson);
    # at the lower bound p_l, P(Binomial(n, p_l) >= k) does; rtol 1e-9 is the tail's float accuracy
    from scipy.stats import binom

    from dpaudit.auditing.statistics.confidence import clopper_pearson

    k, n = np.array([1, 7, 300, 5_000]), 10_000  # away from p = 1, where 1 - p has too few digits
    for failure in (1e-12, 1e-3, 0.05):
        lower, upper = clopper_pearson(k, n, failure)
        assert np.allclose(binom.cdf(k, n, upper), failure, rtol=1e-9, atol=0)
        assert np.allclose(binom.sf(k - 1, n, lower), failure, rtol=1e-9, atol=0)
    lower, upper = clopper_pearson(np.array([0, 5, 0]), np.array([5, 5, 0]), 0.05)
    assert list(lower) == [0.0, pytest.approx(0.05 ** (1 / 5)), 0.0] and list(upper) == [
        pytest.approx(1 - 0.05 ** (1 / 5)), 1.0, 1.0]


def test_nothing_is_certified_when_the_small_count_is_not_small():
    assert odds_ratio_lower(10, 100, 10, 10, 0.05) == 0.0  # the small count is as large as it can be
    assert conditional_epsilon(30, 1000, 30, 1000, delta=0.0, failure=0.05) < 0  # nothing above 0
    tighter = conditional_epsilon(300, 10_000, 10, 10_000, delta=1e-5, failure=0.05)
    assert conditional_epsilon(300, 10_000, 20, 10_000, delta=1e-5, failure=0.05) < tighter


def test_the_estimate_tracks_the_exact_bound_for_small_rates():
    for big, small in ((200, 18), (1200, 40), (60, 2)):
        exact = conditional_epsilon(big, 100_000, small, 100_000, delta=1e-5, failure=0.05)
        estimate = float(conditional_epsilon_estimate([big], 100_000, [small], 100_000, delta=1e-5, failure=0.05)[0])
        assert estimate == pytest.approx(exact, abs=0.01)


@pytest.mark.statistical
@pytest.mark.parametrize("p_small, delta", [(1e-3, 1e-5), (2e-4, 0.0), (0.02, 0.01)])
def test_coverage_at_the_boundary_of_dp(p_small, delta):
    """At rates on the boundary p_big = e^eps p_small + delta, the bound exceeds eps in at most beta of audits.

    2000 seeded audits of N = 20,000 trials per side at a fixed region; with a
    sound bound the breach fraction is at most beta + 3 sqrt(beta (1 - beta) / 2000)
    = 0.065 except with probability ~0.1% (binomial standard error). The naive
    point estimate on the same counts breaches in about half of them: the test can fail.
    """
    eps, trials, audits = 2.0, 20_000, 2000
    p_big = math.exp(eps) * p_small + delta
    rng = np.random.default_rng(7)
    big, small = rng.binomial(trials, p_big, audits), rng.binomial(trials, p_small, audits)
    bounds = np.array([conditional_epsilon(b, trials, s, trials, delta=delta, failure=0.05)
                       for b, s in zip(big, small)])
    assert np.mean(bounds > eps) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / audits)
    with np.errstate(divide="ignore"):
        naive = np.log((big / trials - delta) / np.maximum(small, 1e-9) * trials)
    assert np.mean(naive > eps) > 0.3


def test_the_plan_chooses_the_conditional_bound_where_both_rates_are_small():
    # mu = 1 Gaussian scores, 10^5 per side, delta 1e-5: the best region holds tens of trials of S' and a
    # few of S, where bounding the ratio in one step certifies more than bounding each rate at beta / 2
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(100_000), rng.standard_normal(100_000) + 1.0
    bound = epsilon_lower_bound(a, b, delta=1e-5, seed=1)
    assert bound.method == "conditional/split"
    assert bound.failure_split["odds_ratio"] == pytest.approx(0.045)
    # the record holds the bounds the certificate is made of, and they give back the certified value
    parts = bound.conditional
    ratio = parts["odds_ratio_lower"] * (1 - parts["big_rate_upper"]) / (1 - parts["small_rate_lower"]) * (
        1 - 1e-5 / parts["big_rate_lower"])
    assert bound.epsilon_lower_bound == pytest.approx(math.log(ratio), rel=1e-12)
    plan = plan_epsilon(a[:10_000], b[:10_000], delta=1e-5, confidence=0.95)
    counts = Counts.of(plan, a[10_000:], b[10_000:])
    per_rate = plan_epsilon(a[:10_000], b[:10_000], delta=1e-5, confidence=0.95, threshold="union", grid_size=1)
    assert plan.method == "conditional" and per_rate.method == "clopper-pearson"
    assert finish_epsilon(plan, counts, delta=1e-5, confidence=0.95).epsilon_lower_bound > 0

"""The ``median`` score: signs about the calibration medians, weights pooled across coordinates.

Statistical checks run at fixed seeds; each tolerance is stated with the sampling spread it was derived
from (measured over seeds, quoted beside it).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.medians import fit_median, sign_test_efficiency
from dpaudit.attacks.scores import registered_scores, resolve_scores
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound
from dpaudit.auditing.statistics.portfolio import choose_score
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation


def test_efficiency_reads_laplace_and_gaussian_noise_apart():
    # 4 f(m)^2 sigma^2 with f(m) read from the quantiles 1/2 +- 0.05: 1.8017 for Laplace noise (2 in the
    # limit of a narrow span) and 0.6333 for Gaussian noise (2/pi); over 30 seeds of 2 x 10^4 trials of 3
    # coordinates the standard deviations were 0.051 and 0.014: 5 of them allowed
    rng = np.random.default_rng(3)
    assert sign_test_efficiency(rng.laplace(0.0, 7.0, (20_000, 3))) == pytest.approx(1.8017, abs=5 * 0.051)
    assert sign_test_efficiency(rng.normal(4.0, 0.2, (20_000, 3))) == pytest.approx(0.6333, abs=5 * 0.014)
    assert sign_test_efficiency(np.zeros((100, 2))) == 0.0  # no spread: nothing to read


def test_weights_are_pooled_where_coordinates_move_alike_and_kept_where_they_do_not():
    rng = np.random.default_rng(4)
    shift = np.zeros(20)
    alike = fit_median(rng.laplace(0.0, 20.0, (20_000, 20)), rng.laplace(1.0, 20.0, (20_000, 20)))
    assert alike.between_variance == 0.0 and np.ptp(alike.weights) == 0.0 and alike.weights[0] > 0
    shift[:10], shift[10:] = 2.0, -2.0
    apart = fit_median(rng.laplace(0.0, 1.0, (20_000, 20)), rng.laplace(shift, 1.0, (20_000, 20)))
    assert apart.between_variance > 0 and np.all(apart.weights[:10] > 0) and np.all(apart.weights[10:] < 0)


def test_the_sign_test_certifies_more_than_the_mean_under_laplace_noise():
    # 20 Laplace(10) coordinates shifted by 1 (true epsilon 2): over seeds 0-11, 3 x 10^4 certification
    # trials per side, the median score certified 0.946 on average (sd 0.087) and the sum of the outputs
    # 0.572 (sd 0.068), the median more on every seed; the gap is 3.4 standard deviations of the difference
    rng = np.random.default_rng(0)
    a, b = rng.laplace(0.0, 10.0, (40_000, 20)), rng.laplace(1.0, 10.0, (40_000, 20))
    cal = 10_000
    median = fit_median(a[:cal], b[:cal])

    def certified(score):
        return epsilon_lower_bound(score(a[cal:]), score(b[cal:]), delta=0.0, seed=0,
                                   calibration=(score(a[:cal]), score(b[:cal]))).epsilon_lower_bound

    assert certified(median) > certified(lambda x: x.sum(axis=1)) + 0.1


def test_few_valued_outputs_are_left_to_the_discrete_score():
    with pytest.raises(ParameterError, match="'median'.*more than two values"):
        fit_median(np.tile([0.0, 1.0], (50, 1)), np.tile([1.0, 0.0], (50, 1)))
    # one continuous coordinate: the sign about its median is a threshold on the value, and its tails are lost
    rng = np.random.default_rng(2)
    with pytest.raises(ParameterError, match="two or more coordinates.*'projection'"):
        fit_median(rng.exponential(20.0, (500, 1)), 1.0 + rng.exponential(20.0, (500, 1)))
    with pytest.raises(ParameterError, match="two or more coordinates"):
        fit_median(np.c_[rng.normal(size=500), np.zeros(500)], np.c_[rng.normal(size=500), np.ones(500)])
    with pytest.raises(ParameterError, match="at least 2 calibration trials"):
        fit_median(np.zeros((1, 3)), np.zeros((5, 3)))


def _unresolved_contest(noise: str):
    """The default portfolio on an effect no candidate resolves at 4,000 calibration trials per side of 20
    coordinates (the median score pools coordinates; on one it declines)."""
    import dpaudit

    def side_by_side(records, rng, trials):
        draw = rng.laplace if noise == "laplace" else rng.normal
        return float(np.ravel(records)[0]) + draw(0.0, 60.0, (trials, 20))

    mechanism = dpaudit.from_batched_callable(side_by_side, 20, name=f"{noise}-parallel")
    pair = CanaryPair(mechanism, np.zeros(1), np.ones(1), np.ones(20), None, Relation.REPLACE_ONE, "dataset-pair")
    rng = np.random.default_rng(5)
    draw = rng.laplace if noise == "laplace" else rng.normal
    shape = (4_000, 20)
    cal_a, cal_b = draw(0.0, 60.0, shape), draw(0.0, 60.0, shape)  # no difference at all
    return choose_score(resolve_scores("auto"), pair, cal_a, cal_b, seed=0, delta=0.0, confidence=0.95,
                        planned=36_000)


def test_an_unresolved_contest_takes_the_median_under_heavy_tails_only():
    assert "median" in registered_scores()
    chosen, _, candidates = _unresolved_contest("laplace")
    applicable = [c for c in candidates if c.applicable]
    assert all(max(c.epsilon, 0.0) == 0.0 for c in applicable) and chosen.name == "median"
    chosen, _, _ = _unresolved_contest("gaussian")
    assert chosen.name != "median"

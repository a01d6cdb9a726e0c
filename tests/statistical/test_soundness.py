"""Soundness: certified bounds exceed the true epsilon in at most a beta fraction of audits.

Each test runs K independent seeded audits of a mechanism whose exact
epsilon is known (docs/theory.md 3.2, soundness requirement). To give the test
power, delta is large (0.1), where the best threshold has many counts and
the certified bound comes close to the truth; a negative control (point
estimates with the threshold chosen on the same data) must breach far more
often, showing that the test can fail.

Tolerance: with K audits the observed failure fraction of a sound estimator
is at most beta + 3 sqrt(beta (1 - beta) / K) except with probability ~0.1%
(binomial standard error); fixed seeds make each run deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.statistics.confidence import error_counts
from dpaudit.auditing.jobs.api import audit
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, gdp_lower_bound
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon, laplace_epsilon

pytestmark = pytest.mark.statistical

BETA = 0.05
DELTA = 0.1


def tolerance(audits: int) -> float:
    return BETA + 3 * math.sqrt(BETA * (1 - BETA) / audits)


def gaussian_scores(audits: int, trials: int, mu: float, seed: int):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((audits, trials)), rng.standard_normal((audits, trials)) + mu


def laplace_scores(audits: int, trials: int, eps0: float, seed: int):
    # Laplace mechanism, replace-one shift 2 * sensitivity, projection score
    rng = np.random.default_rng(seed)
    return rng.laplace(0.0, 1.0, (audits, trials)), rng.laplace(eps0, 1.0, (audits, trials))


@pytest.mark.parametrize("threshold", ["split", "union"])
@pytest.mark.parametrize("family", ["gaussian", "laplace"])
def test_threshold_strategies_are_sound(family, threshold):
    audits, trials = 300, 4000
    if family == "gaussian":
        mu = 1.0
        a, b = gaussian_scores(audits, trials, mu, seed=11)
        truth = float(gaussian_epsilon(DELTA, mu))
    else:
        eps0 = 1.0
        a, b = laplace_scores(audits, trials, eps0, seed=12)
        truth = float(laplace_epsilon(DELTA, eps0))
    bounds = np.array([epsilon_lower_bound(a[k], b[k], delta=DELTA, threshold=threshold, seed=k)
                       .epsilon_lower_bound for k in range(audits)])
    failures = np.mean(bounds > truth)
    assert failures <= tolerance(audits), (failures, truth, bounds.max())
    assert np.median(bounds) > 0.6 * truth  # the audits are close enough to the truth to have power


def test_gdp_bound_is_sound():
    audits, trials, mu = 300, 4000, 1.0
    a, b = gaussian_scores(audits, trials, mu, seed=13)
    bounds = np.array([gdp_lower_bound(a[k], b[k], seed=k).mu_lower_bound for k in range(audits)])
    assert np.mean(bounds > mu) <= tolerance(audits)
    assert np.median(bounds) > 0.85 * mu


def test_negative_control_naive_estimator_breaches():
    # Point estimates at the best threshold of the same data: the defect the estimators avoid.
    audits, trials, mu = 300, 4000, 1.0
    a, b = gaussian_scores(audits, trials, mu, seed=11)
    truth = float(gaussian_epsilon(DELTA, mu))
    grid = np.linspace(-3, 4, 400)
    naive = []
    for k in range(audits):
        fp, fn = error_counts(a[k], b[k], grid)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.log(np.maximum(1 - DELTA - fn / trials, 0) / (fp / trials))
        naive.append(np.nanmax(np.where(np.isfinite(values), values, np.nan)))
    assert np.mean(np.array(naive) > truth) > 3 * tolerance(audits)


@pytest.mark.parametrize("score", ["gaussian", "logistic"])
def test_fitted_scores_through_the_mechanism_are_sound(score):
    # replace-one Gaussian mechanism, sigma = 2: mu = 2 * sensitivity / sigma = 1
    mech = mechanisms.make("gaussian", dim=2, sigma=2.0)
    pair = CanarySpec(kind="input").build(mech, None)
    truth = float(gaussian_epsilon(DELTA, 1.0))
    audits = 120
    bounds = np.array([audit(pair=pair, trials=3000, delta=DELTA, score=score, seed=1000 + k).epsilon_lower_bound
                       for k in range(audits)])
    assert np.mean(bounds > truth) <= tolerance(audits)
    assert np.median(bounds) > 0.5 * truth

"""The statistical ceiling: what a threshold audit can certify with N trials (docs/theory.md 3.4).

When the score distributions are known (``FPR(t)`` and ``FNR(t)``), the
ceiling is the bound computed from the *expected* counts at the best
threshold, by the better of the two ways an audit certifies: Clopper-Pearson
upper bounds at ``beta / 2`` per error rate, or the conditional bound on
their ratio (``audit.statistics.conditional``).
A report shows it next to the audit so that statistical slack can be told
apart from attack weakness.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.stats import norm

from dpaudit.audit.statistics.conditional import conditional_epsilon, conditional_epsilon_estimate
from dpaudit.audit.statistics.confidence import check_confidence, check_delta, cp_upper
from dpaudit.mechanisms.validation import check_int

__all__ = ["exact_ceiling", "gaussian_ceiling", "statistical_ceiling"]


def statistical_ceiling(false_positive_rate: Callable[[np.ndarray], np.ndarray],
                        false_negative_rate: Callable[[np.ndarray], np.ndarray],
                        thresholds, *, trials: int, delta: float, confidence: float = 0.95) -> float:
    """Best epsilon bound from expected counts over ``thresholds`` (oracle threshold).

    Parameters
    ----------
    false_positive_rate, false_negative_rate : callable
        ``t -> P[score(M(S)) >= t]`` and ``t -> P[score(M(S')) < t]``, vectorised.
    thresholds : array_like
        Grid searched for the oracle threshold.
    trials : int
        Trials per dataset.
    """
    trials = check_int("trials", trials, minimum=1)
    delta = check_delta(delta)
    beta = 1 - check_confidence(confidence)
    grid = np.asarray(thresholds, dtype=float)
    fp = np.round(false_positive_rate(grid) * trials)
    fn = np.round(false_negative_rate(grid) * trials)
    fpr_hi, fnr_hi = cp_upper(fp, trials, beta / 2), cp_upper(fn, trials, beta / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        forward = np.log(np.maximum(1 - delta - fnr_hi, 0.0) / fpr_hi)
        backward = np.log(np.maximum(1 - delta - fpr_hi, 0.0) / fnr_hi)
    values = np.nan_to_num(np.maximum(forward, backward), nan=-np.inf)
    return max(float(values.max()), _conditional_ceiling(fp, fn, trials, delta, beta), 0.0)


def _conditional_ceiling(fp: np.ndarray, fn: np.ndarray, trials: int, delta: float, beta: float,
                         exact: int = 3) -> float:
    """The best conditional bound (``audit.statistics.conditional``) at expected counts: estimated over the grid, exact
    at the ``exact`` best thresholds of the estimate."""
    forward = conditional_epsilon_estimate(trials - fn, trials, fp, trials, delta=delta, failure=beta)
    backward = conditional_epsilon_estimate(trials - fp, trials, fn, trials, delta=delta, failure=beta)
    best = -np.inf
    for values, big, small in ((forward, trials - fn, fp), (backward, trials - fp, fn)):
        for k in np.argsort(values)[-exact:]:
            if np.isfinite(values[k]):
                best = max(best, conditional_epsilon(int(big[k]), trials, int(small[k]), trials, delta=delta,
                                                     failure=beta))
    return float(best)


def gaussian_ceiling(mu: float, *, trials: int, delta: float, confidence: float = 0.95) -> float:
    """The ceiling for scores ``N(0, 1)`` on ``S`` and ``N(mu, 1)`` on ``S'`` (docs/theory.md 3.4 table)."""
    grid = np.linspace(-6.0 - mu, mu + 9.0, 20_001)
    return statistical_ceiling(lambda t: norm.sf(t), lambda t: norm.cdf(t - mu), grid,
                               trials=trials, delta=delta, confidence=confidence)


def exact_ceiling(values: np.ndarray, mass_a: np.ndarray, mass_b: np.ndarray, *, trials: int, delta: float,
                  confidence: float = 0.95) -> float:
    """The ceiling of a threshold audit on a score with a known discrete law.

    ``values`` are sorted score values with probabilities ``mass_a`` under
    ``S`` and ``mass_b`` under ``S'`` (e.g. the exact likelihood ratio of a
    one-dimensional instance, ``accounting.instances.likelihood_ratio_law``).
    """
    tail_a = np.cumsum(mass_a[::-1])[::-1]  # P_A[score >= v_k]
    below_b = np.concatenate([[0.0], np.cumsum(mass_b)[:-1]])  # P_B[score < v_k]

    def fpr(t):
        return np.interp(t, values, tail_a)

    def fnr(t):
        return np.interp(t, values, below_b)
    return statistical_ceiling(fpr, fnr, values, trials=trials, delta=delta, confidence=confidence)

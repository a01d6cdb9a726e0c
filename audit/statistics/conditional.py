"""A joint bound on the ratio of two rates: the conditional (Fisher) test (docs/theory.md 3.2).

At one threshold, the epsilon bound is the log of a ratio of two rates,
``(p_big - delta) / p_small``: the probability of the same region of scores
under the dataset that makes it likely and under the other one. Bounding
each rate on its own (Clopper-Pearson at ``beta / 2`` each) pays twice for
the noise of the small count. Conditioning on the total count ``k_big +
k_small`` bounds the ratio in one step: given the total, ``k_small`` follows
Fisher's noncentral hypergeometric law, whose only parameter is the odds
ratio ``psi = [p_big / (1 - p_big)] / [p_small / (1 - p_small)]``. An exact
one-sided bound on ``psi`` holds at its level given every total, hence
unconditionally. Then

``(p_big - delta) / p_small = psi (1 - p_big) / (1 - p_small) (1 - delta / p_big)``

and three Clopper-Pearson bounds on the single rates (``p_big`` above and
below, ``p_small`` below) turn a bound on ``psi`` into one on the ratio;
they take :data:`RATE_SHARE` of the failure probability, ``psi`` the rest.
All four hold together with probability at least ``1 - failure`` (a union
bound), so the certified epsilon is sound whatever the rates.

References
----------
Fisher 1935 (the conditional test of a 2 x 2 table); Cornfield 1956 and
Thomas & Gart 1977 (exact confidence limits for the odds ratio, as R's
``fisher.test`` and SciPy's ``odds_ratio(kind="conditional")`` compute them).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from dpaudit.auditing.statistics.confidence import cp_lower, cp_upper

__all__ = ["RATE_SHARE", "conditional_epsilon", "conditional_epsilon_estimate", "conditional_parts",
           "odds_ratio_lower"]

RATE_SHARE = 0.1  #: the share of the failure probability the three single-rate bounds take (a third each)

_LOG_PHI = 120.0  #: search bracket of log(1 / psi): odds ratios up to e^120 either way


def odds_ratio_lower(big: int, n_big: int, small: int, n_small: int, failure: float) -> float:
    """Exact one-sided lower confidence bound on ``psi = odds_big / odds_small``, failing w.p. <= ``failure``.

    Given the total ``t = big + small``, ``small`` has the law
    ``P(x) ~ C(n_small, x) C(n_big, t - x) phi^x`` with ``phi = 1 / psi``.
    ``P_phi(small <= x_obs)`` falls as ``phi`` grows; the bound is ``1 / phi_hi``
    with ``phi_hi`` the largest ``phi`` at which that probability is still at
    least ``failure`` (found by bisection on ``log phi`` and rounded up, so the
    bound on ``psi`` is rounded down, then lowered by a relative
    ``1e-9 max(1, (n_big + n_small) / 1e6)``, above the rounding error of the
    log-gamma differences at every size). 0 when ``small`` is as large as the
    total allows (nothing rules out any ``psi``).

    Notes
    -----
    SciPy computes the same limit (``scipy.stats.contingency.odds_ratio(table,
    kind="conditional").confidence_interval(alternative="greater").low``); this
    one stays because it is 1,000-3,000 times faster on an audit's counts (a
    window of the support around the observed count instead of the whole
    hypergeometric law) and rounds down on purpose, where SciPy's root is
    rounded either way. tests/attacks/test_conditional.py compares the two.
    """
    big, small, n_big, n_small = int(big), int(small), int(n_big), int(n_small)
    total = big + small
    low, high = max(0, total - n_big), min(total, n_small)
    if small >= high:
        return 0.0
    x = np.arange(low, high + 1)
    log_weight = (gammaln(n_small + 1) - gammaln(x + 1) - gammaln(n_small - x + 1)
                  + gammaln(n_big + 1) - gammaln(total - x + 1) - gammaln(n_big - total + x + 1))

    def log_tail(log_phi: float, part: slice) -> float:  # log P(small <= x_obs) at phi = e^log_phi
        terms = log_weight[part] + x[part] * log_phi
        scaled = np.exp(terms - terms.max())
        inside = scaled[:max(small - low - (part.start or 0) + 1, 0)].sum()
        return float(np.log(inside) - np.log(scaled.sum())) if inside > 0 else -np.inf

    # The root is searched on the values within 64 (sqrt(x_obs) + 4) of the observed one, where the mass
    # is at the root; the answer is then checked on the whole support and raised until it holds there.
    reach = int(64 * (np.sqrt(small) + 4))
    window = slice(max(0, small - reach - low), min(x.size, small + reach - low + 1))
    target = np.log(failure)
    if log_tail(_LOG_PHI, slice(None)) >= target:
        return 0.0
    if log_tail(-_LOG_PHI, slice(None)) < target:
        return float(np.exp(_LOG_PHI))
    # where log_tail(log_phi) = target (bisection), then a little above it: phi_hi is rounded up
    hi = _falling_root(lambda log_phi: log_tail(log_phi, window) - target, -_LOG_PHI, _LOG_PHI, 1e-12) + 1e-10
    step = 1e-10
    while log_tail(hi, slice(None)) >= target:  # P falls as phi grows: a larger phi_hi only lowers the bound
        hi, step = min(hi + step, _LOG_PHI), 2 * step
    # lowered by more than the rounding error of the log-weights (differences of log-gamma values of size
    # n log n: about 1e-8 at n = 1e7), so never overstated
    return float(np.exp(-hi)) * (1 - 1e-9 * max(1.0, (n_big + n_small) / 1e6))


def _falling_root(function, low: float, high: float, tolerance: float) -> float:
    """Where a falling ``function`` crosses zero in ``[low, high]``, by bisection to ``tolerance``: the upper end
    of the last bracket (where the function is below zero), or an end of the interval when it does not cross.

    Bisection rather than SciPy's ``brentq``: ``scipy.optimize`` costs a process about 0.7 s to import, and
    every audit certifies through here; the answer is checked on the whole support afterwards either way.
    """
    while high - low > tolerance:
        middle = 0.5 * (low + high)
        if function(middle) >= 0:
            low = middle
        else:
            high = middle
    return high


def _combine(psi_lower: np.ndarray, big: np.ndarray, n_big: int, small: np.ndarray, n_small: int,
             delta: float, failure: float) -> np.ndarray:
    """``log(psi_lo (1 - p_big_hi) / (1 - p_small_lo) (1 - delta / p_big_lo))``, ``-inf`` where not positive."""
    share = failure * RATE_SHARE / 3
    big_hi, big_lo = cp_upper(big, n_big, share), cp_lower(big, n_big, share)
    small_lo = cp_lower(small, n_small, share)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = psi_lower * (1 - big_hi) / (1 - small_lo) * (1 - delta / big_lo)
        value = np.where(ratio > 0, np.log(np.where(ratio > 0, ratio, 1.0)), -np.inf)
    return np.nan_to_num(value, nan=-np.inf)


def conditional_epsilon(big: int, n_big: int, small: int, n_small: int, *, delta: float,
                        failure: float) -> float:
    """Certified ``log((p_big - delta) / p_small)``, failing w.p. <= ``failure`` (module docstring).

    ``big`` of ``n_big`` trials of one dataset and ``small`` of ``n_small``
    of the other fell in the region. ``-inf`` when nothing positive is certified.
    """
    return conditional_parts(big, n_big, small, n_small, delta=delta, failure=failure)["epsilon"]


def conditional_parts(big: int, n_big: int, small: int, n_small: int, *, delta: float,
                      failure: float) -> dict[str, float]:
    """:func:`conditional_epsilon` and the four bounds it is made of (for the result's record)."""
    psi = odds_ratio_lower(big, n_big, small, n_small, failure * (1 - RATE_SHARE))
    share = failure * RATE_SHARE / 3
    epsilon = float(_combine(np.array([psi]), np.array([big]), n_big, np.array([small]), n_small, delta,
                             failure)[0])
    return {"epsilon": epsilon, "odds_ratio_lower": psi,
            "big_rate_lower": float(cp_lower(np.array(big), n_big, share)),
            "big_rate_upper": float(cp_upper(np.array(big), n_big, share)),
            "small_rate_lower": float(cp_lower(np.array(small), n_small, share))}


def conditional_epsilon_estimate(big, n_big: int, small, n_small: int, *, delta: float,
                                 failure: float) -> np.ndarray:
    """A fast stand-in for :func:`conditional_epsilon` over many thresholds, for choosing one (not certifying).

    Treats ``small`` given the total as binomial with success probability
    ``p_small / (p_big + p_small)`` (the limit of the exact law for small
    rates), bounds it by Clopper-Pearson at the level of ``psi``, and applies
    the single rates' bounds as :func:`conditional_epsilon` does.
    """
    big, small = np.asarray(big, dtype=float), np.asarray(small, dtype=float)
    share_hi = cp_upper(small, big + small, failure * (1 - RATE_SHARE))
    # The certified bound bounds the odds ratio psi and turns it into the rates' ratio with the single
    # rates' bounds, (1 - p_big_hi) / (1 - p_small_lo) (_combine), where the true ratio has (1 - p_big) /
    # (1 - p_small). Their quotient, at the point estimates, is what that step loses: about 1 for small
    # rates, 0 for a region that holds every trial of either side (where this way certifies nothing).
    rate = failure * RATE_SHARE / 3
    with np.errstate(divide="ignore", invalid="ignore"):
        lost = ((1 - cp_upper(big, n_big, rate)) / (1 - big / n_big)
                * (1 - small / n_small) / (1 - cp_lower(small, n_small, rate)))
        odds_to_rates = np.nan_to_num(lost, nan=0.0, posinf=0.0)
        ratio = ((1 - share_hi) / share_hi * (n_small / n_big) * (1 - delta * n_big / big)  # (p_big - delta) / p_small
                 * odds_to_rates)
        value = np.where(ratio > 0, np.log(np.where(ratio > 0, ratio, 1.0)), -np.inf)
    return np.nan_to_num(value, nan=-np.inf)

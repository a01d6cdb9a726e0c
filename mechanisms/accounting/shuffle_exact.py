"""Exact privacy of shuffled randomized response, by enumerating the count of ones.

After the shuffle only the number of 1-reports carries information. With
the canary user's bit 1 in ``S`` and 0 in ``S'``, and ``k`` ones among the
other ``n - 1`` users, the count is ``C = R + B`` where
``R = Bin(k, p) + Bin(n - 1 - k, 1 - p)`` (``p = e^eps0 / (1 + e^eps0)``)
and ``B ~ Bern(p)`` under ``S``, ``Bern(1 - p)`` under ``S'``. Then
``delta(eps) = max(E_{e^eps}(P_S || P_S'), E_{e^eps}(P_S' || P_S))``, and
the mechanism's exact profile is the maximum over ``k`` (docs/theory.md 2.7).
The laws are computed in log space, so tails far below 1e-300 stay exact.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import logsumexp
from scipy.stats import binom

from dpaudit.mechanisms.accounting.profiles import nudge_up

__all__ = ["MAX_USERS", "clones_delta", "clones_epsilon", "count_laws", "shuffled_rr_delta", "shuffled_rr_epsilon"]

_TAIL = 1e-18
MAX_USERS = 500  # the enumeration costs O(n^3); beyond this the exact claim is not evaluated


def _log_convolve(log_x: np.ndarray, log_y: np.ndarray) -> np.ndarray:
    """``log(exp(log_x) * exp(log_y))`` for pmfs given in log space (a convolution)."""
    out = np.full(log_x.size + log_y.size - 1, -np.inf)
    for shift, value in enumerate(log_x):
        if value > -np.inf:
            out[shift:shift + log_y.size] = np.logaddexp(out[shift:shift + log_y.size], value + log_y)
    return out


@functools.lru_cache(maxsize=64)
def count_laws(n: int, epsilon0: float, ones: int) -> tuple[np.ndarray, np.ndarray]:
    """Log pmfs of the count of 1-reports under ``S`` (canary bit 1) and ``S'`` (canary bit 0)."""
    keep = 1.0 / (1.0 + math.exp(-epsilon0))
    log_keep, log_flip = math.log(keep), -epsilon0 + math.log(keep)  # log p, log(1 - p)
    kept = binom.logpmf(np.arange(ones + 1), ones, keep)
    flipped = binom.logpmf(np.arange(n - ones), n - 1 - ones, 1 - keep)
    rest = _log_convolve(kept, flipped)  # R, on 0..n-1
    shifted = np.concatenate([[-np.inf], rest])  # R + 1
    padded = np.concatenate([rest, [-np.inf]])  # R
    law_s = np.logaddexp(log_keep + shifted, log_flip + padded)
    law_s_prime = np.logaddexp(log_flip + shifted, log_keep + padded)
    return law_s, law_s_prime


@functools.lru_cache(maxsize=16)
def _all_laws(n: int, epsilon0: float) -> tuple[np.ndarray, np.ndarray]:
    """The count laws for every background ``k = 0..n-1``, stacked as rows."""
    rows = [count_laws.__wrapped__(n, epsilon0, k) for k in range(n)]
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _e_gamma(log_p: np.ndarray, log_q: np.ndarray, epsilon: float) -> np.ndarray:
    """``sum_c [p_c - e^eps q_c]_+`` along the last axis, computed term by term in log space."""
    larger = log_p > log_q + epsilon
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(larger, log_p + np.log1p(-np.exp(np.minimum(log_q + epsilon - log_p, 0.0))), -np.inf)
    return np.exp(logsumexp(terms, axis=-1))


def shuffled_rr_delta(epsilon: float, *, n: int, epsilon0: float, ones: int | None = None) -> float:
    """``delta(eps)`` of shuffled randomized response.

    Parameters
    ----------
    epsilon : float
    n : int
        Number of users.
    epsilon0 : float
        Local privacy of each report.
    ones : int, optional
        Ones among the other ``n - 1`` users (one instance); ``None`` takes the
        worst case over all backgrounds (the mechanism's exact profile).
    """
    if ones is None:
        law_s, law_s_prime = _all_laws(int(n), float(epsilon0))
    else:
        law_s, law_s_prime = count_laws(int(n), float(epsilon0), int(ones))
    worst = max(np.max(_e_gamma(law_s, law_s_prime, epsilon)), np.max(_e_gamma(law_s_prime, law_s, epsilon)))
    return float(min(worst, 1.0))


def shuffled_rr_epsilon(delta: float, *, n: int, epsilon0: float, ones: int | None = None) -> float:
    """The smallest ``eps`` with ``delta(eps) <= delta`` (bisection to 1e-12, rounded up); at most ``eps0``."""
    if shuffled_rr_delta(0.0, n=n, epsilon0=epsilon0, ones=ones) <= delta:
        return 0.0
    low, high = 0.0, float(epsilon0)  # randomized response is eps0-DP: delta(eps0) = 0
    while high - low > 1e-12:
        middle = 0.5 * (low + high)
        if shuffled_rr_delta(middle, n=n, epsilon0=epsilon0, ones=ones) <= delta:
            high = middle
        else:
            low = middle
    # final check-and-nudge: the starting end eps0 is taken on the theorem's word, not computed
    return float(nudge_up(high, lambda e: shuffled_rr_delta(float(e), n=n, epsilon0=epsilon0, ones=ones) <= delta))


@functools.lru_cache(maxsize=32)
def _clone_counts(n: int, epsilon0: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The likely values of ``C ~ Bin(n - 1, e^-eps0)``, their probabilities, and the mass left out.

    ``C`` outside the returned range has probability below ``2e-18``; it is
    counted in full (``E_gamma <= 1``), so the bound stays an upper bound.
    """
    clone = math.exp(-epsilon0)
    low = int(max(binom.ppf(_TAIL, n - 1, clone) - 1, 0))
    high = int(min(binom.isf(_TAIL, n - 1, clone) + 1, n - 1))
    c = np.arange(low, high + 1)
    weights = binom.pmf(c, n - 1, clone)
    return c, weights, max(1.0 - float(weights.sum()), 0.0)


def clones_delta(epsilon: float, *, n: int, epsilon0: float) -> float:
    """Numerical shuffle-amplification bound for any ``eps0``-LDP randomizer (Feldman, McMillan, Talwar 2021).

    "Hiding among the clones", Thm 3.2 and its numerical evaluation: the
    shuffled reports of ``n`` users are a post-processing of ``(C, A)``,
    ``C ~ Bin(n - 1, e^-eps0)`` clones of the canary's report, ``A`` of them
    showing one input; given ``C = c``, ``P_c = alpha Bin(c, 1/2) + (1 - alpha)(Bin(c, 1/2) + 1)``
    and ``Q_c`` the mirror image, ``alpha = e^eps0 / (1 + e^eps0)``. The
    likelihood ratio of ``P_c`` to ``Q_c`` decreases in ``a``, so
    ``E_gamma(P_c || Q_c)`` is a difference of binomial CDFs at one cutoff,
    and ``E_gamma(P || Q) = sum_c P[C = c] E_gamma(P_c || Q_c)``; by symmetry
    the other direction is equal. Valid for every ``n`` and ``eps0``
    (docs/theory.md 2.7).
    """
    gamma = math.exp(epsilon)
    alpha = 1.0 / (1.0 + math.exp(-epsilon0))
    if gamma >= alpha / (1 - alpha):  # e^eps >= e^eps0: no set separates P from Q by more
        return 0.0
    # P_c(a) > gamma Q_c(a)  <=>  a / (c + 1 - a) < t  <=>  a < beta (c + 1)
    t = (alpha - gamma * (1 - alpha)) / (gamma * alpha - (1 - alpha))
    beta = t / (1 + t)
    c, weights, outside = _clone_counts(int(n), float(epsilon0))
    cutoff = np.ceil(beta * (c + 1)) - 1  # the largest a with a < beta (c + 1)
    upper, lower = binom.cdf(cutoff, c, 0.5), binom.cdf(cutoff - 1, c, 0.5)
    p_mass = alpha * upper + (1 - alpha) * lower
    q_mass = (1 - alpha) * upper + alpha * lower
    return float(min(np.sum(weights * np.maximum(p_mass - gamma * q_mass, 0.0)) + outside, 1.0))


def clones_epsilon(delta: float, *, n: int, epsilon0: float) -> float:
    """The smallest ``eps`` with :func:`clones_delta` at most ``delta`` (bisection to 1e-8, rounded up)."""
    if clones_delta(0.0, n=n, epsilon0=epsilon0) <= delta:
        return 0.0
    low, high = 0.0, float(epsilon0)
    while high - low > 1e-8:
        middle = 0.5 * (low + high)
        if clones_delta(middle, n=n, epsilon0=epsilon0) <= delta:
            high = middle
        else:
            low = middle
    return float(nudge_up(high, lambda e: clones_delta(float(e), n=n, epsilon0=epsilon0) <= delta))

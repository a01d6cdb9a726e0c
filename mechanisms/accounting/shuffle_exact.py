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

__all__ = ["MAX_USERS", "count_laws", "shuffled_rr_delta", "shuffled_rr_epsilon"]

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
    return high

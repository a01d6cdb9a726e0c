"""E_gamma contraction bounds for projected noisy iterations (Asoodeh, Diaz, Calmon).

Functions return ``log delta`` or ``delta`` on an epsilon grid, and the
matching epsilon for a delta by bisection (rounded up).

References
----------
Asoodeh, Diaz, Calmon, "Contraction of E_gamma-divergence and its
applications to privacy" (arXiv:2012.11035): Thm 3 (contraction
coefficients), Prop. 1 (projected Gaussian kernel), Thm 4 (PNSGD per index),
Thm 5 and eqs. (17)-(20) (randomly stopped PNSGD; docs/theory.md 2.5 corrects the
minimum over the index in (17) to a maximum).
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.mechanisms.accounting.profiles import bisect_decreasing, gaussian_log_delta

__all__ = [
    "gaussian_index_log_delta",
    "laplace_index_log_delta",
    "log_theta",
    "stopped_log_delta",
    "epsilon_for",
]


def log_theta(epsilon, r):
    """``log theta_{e^eps}(r)``: the Gaussian kernel's contraction coefficient (Prop. 1)."""
    return gaussian_log_delta(epsilon, r)


def gaussian_index_log_delta(epsilon, *, n: int, index: int, shift_ratio: float,
                             diameter_ratio: float):
    """``log delta_t(eps)`` for PNSGD with Gaussian noise at index ``t`` (Asoodeh et al. Thm 4).

    ``delta_t(eps) = theta_{e^eps}(psi / sigma_t) * prod_{j=t+1}^{n} theta_{e^eps}(D_j / sigma_j)``
    with ``shift_ratio = psi / sigma_t`` (``2 eta L / (eta sigma)``) and
    ``diameter_ratio = D / sigma_j`` (``diam(Psi(K)) / (eta sigma)``).
    """
    eps = np.asarray(epsilon, dtype=float)
    later = n - index
    out = log_theta(eps, shift_ratio)
    if later > 0:
        out = out + later * log_theta(eps, diameter_ratio)
    return out


def stopped_log_delta(epsilon, *, n: int, shift_ratio: float, diameter_ratio: float):
    """``log delta`` of randomly stopped PNSGD, worst (first) index (Asoodeh et al. Thm 5, corrected).

    ``delta = (1/n) theta(psi/sigma) sum_{k=0}^{n-1} theta(D/sigma)^k``: the
    finite geometric sum of eq. (17) with the maximum over the index (it
    is attained at the first index), bounded above by the closed form
    ``theta(psi/sigma) / (n (1 - theta(D/sigma)))`` of eq. (18). Values above 1
    are clamped to 1 by the caller (vacuous bound).
    """
    eps = np.asarray(epsilon, dtype=float)
    first = log_theta(eps, shift_ratio)
    log_ratio = log_theta(eps, diameter_ratio)
    ratio = np.exp(log_ratio)
    with np.errstate(divide="ignore", invalid="ignore"):
        # log sum_{k<n} r^k = log((1 - r^n)/(1 - r)); r -> 1 gives log n
        geometric = np.where(
            ratio < 1 - 1e-12,
            np.log(-np.expm1(n * log_ratio)) - np.log1p(-ratio),
            math.log(n))
    return first + geometric - math.log(n)


def laplace_index_log_delta(epsilon, *, n: int, index: int, epsilon_shift: float,
                            epsilon_diameter: float):
    """``log delta_t(eps)`` for PNSGD with Laplace noise on an interval [derived, docs/theory.md 2.5].

    ``delta_t(eps) = [1 - e^{(eps - 2L/v)/2}]_+ [1 - e^{(eps - (b-a)/(eta v))/2}]_+^{n-t}``
    with ``epsilon_shift = 2L/v`` and ``epsilon_diameter = (b-a)/(eta v)``: the
    Laplace profile of the canary's step times the Laplace kernel's
    contraction coefficient for each later step (Asoodeh et al. Thm 3).
    """
    eps = np.asarray(epsilon, dtype=float)

    def log_profile(eps0: float):
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(-np.expm1((eps - eps0) / 2.0), 0.0))

    out = log_profile(epsilon_shift)
    later = n - index
    if later > 0:
        out = out + later * log_profile(epsilon_diameter)
    return out


def epsilon_for(log_delta_fn, delta: float, upper: float = 200.0) -> float:
    """Smallest ``eps >= 0`` with ``exp(log_delta_fn(eps)) <= delta``, rounded up (checked in linear space)."""
    return float(bisect_decreasing(log_delta_fn, np.array(math.log(delta)), np.array(upper),
                                   holds=lambda e: np.exp(log_delta_fn(e)) <= delta))

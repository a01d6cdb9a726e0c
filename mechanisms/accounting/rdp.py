"""Renyi DP of the Gaussian, Laplace and subsampled Gaussian mechanisms.

All functions return ``eps(alpha)`` (the RDP curve) on an array of orders.

References
----------
Mironov, "Renyi Differential Privacy", CSF 2017, Table II (Gaussian, Laplace).
Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian
Mechanism", 2019, Sections 3.2 (integer orders) and 3.3 (fractional orders).

Sampling without replacement (replace-one) is dp-accounting's
(``accounting.tight.wor_gaussian_rdp``, Wang, Balle, Kasiviswanathan 2019,
Thm 27); no copy of it lives here.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, log_ndtr, logsumexp

from dpaudit.core.validation import check_probability, check_real

__all__ = [
    "DEFAULT_ORDERS",
    "gaussian_rdp",
    "laplace_rdp",
    "subsampled_gaussian_rdp",
]

#: Orders used by the claims: dense near 1, steps of 0.05 to 12, integers to
#: 256, then powers of two (a coarser grid only loosens the converted bound).
DEFAULT_ORDERS = np.unique(np.round(np.concatenate([
    1.0 + np.geomspace(1e-3, 0.1, 20),
    np.arange(1.1, 12.0, 0.05),
    np.arange(12.0, 257.0),
    2.0 ** np.arange(9, 15),
]), 10))


def _orders(alpha) -> np.ndarray:
    orders = np.atleast_1d(np.asarray(alpha, dtype=float))
    if np.any(~(orders > 1)):
        raise ValueError(f"RDP orders must be > 1, got alpha={orders[~(orders > 1)][0]}")
    return orders


def gaussian_rdp(alpha, mu):
    """``D_alpha(N(0,s^2) || N(Delta,s^2)) = alpha mu^2 / 2`` with ``mu = Delta/s`` (Mironov Table II)."""
    return _orders(alpha) * float(mu) ** 2 / 2.0


def laplace_rdp(alpha, epsilon0):
    """RDP of the Laplace mechanism with ``eps0 = Delta/b`` (Mironov 2017, Table II).

    ``r(alpha) = eps0 + log(1 + (alpha-1)(e^{(1-2 alpha) eps0} - 1)/(2 alpha - 1)) / (alpha - 1)``
    (docs/theory.md 2.2; equal to Mironov's form, rearranged for stability).
    """
    orders = _orders(alpha)
    eps0 = check_real("epsilon0", epsilon0, nonnegative=True)
    inner = (orders - 1) * np.expm1((1 - 2 * orders) * eps0) / (2 * orders - 1)
    return eps0 + np.log1p(inner) / (orders - 1)


def _log_abs_binom(alpha: float, k: np.ndarray) -> np.ndarray:
    """``log |C(alpha, k)|`` for real ``alpha`` and integer ``k >= 0``."""
    # |C(alpha, k)| = |Gamma(alpha+1)| / (Gamma(k+1) |Gamma(alpha-k+1)|); gammaln gives log|Gamma|
    return gammaln(alpha + 1) - gammaln(k + 1) - gammaln(alpha - k + 1)


def _binom_sign(alpha: float, k: np.ndarray) -> np.ndarray:
    """Sign of the generalised binomial ``C(alpha, k)``: negative for ``k > alpha`` with odd ``floor``."""
    sign = np.ones(k.shape)
    beyond = k > alpha
    # C(alpha,k) = prod_{j<k} (alpha-j)/(k!) ; factors alpha-j < 0 for j > alpha
    negatives = np.where(beyond, k - np.floor(alpha) - 1, 0)
    return np.where(negatives % 2 == 1, -1.0, sign)


def _log_a_integer(q: float, z: float, alpha: int) -> float:
    # A_alpha = sum_k C(alpha,k) (1-q)^{alpha-k} q^k exp((k^2-k)/(2 z^2))   [MTZ 2019, Sec. 3.2]
    k = np.arange(alpha + 1, dtype=float)
    terms = (_log_abs_binom(float(alpha), k) + (alpha - k) * math.log1p(-q) + k * math.log(q)
             + (k * k - k) / (2 * z * z))
    return float(logsumexp(terms))


def _log_erfc(x):
    return math.log(2.0) + log_ndtr(-x * math.sqrt(2.0))


#: Terms of the fractional-order series computed at once (the series is summed in order, term by term)
_SERIES_BLOCK = 64
_SERIES_TERMS = 10_001  #: at most this many terms (the series has converged far earlier)


def _series_terms(q: float, z: float, alpha: float, first: int, count: int):
    """``(sign, log_s0, log_s1)`` of terms ``first .. first + count - 1`` of the series of MTZ Sec. 3.3."""
    i = np.arange(first, first + count, dtype=float)
    sign = _binom_sign(alpha, i)
    log_coef = _log_abs_binom(alpha, i)
    j = alpha - i
    z0 = z * z * math.log(1 / q - 1) + 0.5
    log_t0 = log_coef + i * math.log(q) + j * math.log1p(-q)
    log_t1 = log_coef + j * math.log(q) + i * math.log1p(-q)
    log_e0 = math.log(0.5) + _log_erfc((i - z0) / (math.sqrt(2) * z))
    log_e1 = math.log(0.5) + _log_erfc((z0 - j) / (math.sqrt(2) * z))
    log_s0 = log_t0 + (i * i - i) / (2 * z * z) + log_e0
    log_s1 = log_t1 + (j * j - j) / (2 * z * z) + log_e1
    return sign, log_s0, log_s1


def _log_a_fractional(q: float, z: float, alpha: float) -> float:
    # Two half-line integrals split at z0, expanded in generalised binomial series
    # [MTZ 2019, Sec. 3.3]; terms keep the signs of C(alpha, i). The terms are computed a block at a time
    # and added in order, up to the first whose two parts are both below e^-30.
    log_a0, log_a1 = -math.inf, -math.inf
    first = 0
    while first < _SERIES_TERMS:
        count = min(_SERIES_BLOCK, _SERIES_TERMS - first)
        sign, log_s0, log_s1 = _series_terms(q, z, alpha, first, count)
        small = np.flatnonzero(np.maximum(log_s0, log_s1) < -30)
        last = int(small[0]) if small.size else count - 1
        for term in range(last + 1):
            log_a0 = _log_add_signed(log_a0, float(log_s0[term]), float(sign[term]))
            log_a1 = _log_add_signed(log_a1, float(log_s1[term]), float(sign[term]))
        if small.size:
            break
        first += count
    return float(np.logaddexp(log_a0, log_a1))


def _log_add_signed(log_x: float, log_y: float, sign: float) -> float:
    if sign > 0:
        return float(np.logaddexp(log_x, log_y))
    if log_y > log_x:  # series truncation guard: never take log of a negative number
        return -math.inf
    if log_y == -math.inf:
        return log_x
    return log_x + math.log1p(-math.exp(log_y - log_x))


def subsampled_gaussian_rdp(alpha, *, sample_rate: float, noise_multiplier: float, steps: int = 1):
    """RDP of ``steps`` compositions of the Poisson-subsampled Gaussian mechanism.

    Add/remove neighbours; ``noise_multiplier = z`` is the noise standard
    deviation over the sensitivity. ``eps(alpha) = steps * log(A_alpha)/(alpha-1)``
    with ``A_alpha = E_{x~N(0,z^2)}[((1-q) + q exp((2x-1)/(2z^2)))^alpha]``
    (Mironov, Talwar, Zhang 2019, Thm 5 / Sec. 3.2-3.3).

    Notes
    -----
    dp-accounting computes the same curve (``RdpAccountant`` with a
    ``PoissonSampledDpEvent``); this series stays because it is exact at
    fractional orders too (the signed generalised-binomial series of MTZ
    Sec. 3.3), and the claims use a dense grid of them (:data:`DEFAULT_ORDERS`).
    On the 227 fractional orders of that grid below 12 (dp-accounting 0.6),
    the library's values were up to 1.63 times these (q = 0.1, z = 1) and,
    where its series does not converge, infinite (34 orders at q = 0.5,
    z = 1; 18 at q = 0.1, z = 1). At integer orders the two agree
    (tests/accounting/test_profiles_rdp.py compares them on a grid of rates
    and noise multipliers).
    """
    orders = _orders(alpha)
    q = check_probability("sample_rate", sample_rate)
    z = check_real("noise_multiplier", noise_multiplier, positive=True)
    if q == 0:
        return np.zeros(orders.shape)
    if q == 1.0:
        return steps * orders / (2 * z * z)
    out = np.empty(orders.shape)
    for index, order in enumerate(orders):
        if np.isinf(order):
            out[index] = np.inf
        elif float(order).is_integer():
            out[index] = _log_a_integer(q, z, int(order)) / (order - 1)
        else:
            out[index] = _log_a_fractional(q, z, float(order)) / (order - 1)
    return steps * out

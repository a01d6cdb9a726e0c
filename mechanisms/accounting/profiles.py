"""Exact privacy profiles ``delta(eps)`` of the Gaussian and Laplace mechanisms.

Computed in log space (``scipy.special.log_ndtr``) so that profiles of
1e-300 stay exact and ``eps = 50`` neither overflows nor gives NaN.
Inverses are found by vectorised bisection and rounded up (the returned
epsilon is never below the true one: these are upper bounds). Bisection
compares ``log delta`` with ``log(delta)``, and two roundings (``log`` of the
target, ``exp`` of the profile) can leave ``delta(eps)`` one ulp above the
target; a final check-and-nudge step (:func:`nudge_up`) tests the promise as
stated, in linear space, and raises epsilon until it holds, whatever the
special functions of the installed scipy return.

References
----------
Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy",
ICML 2018, Thm 8.
Asoodeh, Diaz, Calmon, "Contraction of E_gamma-divergence", ``theta_gamma``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx, log_ndtr

__all__ = [
    "bisect_decreasing",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "laplace_delta",
    "laplace_epsilon",
    "nudge_up",
    "theta_gamma",
]


def gaussian_log_delta(epsilon, mu):
    """``log delta(eps)`` of mu-GDP (Balle & Wang 2018, Thm 8), stable in the tails."""
    eps, mu = np.broadcast_arrays(np.asarray(epsilon, dtype=float), np.asarray(mu, dtype=float))
    out = np.full(eps.shape, -np.inf)
    positive = mu > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(positive, mu, 1.0)
        # delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)   [Balle & Wang Thm 8]
        upper, lower = -eps / m + m / 2, -eps / m - m / 2
        log_a = log_ndtr(upper)
        gap = eps + log_ndtr(lower) - log_a  # log of e^eps Phi(lower) / Phi(upper), <= 0
        # In the lower tail both logs are ~ -upper^2 / 2 and nearly cancel, so
        # log_ndtr's rounding (one ulp of 5e3 at upper = -100) would swamp a gap of
        # 1e-4. With Phi(-t) = erfcx(t / sqrt 2) exp(-t^2 / 2) / 2 the Gaussian
        # factors cancel exactly (eps + (upper^2 - lower^2) / 2 = 0), leaving a
        # ratio of erfcx values, each accurate to a few ulps.
        tail = upper < 0
        tail_gap = np.log(erfcx(-np.where(tail, lower, -2.0) / np.sqrt(2))
                          / erfcx(-np.where(tail, upper, -1.0) / np.sqrt(2)))  # (placeholders off the tail)
        gap = np.minimum(np.where(tail, tail_gap, gap), 0.0)
        finite = np.where(np.isneginf(log_a), -np.inf, log_a + np.log(-np.expm1(gap)))
    out = np.where(positive & np.isfinite(mu), finite, out)
    out = np.where(np.isinf(mu), 0.0, out)  # mu = inf: no privacy
    return out[()] if out.ndim == 0 else out


def gaussian_delta(epsilon, mu):
    """``delta(eps)`` of the Gaussian mechanism with ``mu = Delta / s`` (Balle & Wang Thm 8).

    Parameters
    ----------
    epsilon : array_like
        Epsilon values (any real; negative epsilons are allowed).
    mu : array_like
        Sensitivity over noise standard deviation, ``>= 0`` (``inf`` allowed).

    Returns
    -------
    numpy.ndarray
        ``delta(eps)``, broadcast over the inputs.
    """
    return np.exp(gaussian_log_delta(epsilon, mu))


def theta_gamma(gamma, r):
    """``theta_gamma(r) = Q(log(gamma)/r - r/2) - gamma Q(log(gamma)/r + r/2)``.

    Asoodeh, Diaz, Calmon, eq. (9): the ``E_gamma`` contraction coefficient of
    the Gaussian kernel on inputs at distance ``r`` (in noise units). It is the
    Gaussian profile at ``eps = log(gamma)``.
    """
    return gaussian_delta(np.log(np.asarray(gamma, dtype=float)), r)


def nudge_up(epsilon, holds, attempts: int = 64):
    """The final check-and-nudge step of an inversion rounded up.

    Each finite ``epsilon`` where ``holds(epsilon)`` is false is raised by a
    step that doubles from one ulp (of ``max(epsilon, 1e-3)``) until the check
    passes; one still failing after ``attempts`` steps becomes ``inf``, which
    is always safe for an upper bound.

    Parameters
    ----------
    epsilon : array_like
        Candidate answers of a rounded-up inversion.
    holds : callable
        Vectorised promise, ``holds(eps) -> bool array``, non-decreasing in
        ``eps`` (for example ``delta(eps) <= delta``).
    attempts : int
        Doubling steps before giving up.

    Returns
    -------
    numpy.ndarray or float
        The smallest nudged values that pass the check, shaped as ``epsilon``.

    References
    ----------
    docs/theory.md 2.1 (profiles are inverted by bisection, rounded up).
    """
    out = np.array(epsilon, dtype=float)
    step = np.spacing(np.maximum(np.abs(out), 1e-3))
    failing = np.isfinite(out) & ~np.asarray(holds(out), dtype=bool)
    for _ in range(attempts):
        if not failing.any():
            break
        out = np.where(failing, out + step, out)
        step = np.where(failing, 2.0 * step, step)
        failing = failing & ~np.asarray(holds(out), dtype=bool)
    out = np.where(failing, np.inf, out)
    return out[()] if out.ndim == 0 else out


def bisect_decreasing(log_delta_of_eps, log_delta_target, upper, iterations: int = 100, holds=None):
    """Smallest ``eps >= 0`` with ``log_delta(eps) <= target``, vectorised, rounded up.

    ``log_delta_of_eps`` must be non-increasing in ``eps``. Where the target
    is met at ``eps = 0`` the answer is 0; where it is not met at ``upper``
    the answer is ``inf``. Stops early once every bracket is within a relative
    ``1e-15`` (the upper end is returned, so the answer stays rounded up).
    ``holds`` (``eps -> bool array``), when given, is the promise as the
    caller states it (``delta(eps) <= delta`` in linear space); the answer is
    then passed through :func:`nudge_up` with it.
    """
    target = np.asarray(log_delta_target, dtype=float)
    upper = np.broadcast_to(np.asarray(upper, dtype=float), target.shape).copy()
    low = np.zeros(target.shape)
    high = upper.copy()
    at_zero = log_delta_of_eps(low) <= target
    unreachable = log_delta_of_eps(high) > target
    for _ in range(iterations):
        if np.all(high - low <= 1e-15 * np.maximum(high, 1.0)):  # as fine as a float lets it be: stop
            break
        mid = 0.5 * (low + high)
        ok = log_delta_of_eps(mid) <= target
        high = np.where(ok, mid, high)
        low = np.where(ok, low, mid)
    out = np.where(at_zero, 0.0, np.where(unreachable, np.inf, high))
    if holds is not None:
        out = np.asarray(nudge_up(out, holds))
    return out[()] if out.ndim == 0 else out


def gaussian_epsilon(delta, mu):
    """Smallest ``eps >= 0`` with ``delta(eps) <= delta`` for mu-GDP (rounded up)."""
    delta, mu = np.broadcast_arrays(np.asarray(delta, dtype=float), np.asarray(mu, dtype=float))
    with np.errstate(divide="ignore"):
        target = np.log(delta)
    # eps <= mu^2/2 + mu sqrt(2 log(1/delta)) + 1 brackets the root (Gaussian tail bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = mu**2 / 2 + mu * np.sqrt(2 * np.maximum(-target, 0.0) + 2.0) + 1.0
    upper = np.where(np.isfinite(upper), upper, 1e6)
    return bisect_decreasing(lambda e: gaussian_log_delta(e, mu), target, upper,
                             holds=lambda e: gaussian_delta(e, mu) <= delta)


def laplace_delta(epsilon, epsilon0):
    """``delta(eps) = [1 - exp((eps - eps0)/2)]_+`` of the Laplace mechanism.

    docs/theory.md 2.1 [derived, checked numerically]; ``eps0 = Delta / b``.
    """
    eps, eps0 = np.broadcast_arrays(np.asarray(epsilon, dtype=float), np.asarray(epsilon0, dtype=float))
    out = np.maximum(-np.expm1((eps - eps0) / 2.0), 0.0)
    return out[()] if out.ndim == 0 else out


def laplace_epsilon(delta, epsilon0):
    """Inverse of :func:`laplace_delta`: ``eps = [eps0 + 2 log(1 - delta)]_+``."""
    delta, eps0 = np.broadcast_arrays(np.asarray(delta, dtype=float), np.asarray(epsilon0, dtype=float))
    with np.errstate(divide="ignore"):
        out = np.maximum(eps0 + 2.0 * np.log1p(-delta), 0.0)
    out = np.asarray(nudge_up(out, lambda e: laplace_delta(e, eps0) <= delta))  # rounded up: checked
    return out[()] if out.ndim == 0 else out

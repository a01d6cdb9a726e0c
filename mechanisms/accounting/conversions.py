"""RDP -> (eps, delta) conversions, minimised over the orders.

References
----------
Mironov, "Renyi Differential Privacy", CSF 2017, Prop. 3 (= Feldman et al.
2018, Lemma 14).
Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020, Prop. 12 (= Balle et al., "Hypothesis Testing Interpretations
and Renyi Differential Privacy", AISTATS 2020, Thm 21).
docs/theory.md 2.3: the optimal conversion for a single order [derived].
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.mechanisms.accounting.profiles import bisect_decreasing

__all__ = [
    "cks_delta",
    "cks_epsilon",
    "mironov_delta",
    "mironov_epsilon",
    "optimal_delta",
    "optimal_epsilon",
]


def _pair(orders, rdp):
    orders = np.atleast_1d(np.asarray(orders, dtype=float))
    rdp = np.broadcast_to(np.asarray(rdp, dtype=float), orders.shape)
    keep = np.isfinite(rdp) & (orders > 1)
    return orders[keep], rdp[keep]


def _degenerate(a: np.ndarray, r: np.ndarray, *, no_order: float) -> float | None:
    """The answer when no finite order is left (``no_order``) or the RDP is identically zero (0)."""
    if a.size == 0:
        return no_order
    if np.all(r == 0):  # D_alpha = 0 at some order means identical output laws
        return 0.0
    return None


def mironov_epsilon(delta: float, orders, rdp) -> float:
    """``min_alpha r(alpha) + log(1/delta)/(alpha-1)`` (Mironov 2017, Prop. 3)."""
    a, r = _pair(orders, rdp)
    if (special := _degenerate(a, r, no_order=math.inf)) is not None:
        return special
    return float(max(np.min(r + math.log(1 / delta) / (a - 1)), 0.0))


def mironov_delta(epsilon: float, orders, rdp) -> float:
    """Inverse of Prop. 3: ``min_alpha exp(-(alpha-1)(eps - r(alpha)))``, capped at 1."""
    a, r = _pair(orders, rdp)
    if (special := _degenerate(a, r, no_order=1.0)) is not None:
        return special
    return float(min(np.exp(np.min(-(a - 1) * (epsilon - r))), 1.0))


def cks_epsilon(delta: float, orders, rdp) -> float:
    """``min_alpha r + log(1 - 1/alpha) - (log delta + log alpha)/(alpha - 1)``.

    Canonne, Kamath, Steinke 2020, Prop. 12; Balle et al. 2020, Thm 21.
    """
    a, r = _pair(orders, rdp)
    if (special := _degenerate(a, r, no_order=math.inf)) is not None:
        return special
    eps = r + np.log1p(-1 / a) - (math.log(delta) + np.log(a)) / (a - 1)
    return float(max(np.min(eps), 0.0))


def cks_delta(epsilon: float, orders, rdp) -> float:
    """Inverse of Prop. 12: ``delta = exp((alpha-1)(r - eps + log(1 - 1/alpha)) - log alpha)``."""
    a, r = _pair(orders, rdp)
    if (special := _degenerate(a, r, no_order=1.0)) is not None:
        return special
    log_delta = (a - 1) * (r - epsilon + np.log1p(-1 / a)) - np.log(a)
    return float(np.exp(min(float(np.min(log_delta)), 0.0)))  # capped at 1 before exp: no overflow


def _max_p(q: np.ndarray, alpha: float, budget: float) -> np.ndarray:
    """Largest ``p >= q`` with ``p^a q^{1-a} + (1-p)^a (1-q)^{1-a} <= budget`` (bisection)."""
    def constraint(p):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            first = np.exp(alpha * np.log(p) + (1 - alpha) * np.log(q))
            second = np.where(p < 1, np.exp(alpha * np.log1p(-p) + (1 - alpha) * np.log1p(-q)), 0.0)
        return first + second

    low, high = q.copy(), np.ones_like(q)
    feasible_one = constraint(high) <= budget
    for _ in range(80):
        mid = 0.5 * (low + high)
        ok = constraint(mid) <= budget
        low = np.where(ok, mid, low)
        high = np.where(ok, high, mid)
    return np.where(feasible_one, 1.0, high)  # rounded up: an upper bound on delta


def optimal_delta(epsilon: float, alpha: float, rdp: float, grid: int = 600) -> float:
    """Optimal single-order conversion (docs/theory.md 2.3, [derived]).

    ``delta*(eps) = max_{p,q} { p - e^eps q : p^a q^{1-a} + (1-p)^a (1-q)^{1-a} <= e^{(a-1) r} }``:
    the largest ``E_{e^eps}`` between two Bernoulli laws (the output of any
    test) whose Renyi divergence of order ``a`` is at most ``r``. For each
    ``q`` on a log-spaced grid the largest feasible ``p`` is found by
    bisection (rounded up); the maximum over the grid is refined twice
    around the best point (the objective is unimodal in ``q``), which
    reproduces docs/theory.md's check value 0.2149 to 1e-4.
    """
    if not math.isfinite(rdp):
        return 1.0
    budget = math.exp(min((alpha - 1) * rdp, 700.0))
    q = np.concatenate([[0.0], np.geomspace(1e-300, 1.0, grid)])
    with np.errstate(over="ignore"):
        values = _max_p(q, alpha, budget) - math.exp(epsilon) * q
    best_value = float(values.max())
    for _ in range(2):
        best = int(np.argmax(values))
        q = np.linspace(q[max(best - 1, 0)], q[min(best + 1, q.size - 1)], grid)
        with np.errstate(over="ignore"):
            values = _max_p(q, alpha, budget) - math.exp(epsilon) * q
        best_value = max(best_value, float(values.max()))
    return float(min(max(best_value, 0.0), 1.0))


def optimal_epsilon(delta: float, alpha: float, rdp: float) -> float:
    """Smallest ``eps >= 0`` with :func:`optimal_delta` ``<= delta`` (rounded up)."""
    if not math.isfinite(rdp):
        return math.inf
    upper = rdp + math.log(1 / delta) / (alpha - 1) + 1.0  # Mironov's bound brackets it
    return float(bisect_decreasing(
        lambda e: np.log(np.maximum([optimal_delta(float(x), alpha, rdp) for x in np.atleast_1d(e)], 1e-300)),
        np.array([math.log(delta)]), np.array([upper]), iterations=30,
        holds=lambda e: np.array([optimal_delta(float(x), alpha, rdp) <= delta for x in np.atleast_1d(e)]))[0])

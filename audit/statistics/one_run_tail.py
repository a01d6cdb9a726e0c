"""The one-run tail bound of Xiang, Wang, Xiao, Tian and Wang (2025) in the Gaussian family, docs/theory.md 9.

The game of :mod:`dpaudit.auditing.statistics.one_run`: ``m`` canaries, each included with
probability 1/2; the auditor guesses the ``r`` canaries it is most confident
about (the top and bottom scores) and makes ``u`` errors. Xiang et al. model
the audit as ``m`` uses of the null mechanism's channel read by the optimal
decoder, of which the ``r`` most confident are released: with ``W`` the score
quantile of the most confident guess left out, ``W ~ Beta(m - r, r + 1)``, and
``gbar(w)`` the optimal decoder's mean error rate above quantile ``w``,

    P[errors <= u] = E_W[ BinCDF(u; r, gbar(W)) ]      (r = m: BinCDF(u; m, e_opt)).

For mu-GDP the channel is N(0, 1) against N(mu, 1) and everything is in
closed form: with ``z`` the outcome centred between the two means, a guess's
confidence is ``|z|``; above ``|z| = s`` the error mass is ``Phi(-(s + mu/2))``
and the mass ``Phi(-(s + mu/2)) + Phi(-(s - mu/2))``. ``BinCDF(u; r, gbar(w))``
increases with ``w``, so the average over ``K`` cells of equal Beta probability
taken at each cell's upper end bounds the expectation from above (the last
cell counts as 1): the p-value computed is never smaller than the exact one.
mu-GDP is rejected when it falls below the failure probability; rejection is
monotone in mu, and the certified mu, rounded down, is the largest rejected.

The bound is the paper's: it holds for mechanisms in the Gaussian family whose
canaries act as separate uses of the channel, which the paper's transmission
dominance argument extends to one training run.

References
----------
Xiang, Wang, Xiao, Tian, Wang, "Tight Privacy Audit in One Run", arXiv:2509.08704, 2025 (the
order-statistics tail bound of the released guesses).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import beta as beta_law
from scipy.stats import binom

from dpaudit.auditing.statistics.one_run import largest_rejected_mu

__all__ = ["CELLS", "tail_mu_lower_bound", "tail_p_values"]

CELLS = 4096  #: cells of equal probability of the cut's quantile W (the p-value is over by at most 1/CELLS)


def _confidence_at(tail: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """The confidence ``s`` with mass ``tail`` above it, rounded up (a smaller error rate: a larger p-value).

    The mass above ``s`` is convex and decreasing in ``s``, and ``mu/2 - Phi^-1(tail)`` lies left of the root,
    so Newton's steps from there rise to the root from below; a relative margin of 1e-7 then steps past it.
    The steps stop after ten, or once none moves any ``s`` by more than 1e-12 of it: Newton's error after
    a step of ``h`` is of order ``h^2``, far inside the margin (usually after five or six steps).
    """
    s = np.maximum(mu / 2 - ndtri(np.clip(tail, 1e-300, 1.0)), 0.0)
    for _ in range(10):
        excess = ndtr(-(s + mu / 2)) + ndtr(-(s - mu / 2)) - tail
        slope = np.exp(-0.5 * (s + mu / 2) ** 2) + np.exp(-0.5 * (s - mu / 2) ** 2)
        step = np.where(slope > 0, excess * np.sqrt(2 * np.pi) / np.maximum(slope, 1e-300), 0.0)
        moved = np.maximum(s + step, 0.0)
        settled = np.all(np.abs(moved - s) <= 1e-12 * moved)
        s = moved
        if settled:
            break
    return s * (1 + 1e-7) + 1e-7


@functools.lru_cache(maxsize=256)
def _cut_quantiles(canaries: int, guesses: int, cells: int) -> np.ndarray:
    """Upper ends of the first ``cells - 1`` cells of equal probability of ``W ~ Beta(m - r, r + 1)``."""
    upper = beta_law.ppf(np.arange(1, cells) / cells, canaries - guesses, guesses + 1)
    upper.setflags(write=False)
    return upper


def tail_p_values(mu, *, canaries: int, guesses: int, errors: int, cells: int = CELLS) -> np.ndarray:
    """An upper bound on ``P[errors <= u]`` under mu-GDP, for each mu (vector)."""
    mu = np.atleast_1d(np.asarray(mu, dtype=float))
    if guesses == 0:
        return np.ones(mu.shape)
    if guesses == canaries:
        return binom.cdf(errors, canaries, ndtr(-mu / 2))
    upper = _cut_quantiles(canaries, guesses, cells)  # the last cell's upper end, 1, is left out
    tail = (1.0 - upper)[:, None]
    inside = tail[:, 0] > 0
    values = np.ones((upper.size, mu.size))
    s = _confidence_at(tail[inside], mu[None, :])
    rate = np.clip(ndtr(-(s + mu[None, :] / 2)) / tail[inside], 0.0, 1.0)
    values[inside] = binom.cdf(errors, guesses, rate)
    return (values.sum(axis=0) + 1.0) / cells


def tail_mu_lower_bound(*, canaries: int, guesses: int, correct: int, failure: float, beat: float = 0.0) -> float:
    """The largest mu the counts reject at level ``failure`` (0 if none), rounded down; as
    :func:`dpaudit.auditing.statistics.one_run_fdp.fdp_mu_lower_bound` (``beat``: 0 at once for counts that do not reject it)."""
    def rejects(values: np.ndarray) -> np.ndarray:
        return tail_p_values(values, canaries=canaries, guesses=guesses, errors=guesses - correct) < failure

    if guesses == 0:
        return 0.0
    return largest_rejected_mu(rejects, beat=beat)

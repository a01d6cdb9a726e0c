"""A test that a score's law within strata is the same under ``S`` and ``S'``: labels permuted within strata.

Trials of both datasets carry a stratum (a grid cell of their value,
``attacks.float_rounding``) and a score fixed in advance. The null
hypothesis: within every stratum, the score has one law under ``S`` and
``S'``. Given the strata and labels of all trials, the scores of a stratum
are then exchangeable, and the sum ``T`` of the ``S'`` trials' scores is a
sum of draws without replacement from each stratum's scores (a stratified
permutation test; Mantel and Haenszel 1959 for the stratification). Its
conditional mean is ``E = sum_w m_w mean_w``, and Hoeffding's bound for
sampling without replacement (Hoeffding 1963, Theorems 2 and 4: the
moment generating function of such a sum is at most that of draws with
replacement), multiplied over strata drawn independently, gives

    P(T - E >= t) <= exp(-2 t^2 / sum_w min(m_w, n_w - m_w) (max_w - min_w)^2)

with ``n_w`` trials in stratum ``w``, ``m_w`` of them from ``S'`` (the sum of
the ``S`` trials is the stratum's total less ``T_w``, so the smaller side
bounds the spread). This p-value holds exactly, at any number of trials, with
no normal approximation; a stratum holding one side only adds nothing.
Rounding errors of the sums are taken off ``t`` before the bound (the safe way).

:class:`StratifiedShift` adds chunks up stratum by stratum, so memory grows
with the strata met, not with the trials.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dpaudit.core.errors import ParameterError

__all__ = ["StratifiedShift", "StratifiedTest"]

#: Relative allowance for the rounding of float sums over at most ~10^7 scores (each adds at most 2^-53 of the
#: running absolute sum): taken off the observed excess before it is bounded
_ROUNDING = 1e-9


@dataclasses.dataclass(frozen=True, slots=True)
class StratifiedTest:
    """A stratified permutation test's outcome.

    Attributes
    ----------
    p_value : float
        Hoeffding's bound on ``P(T - E >= t)`` under the null (1 when ``t <= 0``; 0 where it underflows).
    log_p_value : float
        Its natural logarithm (finite where ``p_value`` underflows).
    excess : float
        ``t = T - E``, less the rounding allowance: how much more the ``S'`` trials scored than the null expects.
    spread : float
        ``sum_w min(m_w, n_w - m_w) (max_w - min_w)^2``, the bound's denominator.
    strata : int
        Strata holding trials of both datasets (the others add nothing).
    """

    p_value: float
    log_p_value: float
    excess: float
    spread: float
    strata: int


class StratifiedShift:
    """Sums of scores per stratum and side, added one chunk at a time; :meth:`finish` bounds the p-value."""

    def __init__(self) -> None:
        self._keys: list[np.ndarray] = []
        self._stats: list[np.ndarray] = []  # per stratum: n_a, n_b, sum_a, sum_b, min, max
        self._absolute = 0.0

    def add(self, side: str, scores: np.ndarray, strata: np.ndarray) -> None:
        """Add one chunk of side ``"a"`` (``S``) or ``"b"`` (``S'``): one score and one stratum row per trial."""
        if side not in ("a", "b"):
            raise ParameterError(f"side must be 'a' or 'b', got side={side!r}")
        scores = np.asarray(scores, dtype=np.float64).ravel()
        strata = np.asarray(strata, dtype=np.float64).reshape(scores.size, -1)
        if not np.all(np.isfinite(scores)):
            raise ParameterError("scores must be finite numbers")
        if scores.size == 0:
            return
        self._absolute += float(np.abs(scores).sum())
        keys, inverse = np.unique(strata, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        count = np.bincount(inverse, minlength=len(keys)).astype(np.float64)
        total = np.bincount(inverse, weights=scores, minlength=len(keys))
        low, high = np.full(len(keys), np.inf), np.full(len(keys), -np.inf)
        np.minimum.at(low, inverse, scores)
        np.maximum.at(high, inverse, scores)
        zero = np.zeros(len(keys))
        first = (count, zero, total, zero) if side == "a" else (zero, count, zero, total)
        self._keys.append(keys)
        self._stats.append(np.column_stack([*first, low, high]))
        if sum(len(k) for k in self._keys) > 4 * max(len(k) for k in self._keys):
            self._reduce()

    def _reduce(self) -> None:
        """Merge the chunks' tables into one row per stratum."""
        keys, stats = np.concatenate(self._keys), np.concatenate(self._stats)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        merged = np.zeros((len(unique), 6))
        for column in range(4):
            merged[:, column] = np.bincount(inverse, weights=stats[:, column], minlength=len(unique))
        merged[:, 4], merged[:, 5] = np.inf, -np.inf
        np.minimum.at(merged[:, 4], inverse, stats[:, 4])
        np.maximum.at(merged[:, 5], inverse, stats[:, 5])
        self._keys, self._stats = [unique], [merged]

    def finish(self) -> StratifiedTest:
        """The test on every chunk added (one-sided: large scores pointing to ``S'``)."""
        if not self._keys:
            return StratifiedTest(1.0, 0.0, 0.0, 0.0, 0)
        self._reduce()
        n_a, n_b, sum_a, sum_b, low, high = self._stats[0].T
        both = (n_a > 0) & (n_b > 0)
        n = n_a + n_b
        expected = np.where(both, n_b * (sum_a + sum_b) / np.where(n > 0, n, 1.0), sum_b)
        excess = float(np.sum(sum_b - expected)) - _ROUNDING * self._absolute
        spread = float(np.sum(np.where(both, np.minimum(n_a, n_b) * (high - low) ** 2, 0.0)))
        if excess <= 0 or spread <= 0:
            return StratifiedTest(1.0, 0.0, max(excess, 0.0), spread, int(both.sum()))
        log_p = -2 * excess * excess / spread
        return StratifiedTest(math.exp(log_p), log_p, excess, spread, int(both.sum()))

"""A score for heavy-tailed continuous outputs: each coordinate's side of its median, weights pooled.

Where each coordinate carries a small shift under heavy-tailed noise (Laplace
mechanisms side by side, parallel composition), the likelihood ratio of a
coordinate is nearly a step at the shift: what tells the datasets apart is on
which side of the centre a value falls, not how far. The sign test reads that
(for Laplace noise it is twice as efficient as the mean, whose variance the
tails inflate). The ``median`` score, fitted on calibration trials only:

- ``s_j = sign(x_j - m_j)`` with ``m_j`` the median of coordinate ``j`` over
  the pooled calibration outputs (0 at the median itself);
- each coordinate's weight is the difference of the mean signs under ``S'``
  and ``S``, ``w_j``, of sampling variance ``v_j``; every sign has the same
  scale, so the weights can be compared and pooled: each is shrunk towards
  their precision-weighted mean by the empirical-Bayes weight
  ``tau^2 / (tau^2 + v_j)`` (``attacks.shrinkage``). Coordinates that move
  alike (the same mechanism run on the same answer) share one weight read
  from all of them; coordinates that differ keep their own;
- the score is ``sum_j w_j s_j``.

Its ``efficiency`` is the Pitman efficiency of the sign test relative to the
mean for a small shift, ``4 f(m)^2 sigma^2`` (``f(m)`` the density at the
median, ``sigma^2`` the variance), averaged over the coordinates and read from
the pooled calibration outputs without their labels: 2 under Laplace noise,
``2 / pi`` under Gaussian noise. Where a portfolio's contest resolves nothing
at its budget, a score with an efficiency above 1 goes first
(``audit.statistics.portfolio``). Its ``tail_model`` is ``"tilt"``: a count
of independent signs with a common shift is an exponential family in the
count, so its test is placed by the tilt fitted to its calibration scores
(``audit.statistics.tilt``), not by their raw tails.

A value is compared with a median only (never with its own low bits), so the
score reads nothing finer than what the mechanism releases. Its power on
Laplace under parallel composition is in docs/theory.md 8.

References
----------
docs/theory.md 7 and 8; Hodges, J. L. and Lehmann, E. L. (1956), "The
efficiency of some nonparametric competitors of the t-test", Ann. Math.
Statist. 27 (the sign test's efficiency: 2 under Laplace noise, 2/pi under
Gaussian); DerSimonian and Laird (1986), via ``attacks.shrinkage``.
"""

from __future__ import annotations

import numpy as np

from dpaudit.core.errors import ParameterError

__all__ = ["DENSITY_SPAN", "fit_median", "sign_test_efficiency"]

#: The density at the median is read from the quantiles ``1/2 +- DENSITY_SPAN``: ``2 h / (q(1/2 + h) - q(1/2 - h))``
DENSITY_SPAN = 0.05


def _signs(outputs: np.ndarray, medians: np.ndarray) -> np.ndarray:
    x = np.asarray(outputs, dtype=float)
    return np.sign((x[:, None] if x.ndim == 1 else x) - medians)


def sign_test_efficiency(outputs: np.ndarray) -> float:
    """``4 f(m)^2 sigma^2`` averaged over the coordinates of ``outputs`` that take more than two values.

    The Pitman efficiency of the sign test relative to the mean's test for a small shift (Hodges and
    Lehmann 1956): 2 under Laplace noise, ``2 / pi`` under Gaussian noise. The density at the median is
    read from the quantiles ``1/2 +- DENSITY_SPAN``; a coordinate whose quantiles coincide (an atom at the
    median) is left out. 0 when no coordinate is left.
    """
    x = np.asarray(outputs, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    low, high = np.quantile(x, [0.5 - DENSITY_SPAN, 0.5 + DENSITY_SPAN], axis=0)
    spacing = high - low
    variance = x.var(axis=0)
    usable = (spacing > 0) & (variance > 0) & np.isfinite(variance)
    if not np.any(usable):
        return 0.0
    density = 2 * DENSITY_SPAN / spacing[usable]
    return float(np.mean(4 * density**2 * variance[usable]))


def fit_median(cal_a: np.ndarray, cal_b: np.ndarray):
    """The ``median`` score fitted on calibration outputs of ``S`` and ``S'`` (module docstring).

    Raises
    ------
    ParameterError
        When the outputs hold fewer than 2 calibration trials per side, or fewer than two coordinates take
        more than two values: a sign then carries nothing a threshold on the value does not (on one
        coordinate the sign about its median *is* a threshold on it, which ``projection`` has, and the
        tails beyond it are lost).
    """
    cal_a, cal_b = np.asarray(cal_a, dtype=float), np.asarray(cal_b, dtype=float)
    cal_a = cal_a[:, None] if cal_a.ndim == 1 else cal_a
    cal_b = cal_b[:, None] if cal_b.ndim == 1 else cal_b
    if min(len(cal_a), len(cal_b)) < 2:
        raise ParameterError(f"score 'median' needs at least 2 calibration trials per side, got "
                             f"{min(len(cal_a), len(cal_b))}")
    pooled = np.concatenate([cal_a, cal_b])
    medians = np.median(pooled, axis=0)
    continuous = sum(np.unique(column[:1000]).size > 2 for column in pooled.T)
    if continuous == 0:
        raise ParameterError("score 'median' found no coordinate with more than two values on the calibration "
                             "trials; use 'discrete'")
    if continuous == 1:
        raise ParameterError("score 'median' needs two or more coordinates with more than two values: on one, "
                             "the sign about its median is a threshold on the value (use 'projection')")
    sign_a, sign_b = _signs(cal_a, medians), _signs(cal_b, medians)
    weights = sign_b.mean(axis=0) - sign_a.mean(axis=0)
    variance = sign_a.var(axis=0) / len(sign_a) + sign_b.var(axis=0) / len(sign_b)
    variance = np.maximum(variance, 1.0 / (len(sign_a) * len(sign_b)))  # a constant sign is still an estimate
    from dpaudit.attacks.shrinkage import shrink

    common = float(np.sum(weights / variance) / np.sum(1.0 / variance))
    pooled_weights, tau2 = shrink(weights, variance, np.full_like(weights, common))

    def median_signs(outputs: np.ndarray) -> np.ndarray:
        return _signs(outputs, medians) @ pooled_weights

    median_signs.weights = pooled_weights
    median_signs.between_variance = tau2
    median_signs.efficiency = sign_test_efficiency(pooled)
    median_signs.tail_model = "tilt"  # a weighted count of signs: its log likelihood ratio is about linear in it
    return median_signs


def _register() -> None:
    """Register ``median`` (imported by ``attacks.scores`` on the registry's first use)."""
    from dpaudit.attacks.scores import BuiltinScore, register_score

    register_score(BuiltinScore(
        "median", "heavy-tailed continuous outputs: each coordinate's side of its calibration median, the "
        "signs weighted by their calibration mean differences pooled across coordinates", True,
        lambda pair, a, b, seed: fit_median(a, b)))


_register()

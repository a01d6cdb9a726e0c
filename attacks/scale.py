"""A score that reads spread as well as location: Gaussians with their own variance per side and coordinate.

A normalisation bug changes how widely a release spreads, not where it is
centred: Opacus divides the noisy gradient sum by an expected batch size
computed from the number of records, so removing a record rescales the
noise of every released parameter while every mean stays put. The location
scores (projection, logistic, the Gaussian with a common covariance) cannot
see that; the likelihood ratio of two Gaussians with their own variances
can. The ``scale`` score, fitted on calibration trials only, is that ratio
coordinate by coordinate (a diagonal quadratic discriminant):

``s(x) = sum_j [(x_j - m_aj)^2 / (2 v_aj) - (x_j - m_bj)^2 / (2 v_bj) + log(v_aj / v_bj) / 2]``.

With many coordinates and few calibration trials each variance is noisy, so
the estimates are shrunk by empirical Bayes (``attacks.shrinkage``) towards
what the coordinates share: each side's log-variance towards that side's
mean log-variance over the coordinates (the sampling variance of a log
sample variance is about ``2 / (n - 1)``), and each coordinate's difference
of means towards the mean difference. Where every coordinate's spread moves
by one factor, as a rescaled noise does, the score is then close to the
statistic ``sum_j (x_j - m_j)^2 / v_j`` whose law the two sides differ in.

It applies to outputs of two or more coordinates (on one coordinate the
``gaussian`` score is the same ratio, unshrunk).

References
----------
docs/theory.md 3.6 (the portfolio) and 7 (shrinkage); Friedman, J. H. (1989),
"Regularized discriminant analysis", JASA 84 (shrinking the covariances of a
quadratic discriminant); DerSimonian and Laird (1986), via ``attacks.shrinkage``.
"""

from __future__ import annotations

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.scores import BuiltinScore, register_score
from dpaudit.attacks.shrinkage import shrink
from dpaudit.core.errors import ParameterError

__all__ = ["fit_scale"]


def _shrunk_log_variances(x: np.ndarray) -> np.ndarray:
    """Each column's log sample variance shrunk towards their mean (sampling variance ``2 / (n - 1)`` each)."""
    n = x.shape[0]
    variances = np.maximum(x.var(axis=0, ddof=1), 1e-300)
    logs = np.log(variances)
    sampling = np.full(logs.shape, 2.0 / (n - 1))
    shrunk, _ = shrink(logs, sampling, np.full(logs.shape, logs.mean()))
    return shrunk


def fit_scale(cal_a: np.ndarray, cal_b: np.ndarray) -> np.ndarray:
    """The diagonal Gaussian log-likelihood ratio ``log p_b(x) - log p_a(x)`` fitted on calibration outputs.

    Parameters
    ----------
    cal_a, cal_b : numpy.ndarray
        Calibration outputs under ``S`` and ``S'``, shape ``(n, d)``, ``n >= 3`` each.

    Returns
    -------
    callable
        Outputs ``(trials, d)`` to one score per trial, larger under ``S'``.
    """
    a = np.asarray(cal_a, dtype=float).reshape(len(cal_a), -1)
    b = np.asarray(cal_b, dtype=float).reshape(len(cal_b), -1)
    if min(len(a), len(b)) < 3:
        raise ParameterError(f"score 'scale' needs at least 3 calibration outputs per dataset, got "
                             f"{min(len(a), len(b))}")
    log_var_a, log_var_b = _shrunk_log_variances(a), _shrunk_log_variances(b)
    var_a, var_b = np.exp(log_var_a), np.exp(log_var_b)
    centre = 0.5 * (a.mean(axis=0) + b.mean(axis=0))
    difference = b.mean(axis=0) - a.mean(axis=0)
    sampling = var_a / len(a) + var_b / len(b)
    common = np.full(difference.shape, np.average(difference, weights=1 / sampling))
    difference, _ = shrink(difference, sampling, common)
    mean_a, mean_b = centre - difference / 2, centre + difference / 2
    constant = 0.5 * float(np.sum(log_var_a - log_var_b))
    inverse_a, inverse_b = 0.5 / var_a, 0.5 / var_b

    def scale(outputs: np.ndarray) -> np.ndarray:
        x = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
        return ((x - mean_a) ** 2) @ inverse_a - ((x - mean_b) ** 2) @ inverse_b + constant

    return scale


def _applies(pair: CanaryPair) -> str | None:
    if pair.mechanism.output_dim >= 2:
        return None
    return "score 'scale' reads many coordinates' spreads; on one coordinate score 'gaussian' is the same ratio"


def _register() -> None:
    """Register ``scale`` (imported by ``attacks.scores`` on the registry's first use)."""
    register_score(BuiltinScore(
        "scale", "Gaussians with their own variance per side and coordinate (a change of spread, not only of "
        "location), variances and mean differences shrunk across coordinates", True,
        lambda pair, a, b, seed: fit_scale(a, b), _applies))


_register()

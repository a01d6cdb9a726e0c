"""Empirical-Bayes shrinkage of noisy estimates towards a model (docs/theory.md 7).

Several scores estimate many small effects at once (an outcome's log-ratio, a
coordinate's weight), each with a known sampling variance. Where the effects
differ from a simpler model by less than their noise, each estimate is pulled
towards the model's value by the empirical-Bayes weight ``tau^2 / (tau^2 + v)``,
with the between-effect variance ``tau^2`` estimated by moments.

References
----------
DerSimonian, R. and Laird, N. (1986), "Meta-analysis in clinical trials",
Controlled Clinical Trials 7 (the moment estimate of ``tau^2``); docs/theory.md 7.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["random_effects_variance", "shrink"]


def random_effects_variance(residual: np.ndarray, variance: np.ndarray) -> float:
    """Between-effect variance ``tau^2`` of residuals with sampling variances ``variance``.

    The DerSimonian-Laird moment estimator: ``Q = sum w e^2`` with ``w = 1 / variance``
    has expectation ``(K - 1) + tau^2 (sum w - sum w^2 / sum w)`` over ``K`` effects.
    """
    residual, variance = np.asarray(residual, dtype=float), np.asarray(variance, dtype=float)
    if residual.size < 2 or not np.all(variance > 0):
        return 0.0
    # the weights relative to the largest, so that tiny variances (a coordinate released without noise) do
    # not overflow their squares: Q and the spread are both ``largest`` times the relative sums
    largest = float(np.max(1.0 / variance))
    relative = (1.0 / variance) / largest
    total = relative.sum()
    spread = largest * (total - np.sum(relative**2) / total)
    if not spread > 0:
        return 0.0
    centred = residual - np.sum(relative * residual) / total
    with np.errstate(over="ignore"):
        q = largest * float(np.sum(relative * centred**2))
    return max(0.0, (q - (residual.size - 1)) / spread) if math.isfinite(q) else math.inf


def shrink(estimate: np.ndarray, variance: np.ndarray, model: np.ndarray) -> tuple[np.ndarray, float]:
    """The empirical-Bayes means ``model + tau^2 / (tau^2 + v) (estimate - model)`` and ``tau^2``."""
    residual = np.asarray(estimate, dtype=float) - model
    tau2 = random_effects_variance(residual, variance)
    if math.isinf(tau2):  # the effects differ by far more than their noise: no pull towards the model
        return model + residual, tau2
    return model + tau2 / (tau2 + variance) * residual, tau2

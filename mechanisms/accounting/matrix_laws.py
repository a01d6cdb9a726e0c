"""The exact laws of a Gaussian DP-MF release: every iterate, or the last (docs/theory.md 12.3).

On the whole space with a linear loss, the noisy gradients of a DP-MF
training in cyclic order are ``G_t = S_t / m + (sigma L / m) (M z)_t`` with
constant batch sums ``S_t``: a Gaussian vector with covariance
``(sigma L / m)^2 K`` along the steps (``accounting.strategies``). Between
``S`` and ``S'`` only the means move, by ``D = (S'_t - S_t) / m``, so the
log-likelihood ratio is a function of the one statistic

    Y = sum_t <(P D)_t, G_t>,     P = K^{-1},

Gaussian under both with variance ``(sigma L / m)^2 <D, P D>`` and means
``<P D, S_t / m>``: the release is exactly ``mu``-GDP with
``mu = <D, P D>^{1/2} m / (sigma L)``. The noisy gradients are read back
from the released iterates (``G_t = (theta_{t-1} - theta_t) / eta``). The
last iterate alone depends on ``sum_t G_t`` only: ``Y = <(theta_0 -
theta_T) / eta, v>`` with ``v = sum_t D_t`` and variance
``(sigma L / m)^2 |v|^2 1^T K 1``.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.core.errors import NotExact
from dpaudit.mechanisms.accounting.last_iterate import MixtureLaws
from dpaudit.mechanisms.accounting.strategies import factor

__all__ = ["gaussian_release_laws"]

CITATION = "DP-MF release of a linear loss on the whole space: Gaussian, mu = |D|_P / (sigma L / m) " \
           "(docs/theory.md 12.3)"


def gaussian_release_laws(mech, sums_a: np.ndarray, sums_b: np.ndarray, *, start: np.ndarray) -> MixtureLaws:
    """The laws of the likelihood-ratio statistic ``Y`` under ``S`` (``sums_a``) and ``S'`` (``sums_b``).

    Parameters
    ----------
    mech : dp-mf mechanism
        Reads ``strategy_value``, ``batch_size``, ``noise_multiplier``, ``lipschitz``, ``eta``, ``dim`` and
        ``output``.
    sums_a, sums_b : numpy.ndarray
        Every step's clipped gradient sum, shape ``(steps, dim)``.
    start : numpy.ndarray
        The start point ``theta_0``, shape ``(dim,)``.
    """
    m = float(mech.batch_size)
    std_unit = float(mech.noise_multiplier) * float(mech.lipschitz) / m
    found = factor(mech.strategy_value)
    means_a, means_b = sums_a / m, sums_b / m
    moved = means_b - means_a
    start = np.asarray(start, dtype=float)
    eta, dim = float(mech.eta), int(mech.dim)
    if mech.output == "iterates":
        weights = found.precision @ moved  # (steps, dim): P D

        def statistic(outputs: np.ndarray) -> np.ndarray:
            thetas = np.asarray(outputs, dtype=float).reshape(len(outputs), -1, dim)
            previous = np.concatenate([np.broadcast_to(start, (len(outputs), 1, dim)), thetas[:, :-1]], axis=1)
            return np.einsum("rtd,td->r", (previous - thetas) / eta, weights)

        spread = float(np.sum(moved * weights))
        mean_a, mean_b = float(np.sum(weights * means_a)), float(np.sum(weights * means_b))
    else:
        direction = moved.sum(0)  # v

        def statistic(outputs: np.ndarray) -> np.ndarray:
            return ((start - np.asarray(outputs, dtype=float)) / eta) @ direction

        spread = float(direction @ direction) * found.last_variance
        mean_a, mean_b = float(means_a.sum(0) @ direction), float(means_b.sum(0) @ direction)
    if not spread > 0:
        raise NotExact("the two datasets give the same release law (the canary moves no step's sum)")
    return MixtureLaws([mean_a], [1.0], [mean_b], [1.0], std_unit * math.sqrt(spread), statistic=statistic,
                       citation=CITATION)


"""Correlated-noise strategies of DP matrix factorisation, as frozen values and the matrices they stand for.

A DP matrix-factorisation (DP-MF) training adds, at step ``t``, the noise
``(M z)_t`` to the clipped gradient sum, with ``z`` i.i.d. standard normal
(times ``sigma L``). For a square lower-triangular strategy ``C`` (identity =
DP-SGD, Toeplitz, banded) ``M = C^{-1}``: releasing every noisy gradient is
then the same as releasing ``C G + sigma L z``, one Gaussian mechanism on the
stream of gradients (Denisov et al. 2022; Choquette-Choo et al. 2023). DP-FTRL's
binary tree (Kairouz et al. 2021) adds independent noise to every dyadic node
of the prefix sums; its noisy gradients are differences of noisy prefix sums,
``M = D B`` with ``B`` the nodes of each prefix's dyadic decomposition and
``D`` the differencing matrix. Every strategy here is described by the
covariance ``K = M M^T`` of the gradient noise (unit ``sigma L``); the exact
privacy of every noisy gradient reads its inverse ``P = K^{-1}``
(``accounting.participation``, docs/theory.md 12).

A :class:`Strategy` is hashable (a dense strategy is named by its digest), so
claims built from it are kept per strategy; :func:`factor` builds its matrices
once per strategy.

References
----------
Kairouz, McMahan, Song, Thakkar, Thakurta, Xu, "Practical and Private (Deep)
Learning without Sampling or Shuffling", ICML 2021 (DP-FTRL, tree restarts).
Denisov, McMahan, Rush, Smith, Thakurta, "Improved Differential Privacy for
SGD via Optimal Private Linear Operators on Adaptive Streams", NeurIPS 2022.
Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta, Xu, "(Amplified)
Banded Matrix Factorization: A unified approach to private training", NeurIPS
2023 (BandMF).
Kalinin and Lampert, "Banded Square Root Matrix Factorization for
Differentially Private Model Training", NeurIPS 2024 (the banded square root).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math

import numpy as np
from scipy.linalg import solve_triangular

from dpaudit.mechanisms.accounting.descriptions import Strategy

__all__ = ["STRATEGY_KINDS", "Factor", "banded_sqrt_coefficients", "dense_strategy", "factor", "lower_matrix",
           "tree_noise_matrix"]

#: The strategy kinds, with what each is.
STRATEGY_KINDS = {
    "identity": "independent noise at every step (DP-SGD)",
    "tree": "DP-FTRL's binary tree: independent noise on every dyadic node of the prefix sums, restarted each epoch",
    "toeplitz": "a lower-triangular Toeplitz C from its coefficients c_0, c_1, ... (banded when they are few)",
    "banded-sqrt": "the square root of the prefix-sum matrix, truncated to b bands (BSR, Kalinin and Lampert 2024)",
    "dense": "a lower-triangular C given as a matrix",
}


def dense_strategy(matrix: np.ndarray, label: str = "a matrix") -> Strategy:
    """A dense lower-triangular strategy, named by the SHA-256 of its float64 bytes."""
    values = np.ascontiguousarray(matrix, dtype=np.float64)
    digest = hashlib.sha256(values.tobytes() + str(values.shape).encode()).hexdigest()[:16]
    return Strategy("dense", int(values.shape[0]), matrix=tuple(map(tuple, values.tolist())), digest=digest,
                    label=label)


def banded_sqrt_coefficients(bands: int) -> tuple[float, ...]:
    """The first ``bands`` coefficients of the square root of the prefix-sum matrix: ``binom(2j, j) / 4^j``.

    The lower-triangular all-ones matrix ``A`` is the Toeplitz matrix of ``1 / (1 - x)``; its square root is the
    Toeplitz matrix of ``(1 - x)^{-1/2} = sum_j binom(2j, j) / 4^j x^j`` (Kalinin and Lampert 2024, Sec. 3).
    The coefficients are positive and decreasing.
    """
    values = [1.0]
    for j in range(1, bands):
        values.append(values[-1] * (2 * j - 1) / (2 * j))
    return tuple(values)


def tree_noise_matrix(steps: int, epoch_steps: int) -> np.ndarray:
    """``M = D B``: each step's gradient noise as a sum of the tree's node noises, shape ``(steps, nodes)``.

    Per epoch (the tree restarts), node ``(l, j)`` covers the steps ``j 2^l + 1 .. (j + 1) 2^l`` of the epoch;
    the noisy prefix sum at step ``t`` adds the nodes of ``t``'s dyadic decomposition (one per set bit of
    ``t``), and the noisy gradient at ``t`` is the difference of two consecutive prefix sums.
    """
    epochs = steps // epoch_steps
    levels = int(math.floor(math.log2(epoch_steps))) + 1
    offsets = np.cumsum([0] + [epoch_steps >> level for level in range(levels)])  # first node of each level
    per_epoch = int(offsets[-1])
    t = np.arange(1, epoch_steps + 1)
    prefix_nodes = np.zeros((steps, epochs * per_epoch))
    for epoch in range(epochs):
        for level in range(levels):
            holds = ((t >> level) & 1).astype(bool)  # the set bits of t: the nodes of its decomposition
            nodes = epoch * per_epoch + offsets[level] + (t[holds] >> level) - 1
            prefix_nodes[epoch * epoch_steps + t[holds] - 1, nodes] = 1.0
    noise = prefix_nodes.copy()
    for epoch in range(epochs):  # differences of consecutive prefix sums within each epoch
        start = epoch * epoch_steps
        noise[start + 1:start + epoch_steps] -= prefix_nodes[start:start + epoch_steps - 1]
    return noise[:, np.abs(noise).sum(axis=0) > 0]  # nodes no prefix sum reads (right children) add nothing


@dataclasses.dataclass(frozen=True, eq=False)
class Factor:
    """The matrices of a strategy: ``C`` (square kinds), the noise covariance ``K`` and its inverse ``P``.

    ``last_weights`` is ``w`` with ``sum_t (M z)_t = <w, z>`` (square kinds: ``C^{-T} 1``), whose squared norm
    ``1^T K 1`` is the variance of the summed noise (the last iterate's).
    """

    strategy: Strategy
    lower: np.ndarray | None
    covariance: np.ndarray
    precision: np.ndarray
    last_variance: float


@functools.lru_cache(maxsize=64)
def factor(strategy: Strategy) -> Factor:
    """Build a strategy's matrices once (dense ``n x n``: meant for up to a few thousand steps)."""
    n = strategy.steps
    if strategy.kind == "tree":
        noise = tree_noise_matrix(n, strategy.epoch_steps)
        covariance = noise @ noise.T
        precision = np.linalg.inv(covariance)
        precision = 0.5 * (precision + precision.T)
        return Factor(strategy, None, covariance, precision, float(covariance.sum()))
    lower = lower_matrix(strategy)
    inverse = solve_triangular(lower, np.eye(n), lower=True)
    covariance = inverse @ inverse.T
    precision = lower.T @ lower
    weights = solve_triangular(lower, np.ones(n), lower=True, trans="T")
    return Factor(strategy, lower, covariance, precision, float(weights @ weights))


def lower_matrix(strategy: Strategy) -> np.ndarray:
    """``C`` as a dense lower-triangular ``(steps, steps)`` array (square kinds)."""
    n = strategy.steps
    if strategy.kind == "identity":
        return np.eye(n)
    if strategy.kind in ("toeplitz", "banded-sqrt"):
        lower = np.zeros((n, n))
        for lag, value in enumerate(strategy.coefficients[:n]):
            lower += np.diag(np.full(n - lag, float(value)), -lag)
        return lower
    if strategy.kind == "dense":
        return np.array(strategy.matrix, dtype=np.float64)
    raise ValueError(f"strategy kind {strategy.kind!r} has no square C")

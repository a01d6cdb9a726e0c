"""The DP-MF bug zoo's figures: jax_privacy 2.0's sensitivities re-created in NumPy, the exact values of cyclic
patterns by brute force, and the reshuffled release by Monte Carlo (``audit.checks.zoo.dpmf``).

References
----------
``jax_privacy/matrix_factorization/{toeplitz,sensitivity}.py`` at 2.0.0 (03294e2,
github.com/google-deepmind/jax_privacy); arXiv:2405.13763, Thm 2 (the Toeplitz closed form); docs/theory.md 12.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

__all__ = ["DELTA", "cyclic_sensitivity_squared", "epsilon_at", "pattern_mu", "reshuffled_epsilon", "single_participation_sensitivity",
           "toeplitz_matrix", "toeplitz_minsep_sensitivity_squared"]

DELTA = 1e-5


# -- jax_privacy's sensitivities, re-created in NumPy ------------------------------------------------------
def toeplitz_minsep_sensitivity_squared(strategy_coef, min_sep: int, max_participations: int | None = None,
                                        n: int | None = None) -> float:
    """jax_privacy 2.0's ``toeplitz.minsep_sensitivity_squared(..., skip_checks=True)``, re-created in NumPy.

    The squared sensitivity of ``max_participations`` participations exactly ``min_sep`` steps apart from the
    first step, ``|C 1_{0, b, 2b, ...}|^2``: the worst pattern of every ``min_sep``-separated one only when the
    coefficients are non-negative and non-increasing (its checks, which ``skip_checks=True`` turns off).

    Parameters
    ----------
    strategy_coef : array_like
        The leading entries of ``C[:, 0]`` (Toeplitz ``C``).
    min_sep, max_participations : int
        The separation ``b`` and the most participations ``k`` (default: as many as ``n`` allows).
    n : int, optional
        The size of ``C``; default ``len(strategy_coef)``, as 2.0's ``_reconcile`` does (``n = n or
        len(coef)``): the default PR 238 removed by making ``n`` required.

    Notes
    -----
    ``jax_privacy/matrix_factorization/toeplitz.py`` at 2.0.0 (03294e2), ``minsep_sensitivity_squared`` and
    ``_reconcile``; ``sensitivity.minsep_true_max_participations`` (``min(k, ceil(n / b))``). Theorem 2 of
    arXiv:2405.13763 (non-negative, non-increasing coefficients).
    """
    coef = np.asarray(strategy_coef, dtype=np.float64)
    n = n or coef.size  # _reconcile
    coef = coef[:n]
    most = -(n // -min_sep)  # minsep_true_max_participations: ceil(n / min_sep)
    k = most if max_participations is None else min(max_participations, most)
    padding = (min_sep - n) % min_sep
    coef = np.pad(coef, (0, n - coef.size + padding))
    vector = coef.reshape(-1, min_sep).cumsum(axis=0).ravel()
    vector[min_sep * k:] = vector[min_sep * k:] - vector[:-min_sep * k]  # the right side is a copy, as .at[].set
    return float(vector[:n] @ vector[:n])


def single_participation_sensitivity(strategy: np.ndarray) -> float:
    """The largest column norm of ``C``: jax_privacy's ``sensitivity.single_participation_sensitivity``
    (``matrix_factorization/sensitivity.py`` at 2.0.0), one participation's sensitivity."""
    return float(np.linalg.norm(strategy, axis=0).max())


# -- exact values ------------------------------------------------------------------------------------------
def toeplitz_matrix(coefficients, steps: int) -> np.ndarray:
    """The lower-triangular Toeplitz ``C`` of ``coefficients`` (``c_0, c_1, ...``), ``steps x steps``."""
    values = np.zeros(steps)
    head = np.asarray(coefficients, dtype=np.float64)[:steps]
    values[:head.size] = head
    lags = np.subtract.outer(np.arange(steps), np.arange(steps))
    return np.where(lags >= 0, values[np.clip(lags, 0, steps - 1)], 0.0)


def cyclic_sensitivity_squared(strategy: np.ndarray, epochs: int) -> tuple[float, int]:
    """The squared sensitivity of a release ``C G + z`` over the patterns of cyclic order, by brute force:
    the largest ``|C h|^2`` over the batch slots ``j`` (steps ``j, j + p, ...``) and the signs ``h = +-1`` of a
    one-dimensional model's gradients at them; with the slot that attains it (the first, on ties).

    The release of every noisy gradient of a DP-MF training with noise ``C^{-1} z`` is ``C G + sigma L z``
    after a bijection (docs/theory.md 12.1), so this is its sensitivity in units of the clip.
    """
    steps = strategy.shape[0]
    period = steps // epochs
    if epochs > 16:
        raise ParameterError(f"the brute force enumerates 2^(epochs - 1) signs: epochs must be at most 16, got "
                             f"epochs={epochs}")
    signs = np.array([(1.0, *rest) for rest in itertools.product((1.0, -1.0), repeat=epochs - 1)])
    values = []
    for slot in range(period):
        columns = strategy[:, slot + period * np.arange(epochs)]  # (steps, k)
        values.append(float(np.max(np.sum((signs @ columns.T) ** 2, axis=1))))
    worst = int(np.argmax(values))
    return values[worst], worst


def pattern_mu(strategy: np.ndarray, epochs: int, slot: int, noise_multiplier: float) -> float:
    """``mu = |W 1_pi| / sigma`` of a canary whose gradient is the clip at every step of slot ``slot``'s cyclic
    pattern ``pi`` (one sign, as a record's constant gradient): the release's exact value (docs/theory.md 12.3)."""
    period = strategy.shape[0] // epochs
    return float(np.linalg.norm(strategy[:, slot + period * np.arange(epochs)].sum(axis=1))) / noise_multiplier


def epsilon_at(mu: float) -> float:
    """The Gaussian epsilon of ``mu`` at :data:`DELTA`."""
    return float(gaussian_epsilon(DELTA, mu))


def reshuffled_epsilon(strategy: np.ndarray, *, epochs: int, noise_multiplier: float, delta: float = DELTA,
                       samples: int = 2_000_000, seed: int = 0, chunk: int = 20_000) -> tuple[float, float]:
    """A Monte Carlo estimate of the epsilon of a gradient canary in DP-MF training with batches reshuffled every
    epoch (every iterate released, zero background records), and its standard error.

    In whitened coordinates (``C G m / (sigma L)``) the release is ``N(0, I)`` without the canary and, with it,
    the mixture over the canary's slots ``j_1, ..., j_k`` (uniform, independent across epochs) of
    ``N(mu_pi, I)``, ``mu_pi = C 1_pi / sigma``. The privacy loss ``log mean_pi exp(<mu_pi, y> - |mu_pi|^2 / 2)``
    is drawn under both laws and ``delta(eps)`` (the larger direction) solved for ``eps`` at ``delta``; the
    error is the spread over ten equal groups of draws over ``sqrt(10)``.

    Raises
    ------
    ParameterError
        When the slots have more than 4096 patterns (``p^k``), or ``samples`` is not a multiple of ``chunk``.
    """
    steps = strategy.shape[0]
    period = steps // epochs
    if period**epochs > 4096:
        raise ParameterError(f"the mixture has p^k = {period}^{epochs} components: at most 4096, got "
                             f"epochs={epochs}, steps={steps}")
    if samples % chunk or samples < 10 * chunk:
        raise ParameterError(f"samples must be a multiple of chunk={chunk}, at least ten of them, got "
                             f"samples={samples}")
    slots = np.array(list(itertools.product(range(period), repeat=epochs))) + period * np.arange(epochs)
    means = strategy[:, slots].sum(axis=2).T / noise_multiplier  # (patterns, steps)
    half, log_count = 0.5 * np.sum(means**2, axis=1), math.log(len(means))
    rng = np.random.default_rng(seed)
    with_canary, without = [], []
    for _ in range(samples // chunk):  # chunks of draws, each one batched product over every pattern
        z = rng.standard_normal((chunk, steps))
        without.append(logsumexp(z @ means.T - half, axis=1) - log_count)
        z += means[rng.integers(len(means), size=chunk)]
        with_canary.append(logsumexp(z @ means.T - half, axis=1) - log_count)
    losses_b, losses_a = np.concatenate(with_canary), np.concatenate(without)

    def solve(loss_b: np.ndarray, loss_a: np.ndarray) -> float:
        def excess(eps: float) -> float:
            return max(np.mean(-np.expm1(np.minimum(eps - loss_b, 0.0))),
                       np.mean(-np.expm1(np.minimum(eps + loss_a, 0.0)))) - delta
        high = 1.0
        while excess(high) > 0:
            high *= 2
        return 0.0 if excess(0.0) <= 0 else float(optimize.brentq(excess, 0.0, high, xtol=1e-6))

    groups = [solve(b, a) for b, a in zip(np.array_split(losses_b, 10), np.array_split(losses_a, 10))]
    return solve(losses_b, losses_a), float(np.std(groups, ddof=1) / math.sqrt(10))

"""Exact privacy of the last iterate of linear-loss training on the whole space (docs/theory.md 5.1).

On the whole space, with a linear loss (constant gradients) and Gaussian
noise, the release of DP-SGD, DP-LSSGD and PNSGD is an invertible affine
image of the sum of the noisy gradients. Its component along the canary
direction ``u``,

    Y = <sum_t (batch gradient sum_t / m + noise_t), u>,

is all that differs between ``S`` and ``S'``: the other components have
the same law under both and are independent of ``Y``. With the canary's
gradient ``g`` (``g'`` in ``S'``), the other records' gradients orthogonal
to ``u`` (or zero) and the canary in a step's batch with probability
``p`` independently per step,

    Y ~ sum_k Binom(T, p)(k) N(k <g, u> / m, T s^2)     under S,

and the same with ``g'`` under ``S'`` (Steinke et al. 2024): a mixture over
the canary's participation count. PNSGD's fixed order gives one component.
The likelihood ratio of two such mixtures is monotone in ``Y`` (every shift
has the same sign), so ``E_gamma(P || Q)`` is ``P(Y > y*) - gamma Q(Y > y*)``
at the root ``y*`` of ``log p - log q = log gamma``; normal tails are taken
from ``ndtr`` on the side away from each component's mean, so no mass is
lost to cancellation.

Numerical error: every root is found by Brent's method to 1e-13 of the
noise std and every normal tail has a relative error below 1e-14, so
``delta(eps)`` is exact to ``ERROR = 1e-12`` (absolute) and ``eps(delta)``
to 1e-12 after a bracketed root search, rounded up. The test compares with direct
numerical integration of the mixture (``scipy.integrate.quad``).

References
----------
Steinke, Nasr, Ganesh, Balle, Choquette-Choo, Jagielski, Hayes, Thakurta,
Smith, Terzis, "The Last Iterate Advantage: Empirical Auditing and
Principled Heuristic Analysis of Differentially Private SGD", 2024.
Asoodeh, Diaz, Calmon, "Contraction of E_gamma-divergence..." (E_gamma).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr

__all__ = ["ERROR", "MAX_EPSILON", "MixtureLaws", "count_mixture", "mixture_epsilon"]

#: Stated absolute error of ``delta(eps)`` (roots to 1e-13 std, normal tails to 1e-14 relative).
ERROR = 1e-12
#: Largest epsilon searched: ``e^eps`` stays far inside the float range.
MAX_EPSILON = 600.0
_GRID = 2049  # points on which sign changes of the log-likelihood ratio are looked for
_REACH = 15.0  # stds beyond the extreme means: outside, each component's mass is below 1e-50


def _logsumexp(values: np.ndarray) -> np.ndarray:
    """``log sum exp`` over the last axis, shifted by its maximum (finite inputs).

    SciPy's ``logsumexp`` checks and converts its input on every call (about 0.2 ms); the root searches below call
    this on a few numbers tens of thousands of times for one epsilon, where that overhead was most of the time.
    """
    top = np.max(values, axis=-1, keepdims=True)
    return np.log(np.sum(np.exp(values - top), axis=-1)) + top[..., 0]


@dataclasses.dataclass(frozen=True, eq=False)
class MixtureLaws:
    """Laws of a one-dimensional statistic ``Y`` of the release under ``S`` (``a``) and ``S'`` (``b``).

    Each is a finite Gaussian mixture ``sum_k w_k N(mu_k, std^2)`` with a
    common ``std``. ``statistic`` maps released outputs ``(trials, d)`` to
    ``Y`` (for the exact likelihood-ratio score); ``citation`` says where
    the law comes from.
    """

    means_a: np.ndarray
    weights_a: np.ndarray
    means_b: np.ndarray
    weights_b: np.ndarray
    std: float
    statistic: Callable[[np.ndarray], np.ndarray] | None = None
    citation: str = "last iterate as a mixture over the canary's participation count (docs/theory.md 5.1)"

    def __post_init__(self) -> None:
        for name in ("means_a", "weights_a", "means_b", "weights_b"):
            object.__setattr__(self, name, np.atleast_1d(np.asarray(getattr(self, name), dtype=float)))
        for means, weights in ((self.means_a, self.weights_a), (self.means_b, self.weights_b)):
            keep = weights > 0  # counts of zero probability carry nothing
            if means.shape != weights.shape or not keep.any():
                raise ValueError("a mixture needs as many means as weights, some positive")
        if not self.std > 0:
            raise ValueError(f"std must be > 0, got std={self.std}")

    # -- densities and masses ---------------------------------------------------------
    def _components(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        means, weights = (self.means_a, self.weights_a) if which == "a" else (self.means_b, self.weights_b)
        keep = weights > 0
        return means[keep], weights[keep] / weights[keep].sum()

    def log_density(self, y: np.ndarray, which: str) -> np.ndarray:
        """``log p(y)`` of law ``which`` (``"a"`` or ``"b"``), stable in the far tails."""
        means, weights = self._components(which)
        y = np.asarray(y, dtype=float)
        z = (y[..., None] - means) / self.std
        return _logsumexp(np.log(weights) - 0.5 * z * z) - math.log(self.std * math.sqrt(2 * math.pi))

    def log_ratio(self, y: np.ndarray) -> np.ndarray:
        """``log p_b(y) - log p_a(y)``: larger under ``S'``."""
        return self.log_density(y, "b") - self.log_density(y, "a")

    def mass(self, low: float, high: float, which: str) -> float:
        """``P(low < Y <= high)`` under law ``which``; each component's tail from the side away from its mean."""
        means, weights = self._components(which)
        zl, zh = (low - means) / self.std, (high - means) / self.std
        right = means <= low  # the interval is in the component's right tail: difference of survival functions
        total = np.where(right, ndtr(-zl) - ndtr(-zh), ndtr(zh) - ndtr(zl))
        return float(np.clip(weights @ total, 0.0, 1.0))

    @property
    def span(self) -> tuple[float, float]:
        """An interval outside which every component's mass is negligible (``_REACH`` stds)."""
        means = np.concatenate([self.means_a, self.means_b])
        return float(means.min()) - _REACH * self.std, float(means.max()) + _REACH * self.std

    # -- privacy profile -------------------------------------------------------------
    @functools.cached_property
    def _grid_ratio(self) -> tuple[np.ndarray, np.ndarray]:
        """``log p_b - log p_a`` on the grid where roots are bracketed (computed once)."""
        grid = np.linspace(*self.span, _GRID)
        return grid, self.log_ratio(grid)

    def e_gamma(self, gamma: float, *, forward: bool = True) -> float:
        """``sup_A P(A) - gamma Q(A)`` with ``(P, Q) = (a, b)`` (``forward``) or ``(b, a)``."""
        first, second = ("a", "b") if forward else ("b", "a")
        log_gamma = math.log(gamma)

        def excess(y):
            return float(self.log_density(y, first) - self.log_density(y, second) - log_gamma)

        low, high = self.span
        grid, ratio = self._grid_ratio
        values = (-ratio if forward else ratio) - log_gamma
        roots = [_root(excess, grid[i], grid[i + 1], 1e-13 * self.std)
                 for i in np.nonzero(np.sign(values[:-1]) * np.sign(values[1:]) < 0)[0]]
        roots += [float(grid[i]) for i in np.nonzero(values[1:-1] == 0)[0] + 1]
        edges = [-math.inf, *sorted(roots), math.inf]
        total = 0.0
        for left, right in zip(edges[:-1], edges[1:]):
            # the sign of the excess is constant between roots: test it inside the span (roots lie there)
            inside = 0.5 * (max(left, low) + min(right, high))
            if excess(inside) > 0:
                total += self.mass(left, right, first) - gamma * self.mass(left, right, second)
        return max(total, 0.0)

    def delta(self, epsilon: float) -> float:
        """``delta(eps) = max(E_{e^eps}(P||Q), E_{e^eps}(Q||P))``, exact to :data:`ERROR`."""
        gamma = math.exp(epsilon)
        return float(min(max(self.e_gamma(gamma), self.e_gamma(gamma, forward=False)), 1.0))

    def epsilon(self, delta: float) -> float:
        """The smallest ``eps`` with ``delta(eps) <= delta`` (:func:`mixture_epsilon`)."""
        return mixture_epsilon(self.delta, delta)

    def likelihood_ratio_law(self, cells: int = 20_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The law of the log-likelihood ratio under ``S`` and ``S'`` on ``cells`` cells of ``Y``.

        Cell masses are exact (normal CDFs, tails folded into the end
        cells); each cell's score is the ratio at its centre. The ratio is
        monotone in ``Y``, so thresholds on the score are thresholds on
        ``Y`` at cell edges. Returns ``(values, mass_a, mass_b)`` sorted by
        value, as ``instances.likelihood_ratio_law``.
        """
        low, high = self.span
        edges = np.linspace(low, high, cells + 1)
        centres = 0.5 * (edges[:-1] + edges[1:])
        bounds = edges.copy()
        bounds[0], bounds[-1] = -math.inf, math.inf
        masses = []
        for which in ("a", "b"):
            means, weights = self._components(which)
            z = (bounds[:, None] - means) / self.std
            below = ndtr(z)  # P(Y <= edge) per component
            above = ndtr(-z)
            right = (means <= bounds[:-1, None])
            cell = np.where(right, above[:-1] - above[1:], below[1:] - below[:-1])
            masses.append(np.maximum(cell @ weights, 0.0))
        values = self.log_ratio(centres)
        order = np.argsort(values, kind="stable")
        mass_a, mass_b = masses[0][order], masses[1][order]
        return values[order], mass_a / mass_a.sum(), mass_b / mass_b.sum()

    def log_likelihood_ratio(self, outputs: np.ndarray) -> np.ndarray:
        """The exact score ``log p_b - log p_a`` of released outputs (through :attr:`statistic`)."""
        if self.statistic is None:
            raise ValueError("these laws carry no statistic of the outputs")
        return self.log_ratio(self.statistic(np.asarray(outputs, dtype=float)))


def _root(function: Callable[[float], float], left: float, right: float, tolerance: float) -> float:
    """Brent's root in ``[left, right]``; the end nearer zero when rounding hides the sign change."""
    from scipy.optimize import brentq  # on first use: importing scipy.optimize takes a process about 0.7 s

    low, high = function(left), function(right)
    if low * high > 0:
        return left if abs(low) < abs(high) else right
    return brentq(function, left, right, xtol=tolerance)


def mixture_epsilon(delta_fn: Callable[[float], float], delta: float) -> float:
    """``eps(delta)`` of a continuous, non-increasing ``delta(eps)``, to 1e-12, rounded up.

    The root is bracketed by doubling from 1/4, located by Brent's method
    (about ten evaluations where bisection takes forty), and the bracket
    closed around it: ``delta_fn(low) > delta >= delta_fn(high)`` always
    holds, and the answer is ``high`` once ``high - low`` is below 1e-12
    (bisection finishes if the points next to Brent's root do not close it);
    beyond ``MAX_EPSILON`` (where ``e^eps`` nears the float range) the
    answer is ``inf``.
    """
    from scipy.optimize import brentq  # on first use, as _root does

    if delta_fn(0.0) <= delta:
        return 0.0
    low, high = 0.0, 0.25
    while delta_fn(high) > delta:
        if high >= MAX_EPSILON:
            return math.inf
        low, high = high, min(2 * high, MAX_EPSILON)
    tolerance = 1e-12 * max(1.0, high)
    root = brentq(lambda epsilon: delta_fn(epsilon) - delta, low, high, xtol=tolerance / 4)
    below, above = max(low, root - tolerance / 2), min(high, root + tolerance / 2)
    if below > low and delta_fn(below) > delta:
        low = below
    if above < high and delta_fn(above) <= delta:
        high = above
    while high - low > 1e-12 * max(1.0, high):
        middle = 0.5 * (low + high)
        if delta_fn(middle) <= delta:
            high = middle
        else:
            low = middle
    return high


def count_mixture(shift_a: float, shift_b: float, *, steps: int, rate: float, std: float,
                  offset: float = 0.0, statistic: Callable[[np.ndarray], np.ndarray] | None = None,
                  citation: str | None = None) -> MixtureLaws:
    """``Y = offset + K * shift + N(0, std^2)`` with ``K ~ Binom(steps, rate)``, under ``S`` and ``S'``.

    Parameters
    ----------
    shift_a, shift_b : float
        What one participation of the canary adds to ``Y`` in ``S`` and ``S'``.
    steps : int
        Steps ``T``.
    rate : float
        Probability that the canary is in a step's batch (independent across steps); for a fixed order,
        ``steps`` is the number of its uses and ``rate = 1``.
    std : float
        Std of the summed noise along ``u`` (``sqrt(T)`` times a step's).
    """
    from scipy.stats import binom  # on first use: importing scipy.stats takes a process about 0.5 s

    counts = np.arange(steps + 1)
    weights = binom.pmf(counts, steps, rate) if rate < 1 else (counts == steps).astype(float)
    extra = {"citation": citation} if citation else {}
    return MixtureLaws(offset + counts * shift_a, weights, offset + counts * shift_b, weights, std,
                       statistic=statistic, **extra)

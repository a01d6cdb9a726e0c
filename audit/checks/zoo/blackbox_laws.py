"""Exact output laws of the black-box algorithms on a pair of answer vectors, their epsilon and ceiling.

An :class:`OutputLaw` holds the probabilities of a partition of the output
space under ``S`` (``mass_a``) and ``S'`` (``mass_b``): outcomes are
enumerated where the output is discrete (noisy-max indices, RAPPOR bit
counts, the truncated geometric), and cells of a fine grid where it is
continuous (the noisy maximum, sums of Laplace log-ratios), each cell's mass
computed from the exact CDFs; the sparse vector technique's laws are in
:mod:`dpaudit.auditing.checks.zoo.svt_laws`. From it:

* the true pure epsilon of the pair, ``max_o |log(mass_b(o) / mass_a(o))|``
  (infinite where one side gives an outcome probability 0 and the other not;
  for cells, the largest ratio of cell masses, which approaches the density
  ratio's supremum from below);
* the statistical ceiling at ``N`` trials per side: the oracle test accepts
  outcomes in decreasing order of the likelihood ratio and a fraction of the
  boundary outcome (Neyman-Pearson); its bound from the *expected* counts, by
  the better of Clopper-Pearson and the conditional bound
  (:func:`dpaudit.auditing.statistics.ceiling.statistical_ceiling`). A partition coarser
  than the output can only lower it: the ceiling of a cell law is what the
  best test of the cells certifies;
* the ceiling's band: where 95% of audits at the oracle threshold land
  (:func:`dpaudit.auditing.statistics.ceiling.statistical_ceiling_band`), the spread a
  single run's certified bound has even with the best test.

References
----------
docs/theory.md section 8 (the black-box suite) and 3.4 (the ceiling).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dpaudit.auditing.statistics.ceiling import CeilingBand, statistical_ceiling, statistical_ceiling_band
from dpaudit.auditing.checks.zoo.blackbox import bloom_positions, geometric_cdf
from dpaudit.core.errors import ParameterError

__all__ = ["OutputLaw", "noisy_max_index_law", "noisy_max_value_law", "laplace_shift_law", "geometric_law",
           "rappor_law", "merged_law", "product_law", "noise_cdf", "log_noise_cdf", "laplace_between", "grid_edges"]


@dataclasses.dataclass(frozen=True)
class OutputLaw:
    """Probabilities of the same outcomes under ``S`` (``mass_a``) and ``S'`` (``mass_b``).

    ``sup_epsilon``, when given, is the supremum of the density ratio known
    in closed form (a continuous law whose cells only approach it).
    """

    mass_a: np.ndarray
    mass_b: np.ndarray
    method: str
    sup_epsilon: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mass_a", np.clip(np.asarray(self.mass_a, dtype=float), 0.0, None))
        object.__setattr__(self, "mass_b", np.clip(np.asarray(self.mass_b, dtype=float), 0.0, None))

    @property
    def outcomes(self) -> int:
        return int(self.mass_a.size)

    def log_ratio(self) -> np.ndarray:
        """``log(mass_b / mass_a)`` per outcome (+-inf where one side is 0; 0 for an impossible outcome)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log(self.mass_b) - np.log(self.mass_a)
        return np.where((self.mass_a > 0) | (self.mass_b > 0), ratio, 0.0)

    @property
    def true_epsilon(self) -> float:
        """The pair's pure epsilon: the largest absolute log ratio (``sup_epsilon`` when known)."""
        cells = float(np.max(np.abs(self.log_ratio())))
        return cells if self.sup_epsilon is None else max(cells, float(self.sup_epsilon))

    def ceiling(self, trials: int, *, confidence: float = 0.95, delta: float = 0.0,
                order: np.ndarray | None = None) -> float:
        """The most a threshold test (with a randomised boundary) certifies with ``trials`` per side.

        ``order`` lists the outcomes in the order a score accepts them (its values decreasing); by default
        the log-ratio's, the best order: then this is the law's ceiling, otherwise that score's.
        """
        return statistical_ceiling(*self._oracle_rates(order), trials=trials, delta=delta, confidence=confidence)

    def ceiling_band(self, trials: int, *, confidence: float = 0.95, delta: float = 0.0,
                     order: np.ndarray | None = None) -> CeilingBand:
        """:meth:`ceiling` with its band: where 95% of ideal threshold audits with ``trials`` per side land.

        The ceiling is a central figure: an audit at the oracle threshold certifies above it about half the
        time. The band is the 2.5% and 97.5% quantiles of the bound certified at the oracle threshold when
        the two error counts are drawn from their binomial laws (seeded: a law and ``trials`` always give
        the same band; docs/theory.md 3.4). A certified bound below the band's low end shows the cost of the
        audit's own test and of the trials it calibrates on, not only an unlucky draw.
        """
        return statistical_ceiling_band(*self._oracle_rates(order), trials=trials, delta=delta,
                                        confidence=confidence)

    def _oracle_rates(self, order: np.ndarray | None) -> tuple:
        """Error rates of the test that accepts the outcomes in ``order`` and a fraction of the next.

        The threshold ``t = k + g`` accepts the first ``k`` outcomes and a fraction ``g`` of outcome ``k``;
        returns the two rates as functions of ``t`` and the grid of thresholds searched.
        """
        if order is None:
            order = np.argsort(-self.log_ratio(), kind="stable")
        elif sorted(np.asarray(order).tolist()) != list(range(self.outcomes)):
            raise ParameterError(f"order must list each of the {self.outcomes} outcomes once, got order={order!r}")
        accept_a = np.concatenate([[0.0], np.cumsum(self.mass_a[order])])
        accept_b = np.concatenate([[0.0], np.cumsum(self.mass_b[order])])
        total_b = accept_b[-1]
        vertices = np.arange(accept_a.size, dtype=float)
        grid = np.union1d(np.linspace(0.0, vertices[-1], int(min(20_000, 64 * vertices[-1] + 1))), vertices)

        def false_positive_rate(t):
            return np.interp(t, vertices, accept_a)

        def false_negative_rate(t):
            return np.clip(total_b - np.interp(t, vertices, accept_b), 0.0, 1.0)
        return false_positive_rate, false_negative_rate, grid

    def reach(self, fraction: float = 0.9) -> float:
        """The larger side's probability of the outcomes whose ratio is at least ``fraction`` of the true epsilon.

        Small values say that the true epsilon lives in tails no affordable budget sees.
        """
        ratio = self.log_ratio()
        target = fraction * self.true_epsilon
        upper, lower = ratio >= target, ratio <= -target
        return float(max(self.mass_b[upper].sum(), self.mass_a[lower].sum()))


# -- continuous noise ------------------------------------------------------------------------------------

def noise_cdf(noise: str, x: np.ndarray, scale: float) -> np.ndarray:
    """CDF of ``Lap(0, scale)`` or ``Exp(scale)`` at ``x``."""
    if noise == "laplace":
        return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / scale), 1 - 0.5 * np.exp(-np.maximum(x, 0) / scale))
    return np.where(x <= 0, 0.0, -np.expm1(-np.maximum(x, 0) / scale))


def log_noise_cdf(noise: str, x: np.ndarray, scale: float) -> np.ndarray:
    """``log`` of :func:`noise_cdf`, accurate where the CDF is close to 1."""
    with np.errstate(divide="ignore"):
        if noise == "laplace":
            return np.where(x < 0, math.log(0.5) + np.minimum(x, 0) / scale,
                            np.log1p(-0.5 * np.exp(-np.maximum(x, 0) / scale)))
        return np.where(x <= 0, -np.inf, np.log(-np.expm1(-np.maximum(x, 1e-300) / scale)))


def laplace_between(low: np.ndarray, high: np.ndarray, scale: float) -> np.ndarray:
    """``P(low < X <= high)`` for ``X ~ Lap(0, scale)``, from the survival function above 0 (no cancellation)."""
    upper = low >= 0
    survival = 0.5 * (np.exp(-np.maximum(low, 0) / scale) - np.exp(-np.maximum(high, 0) / scale))
    return np.where(upper, survival, noise_cdf("laplace", high, scale) - noise_cdf("laplace", low, scale))


def grid_edges(low: float, high: float, step: float) -> np.ndarray:
    """Cell edges from ``low`` to ``high`` on multiples of ``step`` (answers and thresholds lie on them)."""
    return np.arange(math.floor(low / step), math.ceil(high / step) + 1) * step


def noisy_max_index_law(answers_a: np.ndarray, answers_b: np.ndarray, *, epsilon: float, noise: str,
                        step: float = 0.01) -> OutputLaw:
    """The argmax of ``answers + noise(2 / epsilon)`` (Ding et al. 2018, Alg. 5-6), integrated over the winner.

    ``P(argmax = i) = int prod_{j != i} F(x - q_j) dF(x - q_i)``, a Riemann-Stieltjes sum on cells of width
    ``step`` (cells aligned with the integer answers, so the exponential's jumps fall on edges).
    """
    scale = 2.0 / epsilon
    masses = []
    for answers in (answers_a, answers_b):
        edges = grid_edges(answers.min() - (40 * scale if noise == "laplace" else 0), answers.max() + 40 * scale, step)
        middle = 0.5 * (edges[1:] + edges[:-1])
        cdf_mid = noise_cdf(noise, middle[None, :] - answers[:, None], scale)
        cell = np.diff(noise_cdf(noise, edges[None, :] - answers[:, None], scale), axis=1)
        others = np.prod(cdf_mid, axis=0)[None, :] / np.where(cdf_mid > 0, cdf_mid, 1.0)
        mass = (cell * others).sum(axis=1)
        masses.append(mass / mass.sum())
    return OutputLaw(masses[0], masses[1], f"integrated (cells of {step:g})")


def noisy_max_value_law(answers_a: np.ndarray, answers_b: np.ndarray, *, epsilon: float, noise: str,
                        step: float = 0.25) -> OutputLaw:
    """The noisy maximum (Ding et al. 2018, Alg. 7-8): cells of the CDF ``prod_j F(m - q_j)``.

    For Laplace noise the density ratio tends to ``exp(sum(q' - q) / scale)`` in the lower tail
    (every noisy answer below its mean) and to ``sum exp(q'/scale) / sum exp(q/scale)`` in the upper
    one; ``sup_epsilon`` is the larger (the cells show the ratio in between).
    """
    scale = 2.0 / epsilon
    both = np.concatenate([answers_a, answers_b])
    edges = grid_edges(both.min() - (40 * scale if noise == "laplace" else 0), both.max() + 40 * scale, step)
    edges = np.concatenate([[-np.inf], edges, [np.inf]])
    masses = []
    for answers in (answers_a, answers_b):
        log_cdf = log_noise_cdf(noise, edges[None, :] - answers[:, None], scale).sum(axis=0)
        below, above = np.exp(log_cdf), -np.expm1(log_cdf)  # P(max <= x), P(max > x) without cancellation
        masses.append(np.where(below[1:] < 0.5, np.diff(below), above[:-1] - above[1:]))
    sup = None
    if noise == "laplace":  # the two tails: every answer low (ratio exp(sum d / scale)), one answer high
        lower = abs(float(np.sum(answers_b - answers_a))) / scale
        upper = abs(float(np.logaddexp.reduce(answers_b / scale) - np.logaddexp.reduce(answers_a / scale)))
        sup = max(lower, upper)
    return OutputLaw(masses[0], masses[1], f"integrated (cells of {step:g})", sup)


# -- sums of independent Laplace shifts -----------------------------------------------------------------

def laplace_shift_law(shifts: np.ndarray, *, scale: float, resolution: int = 64) -> OutputLaw:
    """The log-likelihood ratio of independent ``Lap(q_i, scale)`` coordinates against ``Lap(q_i + d_i, scale)``.

    Coordinate ``i`` contributes ``u_i = |x - q_i| - |x - q_i - d_i|``: ``-|d_i|`` with probability 1/2
    under ``S``, ``+|d_i|`` with probability ``exp(-|d_i| / scale) / 2``, linear in between (cells of
    ``1 / resolution``); the sum over coordinates is the sufficient statistic, its law the convolution.
    Noisy histograms, prefix sums (a bijection of the noisy answers) and parallel Laplace mechanisms
    are all of this form. The supremum ``sum |d_i| / scale`` is an atom (every coordinate in its tail).
    """
    shifts = np.abs(np.asarray(shifts, dtype=float))
    shifts = shifts[shifts > 0]
    law_a, law_b = np.ones(1), np.ones(1)
    for d in shifts:
        cells = int(round(2 * d * resolution))
        edges = np.linspace(0.0, d, cells + 1)  # x in (0, d): u = 2x - d, one cell of u per cell of x
        inner_a = np.diff(noise_cdf("laplace", edges, scale))
        inner_b = np.diff(noise_cdf("laplace", edges - d, scale))
        one_a = np.concatenate([[0.5], inner_a, [0.5 * math.exp(-d / scale)]])
        one_b = np.concatenate([[0.5 * math.exp(-d / scale)], inner_b, [0.5]])
        law_a, law_b = np.convolve(law_a, one_a), np.convolve(law_b, one_b)
    return OutputLaw(law_a, law_b, f"convolution (cells of 1/{resolution})", float(shifts.sum() / scale))


# -- enumerated discrete laws -----------------------------------------------------------------------------

def geometric_law(count_a: int, count_b: int, *, epsilon: float, n: int) -> OutputLaw:
    """GeoSample's pmf (Balcer & Vadhan 2018, Alg. 4.8): differences of its integer table over ``d``."""
    masses = []
    for count in (count_a, count_b):
        table, d = geometric_cdf(count, epsilon=epsilon, n=n)
        masses.append(np.diff(np.concatenate([[0], table])) / d)
    return OutputLaw(masses[0], masses[1], "enumerated")


def rappor_law(value_a: float, value_b: float, *, hashes: int, size: int, f: float, p: float | None = None,
               q: float | None = None) -> OutputLaw:
    """RAPPOR's report (one-time when ``p``, ``q`` are not given): only the bits where the filters differ matter.

    Bits are independent given the value; with ``D1`` bits set for ``S`` only and ``D0`` for ``S'`` only,
    the counts of reported 1s among them are binomial on each side: outcomes ``(k1, k0)``.
    """
    from scipy.stats import binom

    one_a, one_b = (np.zeros(size, dtype=bool) for _ in range(2))
    one_a[bloom_positions(value_a, hashes=hashes, size=size)] = True
    one_b[bloom_positions(value_b, hashes=hashes, size=size)] = True
    d1, d0 = int(np.sum(one_a & ~one_b)), int(np.sum(one_b & ~one_a))
    keep_one, keep_zero = 1 - f / 2, f / 2  # P(permanent bit = 1) for a filter bit 1, 0
    if p is not None and q is not None:
        keep_one, keep_zero = keep_one * q + (1 - keep_one) * p, keep_zero * q + (1 - keep_zero) * p
    k1, k0 = np.meshgrid(np.arange(d1 + 1), np.arange(d0 + 1), indexing="ij")
    mass_a = binom.pmf(k1, d1, keep_one) * binom.pmf(k0, d0, keep_zero)
    mass_b = binom.pmf(k1, d1, keep_zero) * binom.pmf(k0, d0, keep_one)
    return OutputLaw(mass_a.ravel(), mass_b.ravel(), f"enumerated ({d1 + d0} differing bits)")


def merged_law(law: OutputLaw, resolution: float = 1e-4) -> OutputLaw:
    """``law`` with the outcomes whose log ratios round alike (to ``resolution``) merged into one.

    Outcomes of equal ratio are one outcome to every likelihood-ratio test, so merging them leaves the
    ceiling as it is; rounding to ``resolution`` lowers it by at most about ``resolution``.
    """
    ratio = law.log_ratio()
    finite = np.isfinite(ratio)
    key = np.where(finite, np.round(np.where(finite, ratio, 0.0) / resolution), 0.0)
    key = np.where(finite, key, np.where(ratio > 0, np.inf, -np.inf))  # each infinite side its own outcome
    _, inverse = np.unique(key, return_inverse=True)
    return OutputLaw(np.bincount(inverse.ravel(), law.mass_a), np.bincount(inverse.ravel(), law.mass_b),
                     f"{law.method}, merged by ratio (to {resolution:g})", law.sup_epsilon)


def product_law(first: OutputLaw, second: OutputLaw, resolution: float | None = None) -> OutputLaw:
    """The law of two independent outputs released together (each first merged by ratio to ``resolution``
    when given: :func:`merged_law`, for factors of many outcomes)."""
    if resolution is not None:
        first, second = merged_law(first, resolution), merged_law(second, resolution)
    return OutputLaw(np.outer(first.mass_a, second.mass_a).ravel(), np.outer(first.mass_b, second.mass_b).ravel(),
                     f"product ({first.method}; {second.method})")

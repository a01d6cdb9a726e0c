"""What a one-run audit could certify with canaries free of interference (docs/theory.md 9).

Each canary of a one-run audit is a pair of score laws: the law of its
score when it was included (``a``) and when it was not (``b``). Free of
interference, the canaries' scores are independent draws from those laws;
in one training they also carry the other canaries' gradients and the
data's, which only blurs them. This module draws the scores of ``m``
canaries free of interference, each included by a fair coin, from the laws
of one canary (a finite Gaussian mixture such as
:class:`dpaudit.mechanisms.accounting.last_iterate.MixtureLaws`: for a
trained model the last-iterate linear-loss surrogate, ``Y = K + N(0, sigma^2 T)``
with ``K ~ Binom(T, q)``), runs a one-run test on them, and repeats over
seeded draws: the median is the figure a report shows beside the certified
bound, and the 10% and 90% quantiles say how far one audit's luck moves it.
It is a reference, not a bound: the certified bound of a real run may land
above it by chance, and below it when its canaries interfere.

The laws matter, not only their epsilon. A subsampled Gaussian's epsilon at
a small delta comes from its rare canaries drawn in many batches; a thousand
canaries seldom show them, and the test sees the bulk of the laws, whose
Gaussian-pair mu is smaller than the mu of the Gaussian pair of the same
epsilon. On the CNN of ``examples/models/cnn`` (surrogate epsilon 1.23 at
1e-5, equivalent mu 0.324) 1,000 canaries of the Gaussian pair certify a
median f-DP bound of 0.41 over 101 draws, and 1,000 canaries with the
surrogate's own laws 0.23.

References
----------
Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023 (the game).
Keinan, Shenfeld, Ligett, "How Well Can Differential Privacy Be Audited in One Run?", arXiv:2503.07199,
2025 (interference between canaries).
docs/theory.md 9 (one-run audits, and what one run can show).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np

from dpaudit.auditing.statistics.one_run_fdp import METHODS, one_run_audit
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_int

__all__ = ["FREE_DRAWS", "FREE_LEVELS", "FREE_SEED", "FreeFigure", "GaussianPair", "ScoreLaws",
           "canary_overlap", "draw_free_scores", "interference_free", "interference_share"]

FREE_DRAWS = 21  #: seeded draws per figure (odd: the median is one draw's bound)
FREE_LEVELS = (0.1, 0.9)  #: the quantiles of the draws' bounds shown as the figure's band
FREE_SEED = 71  #: first spawn key of the draws: a figure of the same laws and canaries is always the same


class ScoreLaws(Protocol):
    """A canary's score laws: ``sum_k w_k N(mean_k, std^2)`` when included (``a``) and when not (``b``)."""

    means_a: np.ndarray
    weights_a: np.ndarray
    means_b: np.ndarray
    weights_b: np.ndarray
    std: float


@dataclasses.dataclass(frozen=True)
class GaussianPair:
    """The laws ``N(mu, 1)`` (included) and ``N(0, 1)`` (not): a canary of mu-GDP."""

    mu: float

    @property
    def means_a(self) -> np.ndarray:
        return np.array([float(self.mu)])

    @property
    def means_b(self) -> np.ndarray:
        return np.array([0.0])

    weights_a = weights_b = np.array([1.0])
    std = 1.0


@dataclasses.dataclass(frozen=True)
class FreeFigure:
    """What one run of canaries free of interference certifies by one test, over seeded draws.

    Attributes
    ----------
    method : str
        The one-run test (``audit.statistics.one_run_fdp.METHODS``).
    median : float
        The median of the draws' certified epsilon.
    low, high : float
        Their quantiles at :data:`FREE_LEVELS` (8 in 10 draws land between them).
    draws, canaries : int
    """

    method: str
    median: float
    low: float
    high: float
    draws: int
    canaries: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_laws(laws: Any) -> None:
    names = ("means_a", "weights_a", "means_b", "weights_b", "std")
    if not all(hasattr(laws, name) for name in names):
        raise ParameterError(f"laws must have {', '.join(names)} (a Gaussian mixture per side), got {laws!r}")


def _component(rng: np.random.Generator, means: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    return np.asarray(means, dtype=float)[rng.choice(weights.size, size, p=weights / weights.sum())]


def draw_free_scores(laws: ScoreLaws, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, included)`` of ``canaries`` canaries free of interference: each included by a fair coin,
    its score drawn from ``laws``' side ``a`` if included, else ``b``, independently of the others."""
    _check_laws(laws)
    check_int("canaries", canaries, minimum=2)
    included = rng.integers(0, 2, canaries)
    inside = int(included.sum())
    means = np.empty(canaries)
    means[included == 1] = _component(rng, laws.means_a, laws.weights_a, inside)
    means[included == 0] = _component(rng, laws.means_b, laws.weights_b, canaries - inside)
    return means + float(laws.std) * rng.standard_normal(canaries), included


def interference_free(laws: ScoreLaws, *, canaries: int, delta: float, confidence: float,
                      method: str = "fdp", draws: int = FREE_DRAWS, seed: int = 0) -> FreeFigure:
    """The certified epsilon of ``method`` on ``draws`` seeded draws of :func:`draw_free_scores`: median and band.

    Draw ``i`` uses ``SeedSequence(seed, spawn_key=(FREE_SEED, i))`` for its scores and ``seed`` for the test's
    calibration split, as an audit of that seed does.
    """
    check_choice("method", method, METHODS)
    check_int("draws", draws, minimum=1)
    bounds = []
    for draw in range(draws):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(FREE_SEED, draw)))
        scores, included = draw_free_scores(laws, canaries, rng)
        bounds.append(one_run_audit(scores, included, delta=delta, confidence=confidence, method=method,
                                    seed=seed).epsilon_lower_bound)
    low, high = np.quantile(bounds, FREE_LEVELS)
    return FreeFigure(method, float(np.median(bounds)), float(low), float(high), draws, canaries)


def canary_overlap(canaries: int, parameters: int, directions: str) -> float:
    """The mean over canaries of ``sum_{k != i} <u_i, u_k>^2``: how many other canaries' gradients each canary's
    score carries, in units of one canary along its own direction.

    ``"dirac"`` (:func:`dpaudit.auditing.jobs.one_run_design.dirac_coordinates`): 0 while canaries are no more
    than parameters, else the canaries sharing each coordinate less one, averaged; no ``m`` unit vectors in
    ``P`` dimensions do better, as the sum over all ordered pairs is at least ``m^2 / P - m`` (the frame
    potential's bound) and equal blocks reach it when ``P`` divides ``m``. ``"random"``: ``(m - 1) / P`` in
    expectation (independent uniform directions).
    """
    m = check_int("canaries", canaries, minimum=1)
    p = check_int("parameters", parameters, minimum=1)
    check_choice("directions", directions, ("dirac", "random"))
    if directions == "random":
        return (m - 1) / p
    full, extra = divmod(m, p)
    return (extra * (full + 1) * full + (p - extra) * full * max(full - 1, 0)) / m


def interference_share(laws: ScoreLaws, overlap: float) -> float:
    """The variance the other canaries add to a canary's score, as a share of the noise's variance along it:
    each overlapping canary is included with probability 1/2 and adds its contribution (``laws``' side ``a``,
    mean square ``sum_k w_k mean_k^2``) times the overlap."""
    _check_laws(laws)
    weights = np.asarray(laws.weights_a, dtype=float)
    square = float(np.sum(weights / weights.sum() * np.asarray(laws.means_a, dtype=float) ** 2))
    return overlap * square / 2 / float(laws.std) ** 2

"""Few-valued and mixed-output algorithms with exact output laws, for the power and soundness tests of the
``discrete`` score and randomised thresholds (docs/theory.md 7).

Each maker returns an :class:`Algorithm`: the batched mechanism (``records`` are the query answers), a
neighbouring pair of answer vectors, the claim, and the exact epsilon of that pair (NaN where not
computed), computed from the exact output law (enumeration and one-dimensional integration).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable

import numpy as np

import dpaudit
from dpaudit.auditing.statistics.ceiling import statistical_ceiling
from dpaudit.mechanisms.dataset import as_dataset

SENTINEL = -1000.0  #: "below the threshold"
GRID = 2.0 ** -10  #: released noisy values are snapped to this grid: their low bits carry nothing (theory 1.9)
ABORTED = -1.0  #: "not answered: the algorithm stopped"


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    mechanism: object
    pair: tuple[np.ndarray, np.ndarray]
    claim: float
    exact: float
    #: the exact output law on each dataset (outcome probabilities, same order), when it is discrete
    law: tuple[np.ndarray, np.ndarray] | None = None
    #: the exact log-ratio ``log(P'(o) / P(o))`` of each output row, where known in closed form
    log_ratio: Callable[[np.ndarray], np.ndarray] | None = None

    def sample(self, side: int, trials: int, seed: int) -> np.ndarray:
        """``trials`` outputs on ``S`` (side 0) or ``S'`` (side 1)."""
        return np.asarray(self.mechanism.sample(as_dataset(self.pair[side]), trials=trials, seed=seed))

    def ceiling(self, trials: int, confidence: float = 0.95) -> float | None:
        """The most a threshold test with a tie fraction can certify from ``trials`` per side at the expected
        counts (docs/theory.md 3.4, 7): superlevel sets of the likelihood ratio, the boundary outcome
        split (linear interpolation between consecutive outcomes)."""
        if self.law is None:
            return None
        p, q = self.law
        with np.errstate(divide="ignore"):
            ratio = np.log(q) - np.log(p)
        order = np.argsort(ratio)
        tail_a = np.concatenate([np.cumsum(p[order][::-1])[::-1], [0.0]])
        below_b = np.concatenate([[0.0], np.cumsum(q[order])])
        grid = np.linspace(0, order.size, 64 * order.size + 1)
        positions = np.arange(order.size + 1)
        return statistical_ceiling(lambda t: np.interp(t, positions, tail_a),
                                   lambda t: np.interp(t, positions, below_b),
                                   grid, trials=trials, delta=0.0, confidence=confidence)


def _laplace_cdf(x, scale):
    return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / scale), 1 - 0.5 * np.exp(-np.maximum(x, 0) / scale))


def _laplace(rng: np.random.Generator, scale: float, shape) -> np.ndarray:
    return rng.laplace(0.0, scale, size=shape)


def _exact_pure(law_a: np.ndarray, law_b: np.ndarray) -> float:
    with np.errstate(divide="ignore"):
        ratio = np.abs(np.log(law_a) - np.log(law_b))
    return float(np.max(ratio))


def randomized_response(epsilon: float, k: int = 4) -> Algorithm:
    """k-ary randomised response on one record in ``{0, ..., k-1}``: exactly ``epsilon``-DP."""
    keep = math.exp(epsilon) / (math.exp(epsilon) + k - 1)

    def fn(records, rng, trials):
        truth = int(np.ravel(records)[0])
        other = (truth + rng.integers(1, k, size=trials)) % k
        return np.where(rng.random(trials) < keep, truth, other)[:, None]

    law_a = np.full(k, (1 - keep) / (k - 1))
    law_a[0] = keep
    law_b = np.roll(law_a, 1)
    return Algorithm("randomized-response", dpaudit.from_batched_callable(fn, 1, name="rr"),
                     (np.array([0.0]), np.array([1.0])), epsilon, epsilon, (law_a, law_b))


def noisy_max_index(epsilon: float) -> Algorithm:
    """Report noisy max (the index) with Laplace(2/eps) noise over 4 counting queries: ``epsilon``-DP."""
    scale = 2.0 / epsilon

    def fn(records, rng, trials):
        answers = np.ravel(records)
        return np.argmax(answers + _laplace(rng, scale, (trials, answers.size)), axis=1)[:, None].astype(float)

    pair = (np.array([1.0, 1.0, 1.0, 1.0]), np.array([2.0, 0.0, 0.0, 0.0]))
    grid = np.linspace(-60 * scale, 60 * scale, 400_001)

    def law(answers):
        density = np.exp(-np.abs(grid[None, :] - answers[:, None]) / scale) / (2 * scale)
        cdf = _laplace_cdf(grid[None, :] - answers[:, None], scale)
        rest = np.prod(cdf, axis=0)
        mass = np.trapezoid(density * rest / np.maximum(cdf, 1e-300), grid, axis=1)
        return mass / mass.sum()

    law_a, law_b = law(pair[0]), law(pair[1])
    return Algorithm("noisy-max-index", dpaudit.from_batched_callable(fn, 1, name="noisy-max-index"), pair,
                     epsilon, _exact_pure(law_a, law_b), (law_a, law_b))


def _svt_law(answers, threshold, rho_scale, nu_scale, cutoff: bool):
    """Exact pmf of sparse-vector outputs (c = 1) over every outcome, integrating over the threshold noise."""
    grid = np.linspace(-60 * rho_scale, 60 * rho_scale, 24_001)
    density = np.exp(-np.abs(grid) / rho_scale) / (2 * rho_scale)
    below = _laplace_cdf(threshold + grid[None, :] - answers[:, None], nu_scale)  # P(q_i + nu_i < T + rho)
    outcomes = _svt_outcomes(answers.size, cutoff)
    masses = []
    for outcome in outcomes:
        terms = np.ones_like(grid)
        for i, value in enumerate(outcome):
            if value == 1:
                terms = terms * (1 - below[i])
            elif value == 0:
                terms = terms * below[i]
        masses.append(np.trapezoid(density * terms, grid))
    masses = np.array(masses)
    return outcomes, masses / masses.sum()


def _svt_outcomes(m: int, cutoff: bool) -> list[tuple[float, ...]]:
    if not cutoff:
        return list(itertools.product((0.0, 1.0), repeat=m))
    rows = [tuple([0.0] * k + [1.0] + [ABORTED] * (m - k - 1)) for k in range(m)]
    return rows + [tuple([0.0] * m)]


def svt_booleans(epsilon: float, *, cutoff: bool = True, queries: int = 6) -> Algorithm:
    """Sparse vector (Lyu, Su, Li 2017, Alg. 1, c = 1): above (1) / below (0), ``-1`` after it stops.

    Threshold noise Laplace(2/eps), query noise Laplace(4/eps): ``epsilon``-DP. Without the cutoff it
    answers every query (Alg. 6-like): no longer ``epsilon``-DP (its exact epsilon is computed).
    """
    rho_scale, nu_scale, threshold = 2.0 / epsilon, 4.0 / epsilon, 0.5

    def fn(records, rng, trials):
        answers = np.ravel(records)
        rho = _laplace(rng, rho_scale, (trials, 1))
        above = answers[None, :] + _laplace(rng, nu_scale, (trials, answers.size)) >= threshold + rho
        if not cutoff:
            return above.astype(float)
        first = np.where(above.any(axis=1), np.argmax(above, axis=1), answers.size)
        position = np.arange(answers.size)[None, :]
        return np.where(position < first[:, None], 0.0, np.where(position == first[:, None], 1.0, ABORTED))

    half = queries // 2  # the first half of the answers one lower, the rest one higher
    pair = (np.r_[np.ones(half), np.zeros(queries - half)], np.r_[np.zeros(half), np.ones(queries - half)])
    _, law_a = _svt_law(pair[0], threshold, rho_scale, nu_scale, cutoff)
    _, law_b = _svt_law(pair[1], threshold, rho_scale, nu_scale, cutoff)
    name = "svt1-booleans" if cutoff else "svt-no-cutoff"
    return Algorithm(name, dpaudit.from_batched_callable(fn, queries, name=name), pair, epsilon,
                     _exact_pure(law_a, law_b), (law_a, law_b))


def svt_noisy_answers(epsilon: float, queries: int = 6) -> Algorithm:
    """Sparse vector releasing the noisy answer it compared (SVT3-like, c = 1), not claimed private.

    Lyu, Su and Li show that its privacy loss grows without bound with the number of queries; for a
    fixed number it is finite, and not computed here (``exact`` is NaN).
    """
    rho_scale, nu_scale, threshold = 2.0 / epsilon, 4.0 / epsilon, 0.5

    def fn(records, rng, trials):
        answers = np.ravel(records)
        rho = _laplace(rng, rho_scale, (trials, 1))
        noisy = answers[None, :] + _laplace(rng, nu_scale, (trials, answers.size))
        above = noisy >= threshold + rho
        first = np.where(above.any(axis=1), np.argmax(above, axis=1), answers.size)
        position = np.arange(answers.size)[None, :]
        released = np.round(noisy / GRID) * GRID
        return np.where(position < first[:, None], SENTINEL, np.where(position == first[:, None], released, ABORTED))

    pair = (np.zeros(queries), np.ones(queries))
    return Algorithm("svt-noisy-answers", dpaudit.from_batched_callable(fn, queries, name="svt-noisy-answers"),
                     pair, epsilon, math.nan)


def sentinel_or_value(epsilon: float, *, coordinates: int = 1, values: str = "laplace") -> Algorithm:
    """Mixed output: ``-1000`` when a noisy answer falls below a threshold, else a noisy value of the answer.

    Each of the ``coordinates`` answers is read so on its own with ``share = epsilon / coordinates``, half for
    the comparison (Laplace noise of scale ``2 / share`` on a sensitivity-1 answer) and half for the value:
    ``epsilon``-DP by composition. The value is, with ``values="laplace"``, a fresh noisy answer (Laplace of
    scale ``2 / share``, snapped to a grid of 2^-10: post-processing that keeps the tails' ratio), whose
    log-ratio between answers 0 and 1 is a step; with ``values="exponential"``, a point ``v`` of the grid
    ``0, 2^-10, ..., 1`` drawn with probability proportional to ``exp(share (answer - 1/2) v)``, whose
    log-ratio ``share (v - 1/2)`` is a line (the two weights' sums differ by ``exp(share / 2)``, by the
    grid's symmetry). The pair moves every answer from 0 to 1 (threshold 0.5): all coordinates move alike
    (one group, ``attacks.value_counts.record_groups``). The coordinates are independent, so the exact
    epsilon, in closed form, is the larger over the two directions of the sum of the coordinates' largest
    log-ratios.
    """
    scale, threshold = 2.0 / (epsilon / coordinates), 0.5
    share = epsilon / coordinates
    grid = np.arange(int(1 / GRID) + 1) * GRID

    def fn(records, rng, trials):
        answers = np.ravel(records)[None, :]
        passed = answers + _laplace(rng, scale, (trials, coordinates)) >= threshold
        if values == "laplace":
            value = np.round((answers + _laplace(rng, scale, (trials, coordinates))) / GRID) * GRID
        else:
            uniform = rng.random((trials, coordinates))
            value = np.empty((trials, coordinates))
            for j, answer in enumerate(answers[0]):  # one inverse CDF per coordinate, all trials at once
                weights = np.exp(share * (answer - 0.5) * grid)
                cdf = np.cumsum(weights) / weights.sum()
                value[:, j] = grid[np.minimum(np.searchsorted(cdf, uniform[:, j], side="right"), grid.size - 1)]
        return np.where(passed, value, SENTINEL)

    below = [float(_laplace_cdf(threshold - q, scale)) for q in (0.0, 1.0)]  # P[sentinel] at answers 0, 1
    released = math.log((1 - below[1]) / (1 - below[0]))  # a value's log-ratio (S' over S) before its noise
    towards_b = max(math.log(below[1] / below[0]), released + share / 2)
    towards_a = max(math.log(below[0] / below[1]), share / 2 - released)
    exact = coordinates * max(towards_b, towards_a)

    def log_ratio(outputs: np.ndarray) -> np.ndarray:  # exact for the exponential values (on the grid)
        outputs = np.asarray(outputs, dtype=float)
        return np.where(outputs == SENTINEL, math.log(below[1] / below[0]),
                        released + share * (outputs - 0.5)).sum(axis=1)
    name = "sentinel-or-value" if coordinates == 1 and values == "laplace" else \
        f"sentinels-or-values-{coordinates}-{values}"
    return Algorithm(name, dpaudit.from_batched_callable(fn, coordinates, name=name),
                     (np.zeros(coordinates), np.ones(coordinates)), epsilon, exact,
                     log_ratio=log_ratio if values == "exponential" else None)

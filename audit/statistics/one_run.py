"""Auditing in one run (Steinke, Nasr, Jagielski 2023), docs/theory.md 3.3.

``m`` canaries are each included with probability 1/2; the attacker makes
``r`` guesses of which were included, ``v`` of them correct. Under
``(eps, delta)``-DP, with ``q = e^eps / (1 + e^eps)``::

    p(eps) = P[Bin(r, q) >= v] + 2 m delta max_{1<=i<=v} P[v - i <= Bin(r, q) < v] / i

and ``eps_lb = sup { eps : p(eps) < beta }``.

References
----------
Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run",
NeurIPS 2023, Thm 3.1 / Prop. 5.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.stats import binom

from dpaudit.auditing.statistics.confidence import check_confidence, check_delta
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int

__all__ = ["MU_MAX", "OneRunBound", "largest_rejected_mu", "one_run_epsilon", "one_run_from_scores"]

#: The largest mu a one-run test of f-DP is searched up to.
MU_MAX = 40.0


@dataclasses.dataclass(frozen=True, slots=True)
class OneRunBound:
    """The certified epsilon of a one-run audit and its counts."""

    epsilon_lower_bound: float
    delta: float
    confidence: float
    canaries: int
    guesses: int
    correct: int
    method: str = "one-run"

    def to_dict(self):
        return dataclasses.asdict(self)


def _p_value(eps: float, *, m: int, r: int, v: int, delta: float) -> float:
    q = math.exp(eps) / (1 + math.exp(eps)) if eps < 700 else 1.0
    tail = float(binom.sf(v - 1, r, q))  # P[Bin(r, q) >= v]
    if delta == 0 or v == 0:
        return tail
    i = np.arange(1, v + 1)
    # P[v - i <= Bin < v] = F(v - 1) - F(v - i - 1)
    window = binom.cdf(v - 1, r, q) - binom.cdf(v - i - 1, r, q)
    return tail + 2 * m * delta * float(np.max(window / i))


def one_run_epsilon(*, canaries: int, guesses: int, correct: int, delta: float,
                    confidence: float = 0.95) -> OneRunBound:
    """``sup {eps : p(eps) < beta}`` by bisection (rounded down)."""
    m = check_int("canaries", canaries, minimum=1)
    r = check_int("guesses", guesses, minimum=0, maximum=m)
    v = check_int("correct", correct, minimum=0, maximum=r)
    delta = check_delta(delta)
    beta = 1 - check_confidence(confidence)
    if _p_value(0.0, m=m, r=r, v=v, delta=delta) >= beta:
        eps = 0.0
    else:
        low, high = 0.0, 1.0
        while _p_value(high, m=m, r=r, v=v, delta=delta) < beta and high < 1e3:
            low, high = high, 2 * high
        for _ in range(80):
            mid = 0.5 * (low + high)
            if _p_value(mid, m=m, r=r, v=v, delta=delta) < beta:
                low = mid
            else:
                high = mid
        eps = low
    return OneRunBound(eps, delta, 1 - beta, m, r, v)


def one_run_from_scores(scores, included, *, guesses_positive: int, guesses_negative: int,
                        delta: float, confidence: float = 0.95) -> OneRunBound:
    """Guess 'included' for the top scores and 'excluded' for the bottom ones, then certify.

    ``scores`` are larger for included canaries; ``included`` are the true
    0/1 inclusion bits (drawn independently with probability 1/2 *before*
    the run). Abstaining on the middle is allowed by the theorem.
    """
    scores = np.asarray(scores, dtype=float)
    truth = np.asarray(included).astype(bool)
    if scores.shape != truth.shape or scores.ndim != 1:
        raise ParameterError(f"scores and included must be 1-D of equal length, got {scores.shape} and {truth.shape}")
    k_pos = check_int("guesses_positive", guesses_positive, minimum=0)
    k_neg = check_int("guesses_negative", guesses_negative, minimum=0)
    if k_pos + k_neg > scores.size:
        raise ParameterError(f"guesses_positive + guesses_negative must be <= {scores.size}")
    order = np.argsort(scores)
    correct = int(truth[order[scores.size - k_pos:]].sum()) if k_pos else 0
    correct += int((~truth[order[:k_neg]]).sum())
    return one_run_epsilon(canaries=scores.size, guesses=k_pos + k_neg, correct=correct,
                           delta=delta, confidence=confidence)


def largest_rejected_mu(rejects, *, beat: float = 0.0) -> float:
    """The largest mu that ``rejects`` (a vectorised test, mu values -> rejected) rejects, rounded down; 0 if
    none, and 0 at once when ``beat`` is not rejected (the caller already has a bound that large).

    ``beat`` alone first (most counts under no leakage stop there), then a doubling grid up to
    :data:`MU_MAX`, then two rounds of 16 points between the last rejected and the first kept value.
    """
    if not rejects(np.array([beat]))[0]:
        return 0.0
    grid = np.array([beat, *[value for value in (0.25, 0.5, 1, 2, 4, 8, 16, MU_MAX) if value > beat]])
    last = int(np.nonzero(rejects(grid))[0].max())
    if last == grid.size - 1:
        return float(grid[-1])
    low, high = float(grid[last]), float(grid[last + 1])
    for _ in range(2):
        points = np.linspace(low, high, 17)
        last = int(np.nonzero(rejects(points))[0].max())
        low, high = float(points[last]), float(points[min(last + 1, 16)])
    return max(float(np.nextafter(low, -np.inf)), 0.0) if low > 0 else 0.0

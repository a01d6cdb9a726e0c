"""Sensitivity of a correlated-noise release over a participation schema (docs/theory.md 12.2).

Every noisy gradient of a DP-MF training is ``G + sigma L M z`` with noise
covariance ``sigma^2 L^2 K`` along the steps (``accounting.strategies``). A
record that participates at the steps ``pi`` moves the clipped gradient sum by
``h_t`` (``|h_t| <= L``; ``2 L`` for replace-one) at ``t in pi``; the release
is a Gaussian mechanism whose ``mu`` is

    mu^2 = sum_{i, j in pi} P_ij <h_i, h_j> / (sigma L)^2,    P = K^{-1}

(for a square strategy ``P = C^T C`` and ``mu = |C H|_F / (sigma L)``). Its
worst case over the records is the *sensitivity* of the strategy for the
schema. Where ``P`` is non-negative on the pattern, equal gradients
``h_t = L u`` attain the maximum, ``1_pi^T P 1_pi``: the value is exact, and a
canary with one direction at every participation attains it. Elsewhere
``sum |P_ij|`` over the pattern is a certified upper bound (said so); for a
one-dimensional model the maximum over signs is exact.

Schemas: *cyclic* (the records cut once into the batches of an epoch and
visited in that order every epoch: slot ``j`` participates at ``j, j + p,
...``, ``p`` steps per epoch) and *b-min-separation* (at most ``k``
participations, any two at least ``b`` steps apart; Choquette-Choo et al.
2023), of which cyclic order with ``p >= b`` is one pattern.

References
----------
Choquette-Choo, McMahan, Rush, Thakurta, "Multi-Epoch Matrix Factorization
Mechanisms for Private Machine Learning", ICML 2023 (sensitivity over
participation schemas; non-negative ``C^T C``).
Choquette-Choo et al., "(Amplified) Banded Matrix Factorization", NeurIPS
2023 (b-min-separation).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

__all__ = ["PatternValue", "cyclic_patterns", "cyclic_sensitivity", "minsep_sensitivity", "pattern_value"]

_SIGNS_UP_TO = 14  # participations up to which a one-dimensional pattern's signs are enumerated exactly


@dataclasses.dataclass(frozen=True, slots=True)
class PatternValue:
    """``squared``: the squared sensitivity (unit per-participation difference); ``exact``: attained (else a
    certified upper bound); ``how``: why, in words; ``pattern``: the 0-based steps of the worst pattern."""

    squared: float
    exact: bool
    how: str
    pattern: tuple[int, ...]


def cyclic_patterns(steps: int, epochs: int) -> np.ndarray:
    """The patterns of cyclic order: row ``j`` holds the 0-based steps ``j, j + p, ..., j + (k - 1) p``."""
    period = steps // epochs
    return np.arange(period)[:, None] + period * np.arange(epochs)[None, :]


def pattern_value(precision: np.ndarray, pattern, *, dim: int) -> PatternValue:
    """The squared sensitivity of one participation pattern (unit differences), exact where it can be.

    Parameters
    ----------
    precision : numpy.ndarray
        ``P = K^{-1}``, shape ``(steps, steps)``.
    pattern : sequence of int
        0-based steps.
    dim : int
        The model dimension: with one coordinate the differences are signs, and their maximum is enumerated.
    """
    steps = tuple(int(t) for t in pattern)
    block = precision[np.ix_(steps, steps)]
    scale = float(np.abs(block).max()) or 1.0
    if np.all(block >= -1e-12 * scale):
        return PatternValue(float(np.clip(block, 0.0, None).sum()), True,
                            "C^T C is non-negative on the pattern: equal gradients attain it", steps)
    if dim == 1 and len(steps) <= _SIGNS_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(steps) - 1)))
        signs = np.hstack([np.ones((len(signs), 1)), signs])
        value = float(np.max(np.einsum("si,ij,sj->s", signs, block, signs)))
        return PatternValue(value, True, "maximum over the signs of a one-dimensional model's gradients", steps)
    return PatternValue(float(np.abs(block).sum()), False,
                        "C^T C has negative entries on the pattern: sum |P_ij| is an upper bound", steps)


def cyclic_sensitivity(precision: np.ndarray, steps: int, epochs: int, *, dim: int,
                       slot: int | None = None) -> PatternValue:
    """The worst pattern of cyclic order (or the pattern of ``slot``, 0-based)."""
    patterns = cyclic_patterns(steps, epochs)
    if slot is not None:
        return pattern_value(precision, patterns[slot], dim=dim)
    values = [pattern_value(precision, row, dim=dim) for row in patterns]
    worst = max(range(len(values)), key=lambda j: (values[j].squared, -j))
    exact = all(value.exact for value in values)
    chosen = values[worst]
    return dataclasses.replace(chosen, exact=exact, how=chosen.how if exact else values[worst].how)


def bandwidth(matrix: np.ndarray) -> int:
    """The smallest ``b`` with ``matrix[i, j] = 0`` whenever ``|i - j| >= b``."""
    rows, cols = np.nonzero(np.abs(matrix) > 1e-12 * (float(np.abs(matrix).max()) or 1.0))
    return int(np.abs(rows - cols).max()) + 1 if rows.size else 1


def minsep_sensitivity(precision: np.ndarray, participations: int, separation: int) -> PatternValue:
    """The squared sensitivity over every pattern of at most ``participations`` steps ``separation`` apart.

    Exact when ``P`` is banded within ``separation`` (the cross terms of such a pattern vanish, so the best
    pattern maximises a sum of diagonal entries: dynamic programming over the steps). Otherwise an upper
    bound: each step ``i`` is charged ``P_ii`` plus its ``k - 1`` largest ``|P_ij|`` at least ``separation``
    away, and the charges are maximised the same way.
    """
    n = precision.shape[0]
    diagonal = np.diag(precision).astype(float)
    exact = bandwidth(precision) <= separation
    if exact:
        charge = diagonal
        how = f"P is banded within the separation {separation}: the cross terms vanish"
    else:
        away = np.abs(precision).copy()
        index = np.arange(n)
        away[np.abs(index[:, None] - index[None, :]) < separation] = 0.0
        top = -np.sort(-away, axis=1)[:, :max(participations - 1, 0)].sum(axis=1)
        charge = diagonal + top
        how = "each step charged P_ii and its k - 1 largest |P_ij| that far apart: an upper bound"
    # best[c][i]: the largest charge of c picks, the last at step i
    best = np.full((participations + 1, n), -np.inf)
    best[1] = charge
    for count in range(2, participations + 1):
        running = np.maximum.accumulate(best[count - 1])  # the best over every earlier last pick
        shifted = np.full(n, -np.inf)
        shifted[separation:] = running[:n - separation]
        best[count] = charge + shifted
    flat = np.nanmax(np.where(np.isfinite(best[1:]), best[1:], -np.inf), axis=1)
    count = int(np.argmax(flat)) + 1
    last = int(np.argmax(best[count]))
    pattern = [last]
    for c in range(count - 1, 0, -1):  # walk back to the picks that made the best
        limit = pattern[-1] - separation
        previous = int(np.argmax(best[c][:limit + 1]))
        pattern.append(previous)
    return PatternValue(float(flat.max()), exact, how, tuple(sorted(pattern)))

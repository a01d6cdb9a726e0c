"""A floating-point distinguisher: scores from the bit patterns of released floats.

A mechanism computed in floating point can release values whose low bits
depend on the dataset: ``z + 1`` and ``z - 1`` of the same noise ``z`` are
rounded differently, so some bit patterns occur under one dataset and never
under the other (Mironov 2012, "On significance of the least significant
bits for differential privacy"). This score looks for that leak in any
mechanism, ``from_callable`` included.

Each output coordinate ``x_j`` is described by a *cell*: the window of
values it falls in (calibration quantiles) crossed with a bit feature of its
float64 representation (the lowest significand bit, the lowest two bits, or
the number of trailing zero bits of the significand). The score of an
output is the log ratio of the cell's smoothed frequencies under ``S'`` and
``S``, a histogram likelihood-ratio test. Which coordinate and which bit
feature to use is chosen on calibration data (fit on one half, judged on
the other), and the table is then refitted on all calibration trials; the
trials that certify the bound are never seen.

Outputs already on a coarse grid (each value a multiple of a power of two
far above its float spacing, as a release rounded to ``2^-12`` is) carry no
bit below the grid: every feature is then the same for every output, and the
score would only read the value windows, a coarse histogram of the values
that other scores read better. The fitted score then says so
(``declined``, :func:`grid_reason`), and a portfolio skips it (named alone,
it still runs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["FEATURES", "bit_feature", "fit_float_bits", "grid_reason"]

_MANTISSA = np.uint64((1 << 52) - 1)
_WINDOWS = 16
_MAX_COORDINATES = 8
_TRAILING_CAP = 16


def _trailing_zeros(mantissa: np.ndarray) -> np.ndarray:
    """Trailing zero bits of 52-bit significands, capped at ``_TRAILING_CAP``."""
    count = np.zeros(mantissa.shape, dtype=np.int64)
    alive = np.ones(mantissa.shape, dtype=bool)
    for bit in range(_TRAILING_CAP):
        alive &= ((mantissa >> np.uint64(bit)) & np.uint64(1)) == 0
        count += alive
    return count


FEATURES: dict[str, tuple[int, Callable[[np.ndarray], np.ndarray]]] = {
    "lowest-bit": (2, lambda m: (m & np.uint64(1)).astype(np.int64)),
    "lowest-two-bits": (4, lambda m: (m & np.uint64(3)).astype(np.int64)),
    "trailing-zeros": (_TRAILING_CAP + 1, _trailing_zeros),
}


def bit_feature(values: np.ndarray, feature: str) -> np.ndarray:
    """The bit feature ``feature`` of each float64 in ``values`` (an integer per value)."""
    mantissa = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64) & _MANTISSA
    return FEATURES[feature][1](mantissa)


class _CellTable:
    """Smoothed log frequency ratios of (value window, bit feature) cells for one coordinate."""

    def __init__(self, column: int, feature: str, cal_a: np.ndarray, cal_b: np.ndarray) -> None:
        self.column, self.feature = column, feature
        pooled = np.concatenate([cal_a[:, column], cal_b[:, column]])
        inner = np.unique(np.quantile(pooled, np.linspace(0, 1, _WINDOWS + 1)[1:-1]))
        self.edges = inner
        self.levels = FEATURES[feature][0]
        cells = (inner.size + 1) * self.levels
        count_a = np.bincount(self.cells(cal_a), minlength=cells)
        count_b = np.bincount(self.cells(cal_b), minlength=cells)
        # add-one-half smoothing: a cell never seen under S gets a large but finite score
        self.log_ratio = (np.log((count_b + 0.5) / (count_b.sum() + 0.5 * cells))
                          - np.log((count_a + 0.5) / (count_a.sum() + 0.5 * cells)))

    def cells(self, outputs: np.ndarray) -> np.ndarray:
        values = outputs[:, self.column]
        window = np.searchsorted(self.edges, values, side="right")
        return window * self.levels + bit_feature(values, self.feature)

    def __call__(self, outputs: np.ndarray) -> np.ndarray:
        return self.log_ratio[self.cells(np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1))]


def _separation(scores_a: np.ndarray, scores_b: np.ndarray) -> float:
    """How well high scores point to ``S'``: the best ``log((TPR + c) / (FPR + c))`` over thresholds."""
    floor = 2.0 / min(scores_a.size, scores_b.size)
    thresholds = np.unique(np.concatenate([scores_a, scores_b]))
    sorted_a, sorted_b = np.sort(scores_a), np.sort(scores_b)
    fpr = 1 - np.searchsorted(sorted_a, thresholds, side="left") / sorted_a.size
    tpr = 1 - np.searchsorted(sorted_b, thresholds, side="left") / sorted_b.size
    return float(np.max(np.log((tpr + floor) / (fpr + floor))))


def _grid_exponent(values: np.ndarray) -> int | None:
    """The largest ``k`` such that every finite non-zero value is a multiple of ``2^k`` (None: no such value)."""
    bits = np.ascontiguousarray(values[np.isfinite(values) & (values != 0)], dtype=np.float64).view(np.uint64)
    if bits.size == 0:
        return None
    biased = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    significand = (bits & _MANTISSA) | np.where(biased > 0, np.uint64(1 << 52), np.uint64(0))
    lowest = significand & (~significand + np.uint64(1))  # the lowest set bit
    trailing = np.log2(lowest.astype(np.float64)).astype(np.int64)  # a power of two: exact
    return int(np.min(np.maximum(biased, 1) - 1075 + trailing))


def grid_reason(cal_a: np.ndarray, cal_b: np.ndarray) -> str | None:
    """Why the bit features read nothing in these outputs, or None when they may.

    Every bit feature is constant when every value's significand ends in at least ``_TRAILING_CAP``
    zero bits (the coordinates the score reads, both sides): the outputs lie on a grid far coarser than
    their float spacing, and the released values carry nothing below it.
    """
    columns = min(cal_a.shape[1], _MAX_COORDINATES)
    values = np.concatenate([cal_a[:, :columns].ravel(), cal_b[:, :columns].ravel()])
    finite = values[np.isfinite(values)]
    if finite.size and np.any(_trailing_zeros(np.ascontiguousarray(finite).view(np.uint64) & _MANTISSA)
                              < _TRAILING_CAP):
        return None
    exponent = _grid_exponent(finite)
    grid = "" if exponent is None else f" of 2^{exponent}"
    return (f"score 'float-bits' reads the low bits of released floats, but every released value lies on a "
            f"grid{grid} (its significand ends in at least {_TRAILING_CAP} zero bits): nothing below the grid "
            f"to read")


def fit_float_bits(cal_a: np.ndarray, cal_b: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Choose a coordinate and a bit feature on calibration outputs and return the fitted score.

    Parameters
    ----------
    cal_a, cal_b : numpy.ndarray
        Calibration outputs on ``S`` and ``S'``, shape ``(trials, dim)``.

    Returns
    -------
    callable
        ``outputs -> scores``, larger when the output's cell is more frequent under ``S'``; with
        ``declined`` (a reason) when the outputs lie on a coarse grid (:func:`grid_reason`).
    """
    cal_a = np.asarray(cal_a, dtype=np.float64).reshape(len(cal_a), -1)
    cal_b = np.asarray(cal_b, dtype=np.float64).reshape(len(cal_b), -1)
    half_a, half_b = cal_a.shape[0] // 2, cal_b.shape[0] // 2
    best, chosen = -np.inf, (0, "lowest-bit")
    for column in range(min(cal_a.shape[1], _MAX_COORDINATES)):
        for feature in FEATURES:
            table = _CellTable(column, feature, cal_a[:half_a], cal_b[:half_b])
            value = _separation(table(cal_a[half_a:]), table(cal_b[half_b:]))
            if value > best:
                best, chosen = value, (column, feature)
    table = _CellTable(chosen[0], chosen[1], cal_a, cal_b)
    reason = grid_reason(cal_a, cal_b)
    if reason:
        table.declined = reason
    return table

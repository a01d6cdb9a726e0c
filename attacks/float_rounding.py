"""Rounding a release to a grid, and reading what lies below the grid (docs/theory.md 3.5.1).

When ``float-bits`` certifies a violation, two defects look alike: a float
leak (the low bits of a float64 computed as ``f(S) + z`` depend on ``f(S)``,
Mironov 2012) and a defect of the mechanism itself (a sensitivity bug, say).
Two reads of the same kind of release tell them apart:

- the release *rounded to a grid* (:func:`release_grids`, :func:`round_to_grids`):
  a post-processing, so every claim of the mechanism still applies, and a
  grid far coarser than the float spacing leaves no low bit to read; a
  violation it certifies is in the values themselves;
- the *bits below the grid given the rounded value* (:func:`fit_sub_grid`):
  for each coordinate, trials are grouped by the grid cell their value falls
  in, and a fixed score of the low bits is compared between ``S`` and
  ``S'`` within the cells (``audit.statistics.stratified``). If the release
  rounded to the grid held everything the release says about the dataset,
  the low bits given the cell would have one law under both datasets; a
  mechanism computed exactly, with a noise density nearly constant over one
  cell (the grid is fine beside the noise), comes within a factor
  ``exp(2 g / b)`` of that (Laplace noise of scale ``b``), which no
  feasible audit resolves at ``g <= b 2^-10``. A difference is a float leak.

Values that occur more than once among the calibration outputs are atoms
(a clamp's bound, a sentinel): each is a cell of its own, so an atom whose
probability depends on the dataset is read as a value, never as low bits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from dpaudit.attacks.float_bits import FEATURES, bit_feature
from dpaudit.core.errors import ParameterError

__all__ = ["COARSE_ABOVE_SPACING", "FINE_BELOW_SPREAD", "SubGridScores", "coarse_coordinates", "fit_sub_grid",
           "release_grids", "round_to_grids"]

#: The grid of a coordinate is at most ``2^-FINE_BELOW_SPREAD`` of its spread (the interquartile range of the
#: calibration outputs, rounded down to a power of two): fine beside the noise
FINE_BELOW_SPREAD = 10
#: ... and at least ``2^COARSE_ABOVE_SPACING`` times the float spacing of four times its largest calibration
#: output: every rounded value's significand ends in at least 16 zero bits (``float_bits.grid_reason``)
COARSE_ABOVE_SPACING = 16
_WINDOWS = 16
_MAX_COORDINATES = 8  # as ``float_bits``: the coordinates whose low bits are read


def _rows(outputs: np.ndarray, name: str) -> np.ndarray:
    rows = np.asarray(outputs, dtype=np.float64)
    if rows.ndim == 0 or rows.shape[0] < 1:
        raise ParameterError(f"{name} must hold at least one trial, got shape {rows.shape}")
    return rows.reshape(rows.shape[0], -1)


def release_grids(cal_a: np.ndarray, cal_b: np.ndarray) -> np.ndarray:
    """One power-of-two grid per output coordinate, chosen on calibration outputs only.

    Parameters
    ----------
    cal_a, cal_b : numpy.ndarray
        Calibration outputs on ``S`` and ``S'``, shape ``(trials, dim)``.

    Returns
    -------
    numpy.ndarray
        ``g_j = max(2^(floor(log2 spread_j) - 10), 2^16 spacing(4 max |x_j|))``: fine beside the coordinate's
        spread, unless that would not be coarse beside its float spacing (then coarse wins: the rounded
        release reads less of that coordinate, and :func:`coarse_coordinates` names it). A constant
        coordinate gets the coarse grid.

    References
    ----------
    docs/theory.md 1.9 (why a power of two: division and multiplication by it are exact) and 3.5.1.
    """
    pooled = np.concatenate([_rows(cal_a, "cal_a"), _rows(cal_b, "cal_b")])
    grids = np.empty(pooled.shape[1])
    for column in range(pooled.shape[1]):
        values = pooled[:, column][np.isfinite(pooled[:, column])]
        if values.size == 0:
            grids[column] = 1.0
            continue
        coarse = 2.0 ** COARSE_ABOVE_SPACING * float(np.spacing(4.0 * np.max(np.abs(values))))
        spread = _spread(values)
        fine = 2.0 ** (np.floor(np.log2(spread)) - FINE_BELOW_SPREAD) if spread > 0 else 0.0
        grids[column] = max(fine, coarse)
    return grids


def _spread(values: np.ndarray) -> float:
    """The interquartile range of ``values``, or their range where that is 0."""
    low, high = np.quantile(values, [0.25, 0.75])
    return float(high - low) if high > low else float(np.max(values) - np.min(values))


def coarse_coordinates(cal_a: np.ndarray, cal_b: np.ndarray, grids: np.ndarray) -> list[int]:
    """The coordinates whose grid is coarser than ``2^-FINE_BELOW_SPREAD`` of their spread (0-based)."""
    pooled = np.concatenate([_rows(cal_a, "cal_a"), _rows(cal_b, "cal_b")])
    found = []
    for column, grid in enumerate(grids):
        values = pooled[:, column][np.isfinite(pooled[:, column])]
        spread = _spread(values) if values.size else 0.0
        if spread > 0 and grid > 2.0 ** (np.floor(np.log2(spread)) - FINE_BELOW_SPREAD):
            found.append(column)
    return found


def round_to_grids(outputs: np.ndarray, grids: np.ndarray) -> np.ndarray:
    """Each coordinate rounded to the nearest multiple of its grid (exact: the grids are powers of two).

    Infinities stay as they are; the shape of ``outputs`` is kept.
    """
    rows = _rows(outputs, "outputs")
    grids = np.asarray(grids, dtype=np.float64)
    if grids.shape != (rows.shape[1],) or not np.all(grids > 0):
        raise ParameterError(f"grids must be {rows.shape[1]} positive numbers (one per coordinate), got {grids!r}")
    with np.errstate(invalid="ignore", over="ignore"):
        rounded = np.round(rows / grids) * grids
    keep = ~np.isfinite(rounded)  # an infinity, or a value so large that its own spacing exceeds the grid
    rounded[keep] = rows[keep]
    return rounded.reshape(np.shape(outputs))


@dataclasses.dataclass(frozen=True)
class _Table:
    """``log p(feature | window, S') - log p(feature | window, S)``, smoothed, for one coordinate and feature."""

    column: int
    feature: str
    edges: np.ndarray
    log_ratio: np.ndarray  # (windows, levels)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        values = rows[:, self.column]
        window = np.searchsorted(self.edges, values, side="right")
        return self.log_ratio[window, bit_feature(values, self.feature)]


@dataclasses.dataclass(frozen=True)
class SubGridScores:
    """Scores of the low bits and the grid cells of each read coordinate, fitted on calibration outputs.

    ``tables`` holds one score per (coordinate, bit feature): the log ratio of the feature's frequencies
    under ``S'`` and ``S`` within value windows (a function of one coordinate's value; fixed before any
    trial it is applied to). :meth:`cells` gives the cell each trial's value lies in: its grid cell
    ``floor(x / g)``, or the value itself for an atom.
    """

    grids: np.ndarray
    tables: tuple[_Table, ...]
    atoms: dict[int, np.ndarray]

    @property
    def tests(self) -> int:
        """How many (coordinate, feature) scores are tested (the Bonferroni factor)."""
        return len(self.tables)

    def cells(self, outputs: np.ndarray, column: int) -> np.ndarray:
        """``(trials, 2)``: ``[0, floor(x / g)]`` for a value, ``[1, x]`` for an atom (a cell of its own)."""
        values = _rows(outputs, "outputs")[:, column]
        atom = np.isin(values, self.atoms[column])
        with np.errstate(invalid="ignore", over="ignore"):
            cell = np.floor(values / self.grids[column])
        return np.column_stack([atom.astype(np.float64), np.where(atom, values, cell)])

    def scored(self, outputs: np.ndarray) -> Iterator[tuple[_Table, np.ndarray, np.ndarray]]:
        """``(table, scores, cells)`` for every test, on a chunk of outputs."""
        rows = _rows(outputs, "outputs")
        cells = {}
        for table in self.tables:
            if table.column not in cells:
                cells[table.column] = self.cells(rows, table.column)
            yield table, table(rows), cells[table.column]


def fit_sub_grid(cal_a: np.ndarray, cal_b: np.ndarray, grids: np.ndarray) -> SubGridScores:
    """Fit the low-bit scores of the first coordinates (at most 8) on calibration outputs.

    Parameters
    ----------
    cal_a, cal_b : numpy.ndarray
        Calibration outputs on ``S`` and ``S'`` (never the trials the scores are tested on).
    grids : numpy.ndarray
        One grid per coordinate (:func:`release_grids`).

    Returns
    -------
    SubGridScores
        Every bit feature of ``attacks.float_bits`` on every read coordinate; the test of each
        (``audit.statistics.stratified``) is paid for by a Bonferroni factor of :attr:`SubGridScores.tests`.

    References
    ----------
    Mironov (2012), "On significance of the least significant bits for differential privacy"; docs/theory.md 3.5.1.
    """
    rows_a, rows_b = _rows(cal_a, "cal_a"), _rows(cal_b, "cal_b")
    tables, atoms = [], {}
    for column in range(min(rows_a.shape[1], _MAX_COORDINATES)):
        pooled = np.concatenate([rows_a[:, column], rows_b[:, column]])
        finite = pooled[np.isfinite(pooled)]
        values, counts = np.unique(finite, return_counts=True)
        atoms[column] = values[counts > 1]
        edges = np.unique(np.quantile(finite, np.linspace(0, 1, _WINDOWS + 1)[1:-1])) if finite.size \
            else np.zeros(0)
        for feature, (levels, _) in FEATURES.items():
            frequencies = []
            for rows in (rows_a, rows_b):
                window = np.searchsorted(edges, rows[:, column], side="right")
                cell = window * levels + bit_feature(rows[:, column], feature)
                count = np.bincount(cell, minlength=(edges.size + 1) * levels).reshape(edges.size + 1, levels) + 0.5
                frequencies.append(count / count.sum(axis=1, keepdims=True))
            tables.append(_Table(column, feature, edges, np.log(frequencies[1]) - np.log(frequencies[0])))
    return SubGridScores(np.asarray(grids, dtype=np.float64), tuple(tables), atoms)

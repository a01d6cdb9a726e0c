"""Candidate neighbouring pairs of records of several columns: features, and a label.

A record here is ``(x_1, ..., x_d)`` with each ``x_i`` in its own range
``[low_i, high_i]`` (``record_domain`` given as one pair per column), followed
by a label ``y`` taking one of the ``labels`` when they are given: a
classification record ``(x, y)``, a regression record (the response a column
of its own), or plain multi-column data. :func:`record_pairs` builds:

* special feature points: every column at its low end, every column at its
  high end, the centre (each column at 0 where its range holds 0, else at
  its midpoint), and, with several columns, the centre with one column at
  either end (for the first :data:`MAX_AXES` columns); special records: each
  point with each label;
* replace-one pairs: label flips (one point, two labels), feature extremes
  (one label; the low point against the high one, the centre against either,
  one column from end to end), and both at once (the low point with one
  label against the high point with another); under the zero-out relation
  also each special record against the zero record;
* add/remove pairs: a background against the same plus one special record,
  and one special record against the same record twice;
* backgrounds: none (or ``min_records - 1`` centre records), three centre
  records with each label, two seeded draws (features uniform in their
  ranges, labels drawn uniformly) on which each record's label is also
  flipped, its features moved to either end, and the record removed, and the
  user's own records.

Each pair differs in one record (replace-one) or by one record (add/remove),
so a label flip is a neighbour of the usual relations: a classifier that
reads labels without noise is caught by the flip, a regression that bounds
only its features by the pair of both extremes.

References
----------
docs/guide.md, "Neighbour search" (records of several columns).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dpaudit.auditing.checks.search_candidates import Candidate, data, keep_pairs
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.core.validation import check_int, is_real
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["MAX_AXES", "DRAWN_RECORDS", "parse_domain", "record_pairs"]

#: Columns moved one at a time to either end (beyond them, only all columns at once)
MAX_AXES = 8
#: Records of each seeded drawn background (at least ``min_records``)
DRAWN_RECORDS = 4


def _pair(value: Any) -> tuple[float, float] | None:
    """``value`` as ``(low, high)``, two finite numbers ``low < high``; None when it is not."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        return None
    if not all(is_real(v) and math.isfinite(float(v)) for v in value) or not float(value[0]) < float(value[1]):
        return None
    return float(value[0]), float(value[1])


def parse_domain(record_domain: Any, labels: Any = None) -> tuple[list[tuple[float, float]], tuple[float, ...] | None]:
    """``record_domain`` as one ``(low, high)`` per feature column, and ``labels`` as a tuple (None: no label).

    ``record_domain`` is ``(low, high)`` (one column) or a sequence of such pairs (one per column); ``labels``
    two or more distinct finite numbers, the values of a last column.

    Raises
    ------
    ParameterError
        Naming the argument and the value.
    """
    one = _pair(record_domain)
    if one is not None:
        columns = [one]
    else:
        many = record_domain if isinstance(record_domain, Sequence) and not isinstance(record_domain, str) else ()
        columns = [_pair(column) for column in many]
        if not columns or any(column is None for column in columns):
            raise ParameterError(f"record_domain must be two finite numbers low < high, or one such pair per column, "
                                 f"got record_domain={record_domain!r}")
    if labels is None:
        return columns, None
    values = list(labels) if isinstance(labels, Iterable) and not isinstance(labels, str) else None
    if (values is None or len(values) < 2 or not all(is_real(v) and math.isfinite(float(v)) for v in values)
            or len({float(v) for v in values}) != len(values)):
        raise ParameterError(f"labels must be two or more distinct finite numbers (the values of the label column), "
                             f"got labels={labels!r}")
    return columns, tuple(float(v) for v in values)


def _points(columns: Sequence[tuple[float, float]]) -> dict[str, np.ndarray]:
    """The special feature points (see the module docstring)."""
    lows = np.array([c[0] for c in columns])
    highs = np.array([c[1] for c in columns])
    centre = np.where((lows <= 0) & (highs >= 0), 0.0, (lows + highs) / 2)
    points = {"low": lows, "high": highs, "centre": centre}
    if len(columns) > 1:
        for i in range(min(len(columns), MAX_AXES)):
            for end, values in (("low", lows), ("high", highs)):
                point = centre.copy()
                point[i] = values[i]
                points[f"x{i + 1} {end}"] = point
    return points


def _shown(row: np.ndarray) -> str:
    return "(" + ", ".join(f"{v:g}" for v in row) + ")"


def _moves(points: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    """Pairs of points one record moves between: the extremes, the centre against either, each column end to end."""
    moves = [("low", "high"), ("centre", "low"), ("centre", "high")]
    moves += [(f"x{i} low", f"x{i} high") for i in range(1, MAX_AXES + 1) if f"x{i} low" in points]
    return moves


def _replacements(points: dict[str, np.ndarray], labels: Sequence[float | None],
                  zero: np.ndarray | None) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The replace-one moves of one record: (what changes, one record, the other)."""
    def record(point: str, label: float | None) -> np.ndarray:
        return points[point] if label is None else np.append(points[point], label)

    out = []
    for point in points:  # label flips
        for y, z in itertools.combinations(labels, 2):
            out.append((f"label {y:g} -> {z:g} at {point}", record(point, y), record(point, z)))
    for y in labels:  # feature extremes, one label
        for a, b in _moves(points):
            out.append((f"{a} -> {b}" + ("" if y is None else f", label {y:g}"), record(a, y), record(b, y)))
    for y, z in itertools.permutations(labels, 2) if labels[0] is not None else ():  # both at once
        out.append((f"low, label {y:g} -> high, label {z:g}", record("low", y), record("high", z)))
    if zero is not None:
        for point in points:
            for y in labels:
                out.append((f"{point}" + ("" if y is None else f", label {y:g}") + " -> zero record",
                            record(point, y), zero))
    return out


def record_pairs(columns: Sequence[tuple[float, float]], labels: Sequence[float] | None = None, *,
                 background: Any = None, min_records: int = 1, seed: int | np.random.SeedSequence = 0,
                 relations: Iterable[str] | None = None, size: int | None = None) -> list[Candidate]:
    """Every candidate pair for records of ``columns`` features (one ``(low, high)`` each) and a label among
    ``labels`` (see the module docstring).

    Parameters
    ----------
    columns : sequence of (float, float)
        Each feature column's range (:func:`parse_domain`).
    labels : sequence of float, optional
        The values of a last, label column.
    background : array_like, optional
        Records of the user's own (as many columns as the records), one more background.
    min_records : int
        No dataset holds fewer records.
    seed : int or SeedSequence
        Draws the two uniform backgrounds.
    relations : iterable of str, optional
        Keep pairs of these relations only (default replace-one and add/remove).
    size : int, optional
        Every dataset holds exactly this many records.

    Returns
    -------
    list of Candidate
    """
    min_records = check_int("min_records", min_records, minimum=0)
    wanted = {Relation(r) for r in (relations or (Relation.REPLACE_ONE, Relation.ADD_REMOVE))}
    points = _points(columns)
    values: list[float | None] = list(labels) if labels else [None]
    width = len(columns) + (labels is not None)
    lows = np.array([c[0] for c in columns] + ([min(values)] if labels else []))
    highs = np.array([c[1] for c in columns] + ([max(values)] if labels else []))
    zero = np.zeros(width) if Relation.ZERO_OUT in wanted and np.all((lows <= 0) & (highs >= 0)) else None
    if Relation.ZERO_OUT in wanted and zero is None:
        raise ParameterError("relation='zero-out' needs the zero record inside the record domain (0 in every "
                             "column's range)")
    centre = [points["centre"] if y is None else np.append(points["centre"], y) for y in values]
    small = max(0, min_records - 1)
    backgrounds = [("empty" if small == 0 else f"{small}x centre", np.repeat(centre[0][None], small, axis=0))]
    backgrounds += [(f"{max(3, min_records)}x {_shown(row)}", np.repeat(row[None], max(3, min_records), axis=0))
                    for row in centre]
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence([int(seed), 0xC01])
    rng = np.random.default_rng(root)
    drawn_size = max(DRAWN_RECORDS, min_records)
    drawn = []
    for k in range(2):
        rows = rng.uniform(lows[: len(columns)], highs[: len(columns)], (drawn_size, len(columns)))
        if labels:
            rows = np.hstack([rows, rng.choice(values, (drawn_size, 1))])
        drawn.append((f"drawn {k + 1}", rows))
    backgrounds += drawn
    if background is not None:
        given = np.asarray(background, dtype=np.float64)
        if given.ndim != 2 or given.shape[1] != width:
            raise ParameterError(f"background must hold records of {width} columns, got shape {np.shape(background)}")
        backgrounds.append(("given", given))
    moves = _replacements(points, values, zero)
    specials = [(f"{p}" + ("" if y is None else f", label {y:g}"), points[p] if y is None else np.append(points[p], y))
                for p in points for y in values]
    out: list[Candidate] = []
    for label, rows in backgrounds:
        for what, a, b in moves:
            out.append(Candidate(f"{label} | {what}", Relation.REPLACE_ONE, data(np.vstack([rows, a[None]])),
                                 data(np.vstack([rows, b[None]]))))
        for what, record in specials:
            grown = np.vstack([rows, record[None]])
            out.append(Candidate(f"{label} | + {_shown(record)}", Relation.ADD_REMOVE, data(rows), data(grown)))
            out.append(Candidate(f"{label} + {_shown(record)} | twice", Relation.ADD_REMOVE, data(grown),
                                 data(np.vstack([grown, record[None]]))))
    for label, rows in drawn:  # each record's label flipped, its features moved to either end, the record removed
        for position in range(len(rows)):
            for name, changed in _each_change(rows[position], values, points):
                other = rows.copy()
                other[position] = changed
                out.append(Candidate(f"{label} | record {position}: {name}", Relation.REPLACE_ONE, Dataset(rows),
                                     Dataset(other)))
            out.append(Candidate(f"{label} | remove at {position}", Relation.ADD_REMOVE,
                                 data(np.delete(rows, position, 0)), Dataset(rows)))
    return keep_pairs(out, relations=wanted, size=size, min_records=min_records)


def _each_change(row: np.ndarray, labels: Sequence[float | None],
                 points: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    """One record changed: its label to each other label, its features to the low and to the high point."""
    out = []
    features = len(points["low"])
    if labels[0] is not None:
        for y in labels:
            if y != row[-1]:
                out.append((f"label -> {y:g}", np.append(row[:features], y)))
    for end in ("low", "high"):
        if not np.array_equal(row[:features], points[end]):
            out.append((f"features -> {end}", np.concatenate([points[end], row[features:]])))
    return out

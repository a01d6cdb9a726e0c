"""Candidate neighbouring pairs of records of one number, built from the declared record domain ``[low, high]``.

What :func:`candidate_pairs` builds (docs/guide.md, "Neighbour search"):

* special values: both ends of the domain, 0 and the midpoint, the clipping
  thresholds the user names, powers of two inside the domain (float
  exponent boundaries), and the float just below each of these;
* replace-one pairs: one record changed between two special values, on a
  background of none, three records at each end or threshold, and the
  user's own records if given;
* add/remove pairs: a background against the same background plus one
  record (the empty dataset against one record where ``min_records`` is 0),
  and one record against the same record twice (duplicated records);
* position and size effects: on non-constant backgrounds drawn from the
  domain (its ends alternating, a ramp from end to end, two seeded uniform
  draws, and the user's records), a record added at each position, each
  record removed, and each record replaced by an end of the domain. Code
  whose output depends on where a record sits (the last record, the one
  before it) differs only there: on constant backgrounds every position
  looks the same;
* large datasets (:mod:`dpaudit.auditing.checks.search_large`): a few thousand records, in orders and at
  values where a float sum rounds by more than one record moves it (Casacuberta et al. 2022).

Then :func:`~dpaudit.auditing.checks.search_candidates.keep_pairs` keeps the pairs of the searched relations,
of a known size where there is one, and of at least ``min_records`` records.

References
----------
Casacuberta, Shoemate, Vadhan, Wagaman (2022), "Widespread underestimation of sensitivity in differentially
private libraries and how to fix it", ACM CCS 2022.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from dpaudit.auditing.checks.search_candidates import Candidate, data, keep_pairs
from dpaudit.auditing.checks.search_large import LARGE_RECORDS, large_pairs
from dpaudit.core.kinds import Relation
from dpaudit.core.validation import check_int
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["DRAWN_BACKGROUNDS", "candidate_pairs", "special_values"]

#: Seeded uniform draws from the record domain used as backgrounds (besides the ends and a ramp)
DRAWN_BACKGROUNDS = 2


def special_values(low: float, high: float, thresholds: Sequence[float] = ()) -> list[float]:
    """Ends, 0, midpoint, thresholds and powers of two in ``[low, high]``, each with the float just below it."""
    base = {low, high, (low + high) / 2, *[float(t) for t in thresholds]}
    if low <= 0 <= high:
        base.add(0.0)
    scale = max(abs(low), abs(high))
    if scale > 0:
        top = math.floor(math.log2(scale))
        for k in range(top, top - 4, -1):  # four exponent boundaries below the domain's scale
            for value in (2.0**k, -(2.0**k)):
                if low <= value <= high:
                    base.add(value)
    values = set(base)
    for value in base:
        below = float(np.nextafter(value, -np.inf))
        if low <= below <= high:
            values.add(below)
    return sorted(values)


def _backgrounds(low: float, high: float, size: int, seed: np.random.SeedSequence) -> list[tuple[str, np.ndarray]]:
    """Non-constant backgrounds from ``[low, high]``: the ends alternating (both ways round, ``size`` records),
    a ramp from end to end and back (``size + 1``), and :data:`DRAWN_BACKGROUNDS` seeded uniform draws
    (``size + 1``)."""
    alternate = np.where(np.arange(size) % 2 == 0, low, high)
    ramp = np.linspace(low, high, size + 1)
    drawn = np.random.default_rng(seed).uniform(low, high, (DRAWN_BACKGROUNDS, size + 1))
    rows = [("ends", alternate), ("ends reversed", alternate[::-1].copy()), ("ramp", ramp),
            ("ramp reversed", ramp[::-1].copy())]
    rows += [(f"drawn {k + 1}", row) for k, row in enumerate(drawn)]
    return [(label, row.reshape(-1, 1)) for label, row in rows]


def _positions(label: str, rows: np.ndarray, inserts: Sequence[float], ends: Sequence[float]) -> list[Candidate]:
    """Add each of ``inserts`` at each position of ``rows``, remove each record, replace each by each of ``ends``."""
    out = []
    shown = label if label == "given" else f"{label} {[float(f'{v:.3g}') for v in rows.ravel()]!r}"
    for position in range(len(rows) + 1):
        for value in inserts:
            grown = np.insert(rows, position, value, axis=0)
            out.append(Candidate(f"{shown} | insert {value!r} at {position}", Relation.ADD_REMOVE, Dataset(rows),
                                 Dataset(grown)))
    for position in range(len(rows)):
        out.append(Candidate(f"{shown} | remove at {position}", Relation.ADD_REMOVE,
                             Dataset(np.delete(rows, position, 0)), Dataset(rows)))
        for value in ends:
            if rows[position, 0] != value:
                changed = rows.copy()
                changed[position, 0] = value
                out.append(Candidate(f"{shown} | record {position} -> {value!r}", Relation.REPLACE_ONE,
                                     Dataset(rows), Dataset(changed)))
    return out


def candidate_pairs(low: float, high: float, *, thresholds: Sequence[float] = (),
                    background: np.ndarray | None = None, min_records: int = 1,
                    seed: int | np.random.SeedSequence = 0, relations: Iterable[str] | None = None,
                    size: int | None = None, large_records: int | None = None) -> list[Candidate]:
    """Every candidate neighbouring pair for records of one number in ``[low, high]`` (see the module docstring).

    Parameters
    ----------
    low, high : float
        The record domain.
    thresholds : sequence of float
        Values where the code changes behaviour.
    background : array_like, optional
        Records of the user's own, one more background.
    min_records : int
        No dataset holds fewer records.
    seed : int or SeedSequence
        Draws the uniform backgrounds.
    relations : iterable of str, optional
        Keep pairs of these relations only (default: replace-one and add/remove).
    size : int, optional
        Every dataset holds exactly this many records (a claim for datasets of a known size).
    large_records : int, optional
        Records of the large datasets (default :data:`~dpaudit.auditing.checks.search_large.LARGE_RECORDS`,
        0: none; ``size`` instead when given).

    Returns
    -------
    list of Candidate
    """
    min_records = check_int("min_records", min_records, minimum=0)
    values = special_values(low, high, thresholds)
    anchors = sorted({low, high, *[float(t) for t in thresholds]})
    constant = max(3, min_records)
    # the smallest background every pair of special values is tried on: none, or min_records - 1 records at low
    small = max(0, min_records - 1)
    backgrounds: list[tuple[str, np.ndarray]] = [("empty" if small == 0 else f"{small}x{low:g}",
                                                  np.full((small, 1), low))]
    backgrounds += [(f"{constant}x{a:g}", np.full((constant, 1), a)) for a in anchors]
    given = None if background is None else np.asarray(background, dtype=np.float64).reshape(-1, 1)
    if given is not None:
        backgrounds.append(("given", given))

    out: list[Candidate] = []
    for label, rows in backgrounds:
        with_pairs = label in (backgrounds[0][0], "given") or len(values) <= 8
        for i, a in enumerate(values):
            one = np.vstack([rows, [[a]]])
            out.append(Candidate(f"{label} | + [{a!r}]", Relation.ADD_REMOVE, data(rows), data(one)))
            out.append(Candidate(f"{label} + [{a!r}] | twice", Relation.ADD_REMOVE, data(one),
                                 data(np.vstack([one, [[a]]]))))
            if with_pairs:
                for b in values[i + 1:]:
                    out.append(Candidate(f"{label} + [{a!r}] | [{b!r}]", Relation.REPLACE_ONE, data(one),
                                         data(np.vstack([rows, [[b]]]))))
    # position and size effects: non-constant backgrounds, a record added at each position, removed, replaced
    inserts = sorted({low, high, (low + high) / 2, *([0.0] if low <= 0 <= high else []),
                      *[float(t) for t in thresholds]})
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence([int(seed), 0xBAC6])
    varied = _backgrounds(low, high, max(2, min_records), root)
    if given is not None and len(given) and np.ptp(given) > 0:
        varied.append(("given", given))
    for label, rows in varied:
        out += _positions(label, rows, inserts, (low, high))
    records = LARGE_RECORDS if large_records is None else check_int("large_records", large_records, minimum=0)
    if records and size is not None:  # a known size: the large family at that size
        records = size
    if records:
        out += large_pairs(low, high, records)
    return keep_pairs(out, relations=relations, size=size, min_records=min_records)

"""What every family of candidate pairs of the neighbour search shares: the pair, and the step each family ends with.

A :class:`Candidate` is a pair of datasets ``(S, S')`` with how it was built
and the relation it realises. The families that build them are records of
one number (:mod:`dpaudit.auditing.checks.search_numbers`), records of
several columns, features and a label (:mod:`dpaudit.auditing.checks.search_records`), and large datasets
where float sums round (:mod:`dpaudit.auditing.checks.search_large`). Every family ends with
:func:`keep_pairs`: only pairs of the searched relations are kept (a
zero-out pair is a replace-one pair whose changed record is the zero record
on one side), a known dataset size is kept by every dataset, no dataset
holds fewer than ``min_records`` records, and each pair comes once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

from dpaudit.core.kinds import Relation
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["Candidate", "EmptyDataset", "SHOWN_RECORDS", "data", "keep_pairs", "shown_records"]

#: A dataset of more records is shown as its size and runs of equal records in tables and JSON
SHOWN_RECORDS = 64


class EmptyDataset(Dataset):
    """A dataset of no records: one side of the pair "empty dataset against one record" (``min_records=0``).

    dpaudit's :class:`Dataset` refuses an empty array (most mechanisms need a
    record); a user function of a dataset is called on an empty array here.
    """

    __slots__ = ()

    def __init__(self, columns: int = 1) -> None:  # noqa: D107 - bypasses the non-empty check on purpose
        object.__setattr__(self, "records", np.zeros((0, columns)))
        object.__setattr__(self, "injected", {})
        object.__setattr__(self, "scheduled", {})


def data(rows: np.ndarray) -> Dataset:
    """``rows`` as a dataset (an :class:`EmptyDataset` of their width when there are none)."""
    return Dataset(rows) if len(rows) else EmptyDataset(rows.shape[1])


def shown_records(records: np.ndarray) -> list[Any] | dict[str, Any]:
    """Records as tables show them: numbers (one column) or rows; past :data:`SHOWN_RECORDS` records,
    ``{"records": n, "runs": [[record, count], ...]}`` (runs of equal consecutive records)."""
    one = records.shape[1] == 1
    if len(records) <= SHOWN_RECORDS:
        return records.ravel().tolist() if one else records.tolist()
    starts = np.concatenate([[True], np.any(records[1:] != records[:-1], axis=1)])
    first = np.flatnonzero(starts)
    counts = np.diff(np.append(first, len(records)))
    return {"records": len(records), "runs": [[records[i, 0].item() if one else records[i].tolist(), int(c)]
                                              for i, c in zip(first, counts)]}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate pair ``(S, S')`` with how it was built and the relation it realises."""

    name: str
    relation: str
    first: Dataset
    second: Dataset

    def datasets(self) -> tuple[Dataset, Dataset]:
        return self.first, self.second

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "relation": str(self.relation), "S": shown_records(self.first.records),
                "S_prime": shown_records(self.second.records)}


def _changed_row(candidate: Candidate) -> int | None:
    """The one position where a pair of datasets of one size differs (None: none or several)."""
    rows = np.flatnonzero(np.any(candidate.first.records != candidate.second.records, axis=1))
    return int(rows[0]) if len(rows) == 1 else None


def _resized(candidate: Candidate, size: int) -> Candidate | None:
    """A pair of one size brought to ``size`` records: records both datasets hold dropped from the end, or the first
    of them (else the changed record's first side) repeated at the front; None when that cannot be done."""
    a, b = candidate.first.records, candidate.second.records
    n = len(a)
    if n == size:
        return candidate
    common = np.flatnonzero(np.all(a == b, axis=1))
    if n > size:
        if len(common) < n - size:
            return None
        keep = np.ones(n, dtype=bool)
        keep[common[::-1][: n - size]] = False
        a, b = a[keep], b[keep]
    else:
        fill = a[common[0]] if len(common) else a[_changed_row(candidate) or 0]
        pad = np.repeat(fill[None, :], size - n, axis=0)
        a, b = np.vstack([pad, a]), np.vstack([pad, b])
    return Candidate(f"{candidate.name} ({size} records)", candidate.relation, Dataset(a), Dataset(b))


def keep_pairs(candidates: Iterable[Candidate], *, relations: Iterable[str] | None = None, size: int | None = None,
               min_records: int = 1) -> list[Candidate]:
    """The candidates of the searched ``relations`` (default replace-one and add/remove), each pair once.

    A replace-one pair whose changed record is the zero record (all zeros) on one side is also a zero-out pair
    (the relation of a record replaced by one that contributes nothing). With ``size``, add/remove pairs are
    dropped and every replace-one pair is brought to ``size`` records (:func:`_resized`); else no dataset holds
    fewer than ``min_records`` records.
    """
    wanted = {Relation(r) for r in (relations or (Relation.REPLACE_ONE, Relation.ADD_REMOVE))}
    seen, kept = set(), []
    for candidate in candidates:
        if candidate.relation == Relation.ADD_REMOVE:
            found = [candidate] if Relation.ADD_REMOVE in wanted and size is None else []
        else:
            resized = candidate if size is None else _resized(candidate, size)
            if resized is None:
                continue
            found = [resized] if Relation.REPLACE_ONE in wanted else []
            row = _changed_row(resized) if Relation.ZERO_OUT in wanted else None
            if row is not None and (not resized.first.records[row].any() or not resized.second.records[row].any()):
                found.append(dataclasses.replace(resized, relation=Relation.ZERO_OUT))
        for pair in found:
            key = (str(pair.relation), pair.first.records.tobytes(), pair.first.n, pair.second.records.tobytes(),
                   pair.second.n)
            if (size is not None or min(pair.first.n, pair.second.n) >= min_records) and key not in seen:
                seen.add(key)
                kept.append(pair)
    return kept

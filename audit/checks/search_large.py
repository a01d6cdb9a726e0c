"""Large adversarial datasets for sums and means: where a float sum rounds by more than one record moves it.

A sum of ``n`` records of ``[L, U]`` computed in floats rounds at each
addition. Two datasets that differ in one record have ideal sums at most
``U - L`` apart (known size: replace-one), but their computed sums can
differ by a few units in the last place of the total, ``ulp(n max(|L|,
|U|))``, which exceeds ``U - L`` when the bounds lie far from zero and ``n``
is large: the sized bounded sum of Casacuberta et al. (2022), and every mean
that divides such a sum. Small datasets never show it (their sums are exact
or round by far less than ``U - L``), so the search offers datasets of
:data:`LARGE_RECORDS` records ``N``:

* always (12 pairs): ``N - 1`` copies of the end farthest from zero, and a
  ramp from end to end in ascending and in descending order, with the first
  or the last record changed from ``low`` to ``high`` (replace-one), or the
  far end added there (add/remove);
* where the bounds lie far from zero, that is ``N ulp(N |far|)`` is at least
  :data:`FAR_FROM_ZERO` of the domain's width (the accumulated rounding of
  ``N`` additions can then reach it), values near rounding boundaries: for
  each scale ``j = 0, ..., 9`` (partial sums of ``2^-j`` of the total), the
  far end moved inward by 1/4 and by 3/4 of the float spacing there, and the
  midpoint; each as ``N - 1`` copies with the first or the last record
  changed from ``low`` to ``high``, and (3/4 only) mixed half and half with
  the far end, sorted ascending and descending, with the first record
  changed (about 60 replace-one pairs).

Every pair keeps the order of its records and differs in one position, so
it is a neighbour under ordered relations too. On sequential (``np.cumsum``)
and pairwise (``np.sum``) sums of 2,000 records over 256 domains
``[2^e (1 + o), 2^e (1 + o) + w]`` and their negatives (``e = 36..51``,
``w = 0.5..3``, ``o`` 0 or 0.37), where some of 2,900 arrangements of this
kind moved the sum by more than ``U - L`` (212 of 512 domain and sum pairs),
this family reached the same largest move on 200 (by 8 to 256 times
``U - L``).

Built with NumPy (no loop over records); each dataset holds ``N`` numbers.

References
----------
Casacuberta, Shoemate, Vadhan, Wagaman (2022), "Widespread underestimation of sensitivity in differentially
private libraries and how to fix it", ACM CCS 2022 (float sums, sized sums with bounds far from zero).
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.auditing.checks.search_candidates import Candidate
from dpaudit.core.kinds import Relation
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["FAR_FROM_ZERO", "LARGE_RECORDS", "SCALES", "boundary_values", "far_from_zero", "large_pairs"]

#: Records of each large dataset (``large_records`` of :func:`dpaudit.search`): the float spacing of a sum of
#: 2,000 records is 2^11 times a record's, past the width of domains whose bounds are 2^42 times it from zero
LARGE_RECORDS = 2_000
#: Scales of the boundary values: partial sums of the total down to 2^-9 of it
SCALES = 10
#: The boundary family is added when ``N ulp(N |far|)`` reaches this share of the domain's width
FAR_FROM_ZERO = 1 / 16


def _ends(low: float, high: float) -> tuple[float, float]:
    """The end of ``[low, high]`` farthest from zero, and the other."""
    return (high, low) if abs(high) >= abs(low) else (low, high)


def far_from_zero(low: float, high: float, records: int) -> bool:
    """True when ``records`` additions at the far end of ``[low, high]`` can round by :data:`FAR_FROM_ZERO` of its
    width."""
    far, _ = _ends(low, high)
    return records * math.ulp(records * abs(far)) >= FAR_FROM_ZERO * (high - low)


def boundary_values(low: float, high: float, records: int) -> list[tuple[str, float]]:
    """The midpoint and the far end moved inward by 1/4 and 3/4 of the float spacing of partial sums of
    ``2^-j`` of ``records`` far ends (``j < SCALES``), those inside the domain and not the far end: (label,
    value)."""
    far, _ = _ends(low, high)
    sign = math.copysign(1.0, far)
    values: dict[float, str] = {(low + high) / 2: "mid"}
    for j in range(SCALES):
        spacing = math.ulp(records * abs(far) / 2**j)
        for share, label in ((0.25, "1/4"), (0.75, "3/4")):
            value = far - sign * share * spacing
            if low <= value <= high and value != far:
                values.setdefault(value, f"far - {label} ulp(sum/2^{j})")
    return [(label, value) for value, label in values.items()]


def _changed(label: str, rows: np.ndarray, position: int, low: float, high: float) -> Candidate:
    """``rows`` with ``low`` against ``high`` inserted at ``position`` (replace-one)."""
    where = "first" if position == 0 else "last"
    return Candidate(f"{label} | {where} record {low!r} -> {high!r}", Relation.REPLACE_ONE,
                     Dataset(np.insert(rows, position, low)[:, None]), Dataset(np.insert(rows, position, high)[:, None]))


def large_pairs(low: float, high: float, records: int = LARGE_RECORDS) -> list[Candidate]:
    """The large-dataset pairs of datasets of ``records`` records in ``[low, high]`` (see the module docstring)."""
    n = int(records)
    if n < 2:
        return []
    far, _ = _ends(low, high)
    ramp = np.linspace(low, high, n - 1)
    basic = ((f"large: {n - 1} x {far!r}", np.full(n - 1, far)), (f"large: ramp ascending, {n - 1}", ramp),
             (f"large: ramp descending, {n - 1}", ramp[::-1].copy()))
    out = []
    for label, rows in basic:
        for position in (0, n - 1):
            out.append(_changed(label, rows, position, low, high))
            where = "front" if position == 0 else "end"
            out.append(Candidate(f"{label} | + [{far!r}] at the {where}", Relation.ADD_REMOVE, Dataset(rows[:, None]),
                                 Dataset(np.insert(rows, position, far)[:, None])))
    if not far_from_zero(low, high, n):
        return out
    for label, value in boundary_values(low, high, n):
        constant = np.full(n - 1, value)
        for position in (0, n - 1):
            out.append(_changed(f"large: {n - 1} x {value!r} ({label})", constant, position, low, high))
        if label.startswith("far - 3/4"):
            mixed = np.sort(np.concatenate([np.full(n // 2, far), np.full(n - 1 - n // 2, value)]))
            for order, rows in (("ascending", mixed), ("descending", mixed[::-1].copy())):
                out.append(_changed(f"large: half {far!r}, half {value!r} ({label}), {order}", rows, 0, low, high))
    return out

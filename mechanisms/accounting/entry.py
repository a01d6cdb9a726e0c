"""An evaluated claim as a frozen record (no NumPy: results and reports read it without loading the accountants)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["NEEDS_POSITIVE_DELTA", "REFERENCE_KINDS", "ClaimEntry", "as_plain"]

#: Kinds of entries that are not upper bounds, and what each is: listed with their value where they have one,
#: never ``applicable``, so a verdict, and code that keeps the applicable claims, sees bounds only.
REFERENCE_KINDS = {"reference": "a reference, not a bound",
                   "lower-bound": "a lower bound on the true epsilon, not a guarantee"}
#: Why a claim is not applicable at ``delta = 0`` (the reason of every claim without a pure-DP form).
NEEDS_POSITIVE_DELTA = "needs delta > 0: this bound is stated for delta > 0 only (an (epsilon, delta) bound)"


def as_plain(value: Any) -> Any:
    """Tuples to lists and mappings to dicts, recursively (the JSON form)."""
    if isinstance(value, Mapping):
        return {key: as_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_plain(item) for item in value]
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimEntry:
    """One evaluated claim: an upper bound (or an exact instance value) at a point, frozen.

    Attributes
    ----------
    name, citation, relation, kind, applicable, reason, index
        As in :class:`Claim` (``applicable`` and ``reason`` after any point condition).
    epsilon, delta : float or None
        The claim's epsilon at ``delta`` (``None`` when not applicable or vacuous; a reference of
        :data:`REFERENCE_KINDS`, never applicable, keeps its value).
    notes : tuple of str
        Remarks (vacuous values, a paper claim below its accountant).
    slack : float or None
        This claim divided by the tightest valid claim for the audit's relation (``theory_slack``).
    profile : mapping or None
        ``{"epsilons", "deltas"}``: the claim's privacy profile, for the figures.
    delta_at_epsilon : float or None
        ``delta(epsilon)`` when evaluated at an epsilon.
    below_accountant : bool or None
        True when this paper claim is smaller than the accountant for the same noise.
    reported_epsilon : float or None
        A claim that does not apply but is what some tool reports (``Claim.reported``): the value it
        reports at ``delta``, so that a report can say a certified bound exceeds it.
    extra : mapping
        Any other key of a document read back (kept, never interpreted).
    """

    name: str
    citation: str
    relation: str
    kind: str
    applicable: bool
    reason: str
    index: int | None
    epsilon: float | None
    delta: float | None
    notes: tuple[str, ...] = ()
    slack: float | None = None
    profile: Mapping[str, Any] | None = None
    delta_at_epsilon: float | None = None
    below_accountant: bool | None = None
    reported_epsilon: float | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    _KEYS = ("name", "citation", "relation", "kind", "applicable", "reason", "index", "epsilon", "delta", "notes")
    _OPTIONAL = ("slack", "profile", "delta_at_epsilon", "below_accountant", "reported_epsilon")

    @property
    def is_bound(self) -> bool:
        """An applicable upper bound with a finite epsilon (what a verdict compares with)."""
        return self.applicable and self.kind == "upper-bound" and self.epsilon is not None

    def replace(self, **changes: Any) -> "ClaimEntry":
        """A copy with ``changes`` (the entry itself is frozen)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> "ClaimEntry":
        """Read the JSON entry back (unknown keys are kept in ``extra``)."""
        fields: dict[str, Any] = {key: entry.get(key) for key in cls._KEYS + cls._OPTIONAL}
        fields["notes"] = tuple(entry.get("notes") or ())
        fields["kind"] = fields["kind"] or "upper-bound"
        fields["reason"] = fields["reason"] or ""
        extra = {key: value for key, value in entry.items() if key not in cls._KEYS + cls._OPTIONAL}
        return cls(**fields, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The JSON entry (optional keys only when set)."""
        entry = {key: getattr(self, key) for key in self._KEYS}
        entry["relation"] = str(self.relation)
        entry["notes"] = list(self.notes)
        for key in self._OPTIONAL:
            if getattr(self, key) is not None:
                entry[key] = as_plain(getattr(self, key))
        entry.update(as_plain(self.extra))
        return entry

"""Claims: every theoretical bound a mechanism's parameters make applicable.

A :class:`Claim` carries a name, a citation, the neighbouring relation it
assumes, the canary index for per-index bounds, and two pure functions,
``epsilon(delta)`` and ``delta(epsilon)``. A claim whose assumptions fail is
kept, marked ``applicable=False`` with the reason, and never evaluated.

A mechanism describes what it does (``accounting.descriptions``); the
builders of :mod:`dpaudit.mechanisms.accounting.builders` turn a
description into claims (``claims_for``), once per description.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit.mechanisms.accounting.conversions import cks_delta, cks_epsilon
from dpaudit.mechanisms.accounting.entry import ClaimEntry
from dpaudit.mechanisms.accounting.profiles import bisect_decreasing

__all__ = [
    "Claim",
    "ClaimEntry",
    "RELATIONS",
    "evaluate_claims",
    "delta_for_epsilon",
    "fixed_claim",
    "not_applicable",
    "profile_claim",
    "rdp_claim",
]

RELATIONS = ("replace-one", "add-remove")


@dataclasses.dataclass(frozen=True, slots=True)
class Claim:
    """One theoretical guarantee (an upper bound on privacy loss), or why it does not apply.

    Attributes
    ----------
    name : str
        Short identifier, stable across versions (used in JSON and verdicts).
    citation : str
        Paper, theorem and equation.
    relation : str
        ``"replace-one"`` or ``"add-remove"``.
    applicable : bool
        False when the parameters violate the bound's assumptions.
    reason : str
        Why the claim does not apply (empty when it does).
    index : int or None
        Canary position for per-index claims (1-based).
    kind : str
        ``"upper-bound"``, or ``"exact-instance"`` for the exact value of one
        instance (a lower bound on the worst case, not a guarantee).
    condition : callable or None
        ``condition(epsilon, delta) -> reason or None``: assumptions that
        depend on the point of evaluation.
    compare_with : str or None
        Name of an accountant for the same mechanism and noise: evaluation
        notes when this claim is smaller (that accountant does not support it).
    """

    name: str
    citation: str
    relation: str
    applicable: bool = True
    reason: str = ""
    index: int | None = None
    kind: str = "upper-bound"
    epsilon_fn: Callable[[float], float] | None = dataclasses.field(default=None, repr=False, compare=False)
    delta_fn: Callable[[float], float] | None = dataclasses.field(default=None, repr=False, compare=False)
    condition: Callable[[float | None, float | None], str | None] | None = dataclasses.field(
        default=None, repr=False, compare=False)
    compare_with: str | None = None

    def epsilon(self, delta: float) -> float:
        """``epsilon(delta)`` (rounded up); ``nan`` when not applicable."""
        if not self.applicable or self.epsilon_fn is None:
            return math.nan
        return float(self.epsilon_fn(float(delta)))

    def delta(self, epsilon: float) -> float:
        """``delta(epsilon)``, capped at 1; ``nan`` when not applicable."""
        if not self.applicable or self.delta_fn is None:
            return math.nan
        return float(min(max(self.delta_fn(float(epsilon)), 0.0), 1.0))

    def evaluate(self, *, delta: float | None = None, epsilon: float | None = None) -> "ClaimEntry":
        """This claim evaluated at ``delta`` (its epsilon) and/or ``epsilon`` (its delta).

        Returns
        -------
        ClaimEntry
            Frozen; its :meth:`ClaimEntry.to_dict` is the JSON entry of docs/design.md.
        """
        reason = self.reason
        applicable = self.applicable
        if applicable and self.condition is not None:
            failed = self.condition(epsilon, delta)
            if failed:
                applicable, reason = False, failed
        fields: dict[str, Any] = {"name": self.name, "citation": self.citation, "relation": str(self.relation),
                                  "kind": self.kind, "applicable": applicable, "reason": reason,
                                  "index": self.index, "epsilon": None, "delta": None}
        if not applicable:
            return ClaimEntry(**fields)
        notes: list[str] = []
        if delta is not None:
            fields["delta"] = float(delta)
            eps = self.epsilon(delta)
            fields["epsilon"] = eps if math.isfinite(eps) else None
            if not math.isfinite(eps):
                notes.append("vacuous: no finite epsilon at this delta")
        if epsilon is not None:
            value = self.delta(epsilon)
            if delta is None:
                fields["epsilon"], fields["delta"] = float(epsilon), value
            fields["delta_at_epsilon"] = value
            if value >= 1.0:
                notes.append("vacuous: the bound is 1 (clamped) at this epsilon")
        return ClaimEntry(**fields, notes=tuple(notes))

    def profile(self, epsilons) -> dict[str, list[float]]:
        """``{"epsilons": [...], "deltas": [delta(e) for e in epsilons]}`` (the figures' privacy profile)."""
        return {"epsilons": [float(e) for e in epsilons], "deltas": [self.delta(e) for e in epsilons]}


def evaluate_claims(claims: list[Claim], *, delta: float | None = None,
                    epsilon: float | None = None) -> list[ClaimEntry]:
    """Evaluate claims, noting paper claims that are smaller than their accountant."""
    entries = [claim.evaluate(delta=delta, epsilon=epsilon) for claim in claims]
    by_name = {entry.name: entry for entry in entries}
    noted = []
    for claim, entry in zip(claims, entries):
        other = by_name.get(claim.compare_with or "")
        if (entry.applicable and other is not None and other.applicable and delta is not None
                and entry.epsilon is not None and other.epsilon is not None and entry.epsilon < other.epsilon):
            entry = entry.replace(below_accountant=True, notes=entry.notes + (
                f"smaller than the accountant {other.name} for the same noise "
                f"(epsilon {other.epsilon:.6g}): that accountant does not support the claim",))
        noted.append(entry)
    return noted


def delta_for_epsilon(epsilon_fn: Callable[[float], float], epsilon: float, iterations: int = 60) -> float:
    """Smallest ``delta`` with ``epsilon_fn(delta) <= epsilon``, for ``epsilon_fn`` decreasing in delta.

    Bisection on ``log delta`` in ``[-745, 0]``, rounded up (the returned delta
    is never below the true one); 1 when even ``delta = 1`` does not reach ``epsilon``.
    """
    if epsilon_fn(1.0) > epsilon:
        return 1.0
    low, high = -745.0, 0.0
    for _ in range(iterations):
        mid = 0.5 * (low + high)
        low, high = (low, mid) if epsilon_fn(math.exp(mid)) <= epsilon else (mid, high)
    return math.exp(high)


def fixed_claim(name: str, citation: str, relation: str, epsilon: float, delta: float = 0.0) -> Claim:
    """A claim ``(epsilon, delta)`` as stated (by a library object): it holds for every ``delta' >= delta``.

    Below its own ``delta`` nothing is claimed (the claim is vacuous there:
    ``epsilon = inf``); at or above it, ``epsilon`` itself is kept (no
    conversion that could only lower it is attempted).
    """
    eps0, delta0 = float(epsilon), float(delta)
    return Claim(name, citation, relation,
                 epsilon_fn=lambda d: eps0 if d >= delta0 else math.inf,
                 delta_fn=lambda e: delta0 if e >= eps0 else 1.0)


def not_applicable(name: str, citation: str, relation: str, reason: str,
                   index: int | None = None) -> Claim:
    """A claim whose assumptions fail, with the reason."""
    return Claim(name, citation, relation, applicable=False, reason=reason, index=index)


def rdp_claim(name: str, citation: str, relation: str, orders: np.ndarray, rdp: np.ndarray,
              index: int | None = None, **extra: Any) -> Claim:
    """A claim from an RDP curve, converted by Canonne-Kamath-Steinke Prop. 12 (min over orders)."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    return Claim(name, citation, relation, index=index,
                 epsilon_fn=lambda d: cks_epsilon(d, orders, rdp),
                 delta_fn=lambda e: cks_delta(e, orders, rdp), **extra)


def profile_claim(name: str, citation: str, relation: str,
                  log_delta: Callable[[np.ndarray], np.ndarray], index: int | None = None,
                  upper: float = 500.0, **extra: Any) -> Claim:
    """A claim from a log privacy profile ``log delta(eps)`` (non-increasing in eps)."""
    def epsilon_fn(delta: float) -> float:  # rounded up, checked against delta_fn itself
        return float(bisect_decreasing(log_delta, np.array(math.log(delta)), np.array(upper),
                                       holds=lambda e: delta_fn(e) <= delta))

    def delta_fn(epsilon: float) -> float:
        return float(np.exp(np.minimum(log_delta(np.array(epsilon)), 0.0)))

    return Claim(name, citation, relation, index=index, epsilon_fn=epsilon_fn,
                 delta_fn=delta_fn, **extra)

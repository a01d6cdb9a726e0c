"""Claims: every theoretical bound a mechanism's parameters make applicable.

A :class:`Claim` carries a name, a citation, the neighbouring relation it
assumes, the canary index for per-index bounds, and two pure functions,
``epsilon(delta)`` and ``delta(epsilon)``. A claim whose assumptions fail is
kept, marked ``applicable=False`` with the reason, and never evaluated. A
reference (a value beside the bounds, :data:`REFERENCE_KINDS`) is evaluated
but never applicable, so the applicable claims are the bounds; a claim with no
finite epsilon at ``delta = 0`` is not applicable there, with the reason.

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
from dpaudit.mechanisms.accounting.entry import NEEDS_POSITIVE_DELTA, REFERENCE_KINDS, ClaimEntry
from dpaudit.mechanisms.accounting.profiles import bisect_decreasing

__all__ = [
    "Claim",
    "ClaimEntry",
    "NEEDS_POSITIVE_DELTA",
    "REFERENCE_KINDS",
    "RELATIONS",
    "evaluate_claims",
    "delta_for_epsilon",
    "fixed_claim",
    "not_applicable",
    "profile_claim",
    "rdp_claim",
    "shows_profile",
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
        instance (a lower bound on the worst case, not a guarantee). The kinds of
        :data:`REFERENCE_KINDS` (``"reference"``, ``"lower-bound"``) are never applicable:
        their value is kept (:attr:`shows_value`) and the reason says what they are.
    condition : callable or None
        ``condition(epsilon, delta) -> reason or None``: assumptions that
        depend on the point of evaluation.
    compare_with : str or None
        Name of an accountant for the same mechanism and noise: evaluation
        notes when this claim is smaller (that accountant does not support it).
    covers_delta_zero : bool
        True when ``epsilon_fn`` is defined at ``delta = 0`` (a pure-DP bound such as
        Laplace's, or a stated ``(epsilon, delta)``). Any other claim, evaluated at
        ``delta = 0``, is not applicable with :data:`NEEDS_POSITIVE_DELTA` as the
        reason, and ``epsilon(0)`` is ``inf``: none of its functions is called there.
    shows_value : bool
        Set for a claim of :data:`REFERENCE_KINDS` whose assumptions hold: not
        applicable, yet evaluated (its value and profile are shown beside the claims).
    reported : bool
        True for a value some tool reports for this mechanism although its
        ``condition`` fails (Poisson accounting of shuffled batches): when the
        condition fails, the entry keeps the value as ``reported_epsilon``, so
        a report can say that a certified bound exceeds what is reported.
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
    covers_delta_zero: bool = False
    reported: bool = False
    shows_value: bool = dataclasses.field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.kind in REFERENCE_KINDS and self.applicable:  # a value to show, not a bound to rely on
            what = REFERENCE_KINDS[self.kind]
            object.__setattr__(self, "applicable", False)
            object.__setattr__(self, "shows_value", True)
            object.__setattr__(self, "reason", f"{what}: {self.reason}" if self.reason else what)

    @property
    def valued(self) -> bool:
        """True when the claim is evaluated: applicable, or a reference whose assumptions hold."""
        return self.applicable or self.shows_value

    def epsilon(self, delta: float) -> float:
        """``epsilon(delta)`` (rounded up); ``nan`` when not evaluated; ``inf`` at ``delta = 0`` unless the
        claim covers it (:attr:`covers_delta_zero`)."""
        if not self.valued or self.epsilon_fn is None:
            return math.nan
        if float(delta) <= 0.0 and not self.covers_delta_zero:
            return math.inf
        return float(self.epsilon_fn(float(delta)))

    def delta(self, epsilon: float) -> float:
        """``delta(epsilon)``, capped at 1; ``nan`` when not evaluated."""
        if not self.valued or self.delta_fn is None:
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
        valued = self.valued
        if valued and delta is not None and float(delta) <= 0.0 and not (
                self.covers_delta_zero and self.epsilon_fn is not None
                and math.isfinite(self.epsilon(0.0))):  # checked before any point condition reads delta
            valued, reason = False, NEEDS_POSITIVE_DELTA
        reported = None
        if valued and self.condition is not None:
            failed = self.condition(epsilon, delta)
            if failed:
                valued, reason = False, failed
                if self.reported and delta is not None and float(delta) > 0:
                    value = self.epsilon(delta)
                    reported = value if math.isfinite(value) else None
        fields: dict[str, Any] = {"name": self.name, "citation": self.citation, "relation": str(self.relation),
                                  "kind": self.kind, "applicable": valued and self.applicable, "reason": reason,
                                  "index": self.index, "epsilon": None, "delta": None}
        if not valued:
            return ClaimEntry(**fields, reported_epsilon=reported)
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


def shows_profile(claim: Claim, entry: ClaimEntry) -> bool:
    """True when ``entry`` (``claim`` evaluated) gets the claim's privacy profile for the figures: an applicable
    claim, a reference, or a claim whose only fault is the point ``delta = 0``."""
    return claim.valued and (entry.applicable or claim.shows_value or entry.reason == NEEDS_POSITIVE_DELTA)


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
                 delta_fn=lambda e: delta0 if e >= eps0 else 1.0, covers_delta_zero=True)


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
                  upper: float = 500.0, pure_epsilon: float | None = None, **extra: Any) -> Claim:
    """A claim from a log privacy profile ``log delta(eps)`` (non-increasing in eps); ``pure_epsilon``, where
    the profile reaches 0 (a pure-DP bound, as randomized response's ``eps0``), is its epsilon at ``delta = 0``."""
    def epsilon_fn(delta: float) -> float:  # rounded up, checked against delta_fn itself
        if delta <= 0.0:  # only reached with pure_epsilon (covers_delta_zero)
            return float(pure_epsilon)
        return float(bisect_decreasing(log_delta, np.array(math.log(delta)), np.array(upper),
                                       holds=lambda e: delta_fn(e) <= delta))

    def delta_fn(epsilon: float) -> float:
        return float(np.exp(np.minimum(log_delta(np.array(epsilon)), 0.0)))

    return Claim(name, citation, relation, index=index, epsilon_fn=epsilon_fn,
                 delta_fn=delta_fn, covers_delta_zero=pure_epsilon is not None, **extra)

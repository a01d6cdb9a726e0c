"""Compare a certified lower bound with every applicable claim: the one place a verdict is decided.

``violation``: the certified lower bound exceeds an applicable upper-bound
claim for the same neighbouring relation (the claim is refuted at the
audit's confidence). ``consistent``: something was certified (a positive
lower bound) and it is below every such claim. ``inconclusive``: nothing was
certified (too few trials, or a weak attack), or no claim applies.
Exact-instance values are shown but never used for a verdict.

:func:`compare` is used by result assembly, ``dpaudit bound`` and the
reports, so "the applicable upper-bound claims for this relation" is written
once (:func:`applicable_bounds`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dpaudit.mechanisms.accounting.entry import NEEDS_POSITIVE_DELTA, ClaimEntry

__all__ = ["VERDICTS", "Comparison", "applicable_bounds", "combine", "compare"]

VERDICTS = ("consistent", "violation", "inconclusive")


def applicable_bounds(claims: Sequence[ClaimEntry], relation: str | None) -> list[ClaimEntry]:
    """The applicable upper-bound claims with a finite epsilon for ``relation`` (any relation: ``None``)."""
    return [c for c in claims if c.is_bound and (relation is None or str(c.relation) == str(relation))]


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """What a certified bound says about the claims (frozen).

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS`.
    reason : str
        One sentence.
    violations : tuple of str
        Names of the refuted claims.
    tightness : mapping
        ``certified / claim`` per compared claim (``None`` for a claim of 0).
    tightest : str or None
        Name of the smallest applicable claim.
    tightest_epsilon : float or None
    slack : mapping
        ``claim / tightest claim`` per compared claim: theory slack, apart from anything an audit shows.
    exact_epsilon : float or None
        The exact value of the instance, where a claim of kind ``exact-instance`` carries one.
    tightest_over_exact : float or None
    """

    verdict: str
    reason: str
    violations: tuple[str, ...]
    tightness: Mapping[str, float | None]
    tightest: str | None
    tightest_epsilon: float | None
    slack: Mapping[str, float | None]
    exact_epsilon: float | None
    tightest_over_exact: float | None

    def theory_slack(self) -> dict[str, Any]:
        """The ``theory_slack`` entry of a result."""
        return {"tightest": self.tightest, "tightest_epsilon": self.tightest_epsilon,
                "exact_epsilon": self.exact_epsilon, "tightest_over_exact": self.tightest_over_exact}

    def with_slack(self, claims: Sequence[ClaimEntry]) -> tuple[ClaimEntry, ...]:
        """``claims`` with each compared claim's ``slack`` filled in."""
        return tuple(c.replace(slack=self.slack[c.name]) if c.name in self.slack else c for c in claims)


def compare(lower_bound: float, claims: Sequence[ClaimEntry], relation: str | None) -> Comparison:
    """Compare a certified ``epsilon`` lower bound with evaluated claims for ``relation``.

    Parameters
    ----------
    lower_bound : float
        The certified bound (0 when nothing is certified, as for ``dpaudit bound``).
    claims : sequence of ClaimEntry
    relation : str or None
        The neighbouring relation of the canary (``None``: every relation).
    """
    compared = applicable_bounds(claims, relation)
    violations = tuple(c.name for c in compared if lower_bound > c.epsilon)
    tightness = {c.name: (lower_bound / c.epsilon if c.epsilon > 0 else None) for c in compared}
    tightest = min(compared, key=lambda c: c.epsilon) if compared else None
    exact = next((c.epsilon for c in claims if c.kind == "exact-instance" and c.epsilon), None)
    slack = {c.name: (c.epsilon / tightest.epsilon if tightest.epsilon > 0 else None) for c in compared} \
        if tightest else {}
    if violations:
        verdict = "violation"
        reason = (f"certified epsilon >= {lower_bound:.4g} exceeds "
                  + ", ".join(f"{c.name} ({c.epsilon:.4g})" for c in compared if c.name in violations))
    elif tightest is None:
        verdict, reason = "inconclusive", f"no applicable claim for the {relation} relation"
        at_zero = [c for c in claims if c.reason == NEEDS_POSITIVE_DELTA
                   and (relation is None or str(c.relation) == str(relation))]
        if at_zero:
            reason += (f" at delta = 0: {', '.join(dict.fromkeys(c.name for c in at_zero))} "
                       f"{'needs' if len(at_zero) == 1 else 'need'} delta > 0")
    elif lower_bound <= 0:
        verdict, reason = "inconclusive", "nothing was certified (epsilon lower bound 0): more trials or a stronger attack"
    else:
        verdict = "consistent"
        reason = (f"certified epsilon >= {lower_bound:.4g} is below every claim; the smallest is "
                  f"{tightest.name} ({tightest.epsilon:.4g})")
    return Comparison(
        verdict=verdict, reason=reason, violations=violations,
        tightness={k: (v if v is not None and math.isfinite(v) else None) for k, v in tightness.items()},
        tightest=tightest.name if tightest else None, tightest_epsilon=tightest.epsilon if tightest else None,
        slack=slack, exact_epsilon=exact if tightest else None,
        tightest_over_exact=tightest.epsilon / exact if tightest and exact else None)


def combine(verdicts: list[str]) -> str:
    """One verdict for several: any violation, else any consistent, else inconclusive."""
    if "violation" in verdicts:
        return "violation"
    if "consistent" in verdicts:
        return "consistent"
    return "inconclusive"

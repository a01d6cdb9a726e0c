"""A library run's conformance: the relation audited, what the engine claimed, what was certified, and which of
its accountant's assumptions the evidence points at.

A DP library's claim rests on its accountant's assumptions (how batches are
sampled, that the noise's scale is fixed, which neighbours it covers). An
adapter that knows them checks each against the code as configured
(``Mechanism.assumptions``); the section puts the checks beside the claim and
the certified bound. Where a violation is certified, the assumptions that do
not hold are what the evidence points at: the certified bound shows the
claim false for this code, and those are the ways the code differs from what
the accountant analysed (a violation with every assumption holding points at
the accountant itself, or at a bug no check covers).
"""

from __future__ import annotations

import math
from typing import Any

from dpaudit.auditing.statistics.verdict import applicable_bounds

__all__ = ["conformance"]


def conformance(mechanism: Any, relation: str, claims: tuple, bound: float, verdict: str) -> dict[str, Any]:
    """The conformance section of a library run (empty when the mechanism states no assumptions)."""
    checks = mechanism.assumptions()
    if not checks:
        return {}
    bounds = [claim for claim in applicable_bounds(claims, relation)]
    claimed = min((claim.epsilon for claim in bounds), default=None)
    failing = [check["name"] for check in checks if not check["holds"]]
    if verdict == "violation":
        points = failing
        statement = (f"the certified epsilon {bound:.4g} exceeds the claim {claimed:.4g} for the {relation} relation"
                     + (f"; the code departs from the accountant's assumptions on {', '.join(failing)}" if failing
                        else "; every assumption checked holds: the accountant or a bug no check covers is at fault"))
    else:
        points = []
        claim_text = "no claim covers this relation" if claimed is None else f"the claim {claimed:.4g}"
        statement = (f"no violation certified ({bound:.4g} against {claim_text})"
                     + (f"; the assumptions on {', '.join(failing)} do not hold for this code, so the claim is not "
                        f"known to cover it: more trials, or another pair, may show the gap" if failing else ""))
    return {"library": mechanism.label, "relation": relation,
            "claimed_epsilon": claimed if claimed is None or math.isfinite(claimed) else None,
            "certified_epsilon": bound, "verdict": verdict, "assumptions": [dict(check) for check in checks],
            "points_at": points, "statement": statement}

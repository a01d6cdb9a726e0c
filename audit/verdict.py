"""Compare a certified lower bound with every applicable claim.

``violation``: the certified lower bound exceeds an applicable upper-bound
claim for the same neighbouring relation (the claim is refuted at the
audit's confidence). ``consistent``: something was certified (a positive
lower bound) and it is below every such claim. ``inconclusive``: nothing was
certified (too few trials, or a weak attack), or no claim applies.
Exact-instance values are shown but never used for a verdict.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["VERDICTS", "combine", "judge"]

VERDICTS = ("consistent", "violation", "inconclusive")


def judge(lower_bound: float, claims: list[dict[str, Any]], relation: str) -> dict[str, Any]:
    """The verdict of one certified ``epsilon`` lower bound against evaluated claims."""
    compared = [c for c in claims if c["applicable"] and c.get("kind", "upper-bound") == "upper-bound"
                and c["relation"] == relation and c["epsilon"] is not None]
    violations = [c["name"] for c in compared if lower_bound > c["epsilon"]]
    tightness = {c["name"]: (lower_bound / c["epsilon"] if c["epsilon"] > 0 else math.inf)
                 for c in compared}
    if violations:
        verdict = "violation"
        reason = (f"certified epsilon >= {lower_bound:.4g} exceeds "
                  + ", ".join(f"{c['name']} ({c['epsilon']:.4g})" for c in compared if c["name"] in violations))
    elif not compared:
        verdict, reason = "inconclusive", f"no applicable claim for the {relation} relation"
    elif lower_bound <= 0:
        verdict, reason = "inconclusive", "nothing was certified (epsilon lower bound 0): more trials or a stronger attack"
    else:
        tightest = min(compared, key=lambda c: c["epsilon"])
        verdict = "consistent"
        reason = (f"certified epsilon >= {lower_bound:.4g} is below every claim; the smallest is "
                  f"{tightest['name']} ({tightest['epsilon']:.4g})")
    return {"verdict": verdict, "reason": reason, "violations": violations,
            "tightness": {k: (v if math.isfinite(v) else None) for k, v in tightness.items()}}


def combine(verdicts: list[str]) -> str:
    """One verdict for several: any violation, else any consistent, else inconclusive."""
    if "violation" in verdicts:
        return "violation"
    if "consistent" in verdicts:
        return "consistent"
    return "inconclusive"

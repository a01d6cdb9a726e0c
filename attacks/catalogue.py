"""What ``dpaudit list`` shows of the attack side: canaries, scores and estimators."""

from __future__ import annotations

from typing import Any

from dpaudit.attacks.scores import SCORES

CANARIES = {
    "input": "a record at the ends of the record space (+ in S, - or removed in S')",
    "gradient": "a gradient inserted directly: +L u in S, -L u (or 0) in S'",
    "reset": "projected-kernel: the canary step is a constant map c +- u (the tight instance)",
    "boundary": "a gradient canary with the start point on the boundary of K",
}
ESTIMATORS = {
    "epsilon": "Clopper-Pearson epsilon lower bound at delta (split or union thresholds)",
    "gdp": "certified mu-GDP lower bound and its model-based epsilon",
    "profile": "certified privacy-profile lower bound delta_lb(eps)",
    "one-run": "one-run auditing with many canaries: f-DP (Mahloujifar et al. 2024) or (eps, delta) (Steinke et al. 2023)",
}


def catalogue() -> dict[str, Any]:
    """Names and one-line summaries, as ``dpaudit list`` prints them."""
    def rows(table):
        return [{"name": name, "summary": summary} for name, summary in table.items()]
    return {"canaries": rows(CANARIES), "scores": rows(SCORES), "estimators": rows(ESTIMATORS)}

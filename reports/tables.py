"""The rows of a report's tables: claims, canary positions, estimators, the portfolio's tests, conformance, and
the mechanism's parameters (plain text; the Markdown and HTML reports escape them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpaudit.auditing.jobs.result import AuditResult, ClaimEntry, IndexResult
from dpaudit.auditing.statistics.verdict import applicable_bounds
from dpaudit.mechanisms.accounting.entry import REFERENCE_KINDS
from dpaudit.reports.formatting import Result, _number, _plain_num, band_text, typed

__all__ = ["ESTIMATE_COLUMNS", "INDEX_COLUMNS", "PORTFOLIO_COLUMNS", "claims_rows", "conformance_rows", "estimate_rows",
           "index_rows", "portfolio_rows", "shown_params", "strongest_row", "tightest_claim"]

def conformance_rows(result: AuditResult) -> list[list[str]]:
    """``[assumption, what the accountant assumes, holds, what the code does]`` of a library run's conformance."""
    return [[str(item.get("name")), str(item.get("assumed")), "yes" if item.get("holds") else "no",
             str(item.get("detail"))] for item in result.conformance.get("assumptions") or ()]


def shown_params(mechanism: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that apply: those the mechanism lists as inapplicable and unset ones are hidden."""
    hidden = set(mechanism.get("inapplicable") or ())
    return {key: value for key, value in mechanism.get("params", {}).items()
            if key not in hidden and value is not None}


def claims_rows(claims: Sequence[ClaimEntry], tightness: Mapping[str, Any],
                certified: Any = None) -> list[list[str]]:
    """Rows ``name, index, relation, applicable, epsilon, tightness, slack, citation or reason`` (plain text).

    Tightness is the verdict's ratio where it has one, else ``certified / epsilon`` (the exact value's row).
    """
    rows = []
    for claim in claims:
        ratio = tightness.get(claim.name)
        reference = claim.kind in REFERENCE_KINDS and not claim.applicable and claim.epsilon is not None
        if ratio is None and claim.applicable and _number(certified) and _number(claim.epsilon) \
                and claim.epsilon > 0:
            ratio = certified / claim.epsilon
        rows.append([
            str(claim.name), "all" if claim.index is None else str(claim.index), str(claim.relation),
            "yes" if claim.applicable else ("no (reference)" if reference else "no"),
            _plain_num(claim.epsilon) if claim.applicable or reference else "n/a",
            _plain_num(ratio, ".3g") if ratio is not None else "",
            _plain_num(claim.slack, ".3g") if claim.slack is not None else "",
            str(claim.citation) if claim.applicable else (f"{claim.reason}; {claim.citation}" if reference
                                                          else f"not applicable: {claim.reason}"),
        ])
    return rows


def tightest_claim(row: IndexResult, relation: str | None) -> ClaimEntry | None:
    """The tightest applicable upper-bound claim of a position for ``relation`` (the verdict's, else the
    smallest); ``None`` when none has a finite epsilon."""
    bounds = [c for c in applicable_bounds(row.claims, relation) if _number(c.epsilon)]
    named = [c for c in bounds if c.name == (row.theory_slack or {}).get("tightest")]
    return named[0] if named else (min(bounds, key=lambda c: c.epsilon) if bounds else None)


def index_rows(result: Result) -> list[dict[str, str]]:
    """One row per canary position: certified bounds, tightest claim, exact value, ceiling, tightness, verdict."""
    result = typed(result)
    rows = []
    relation = result.canary.get("relation")
    for row in result.per_index:
        emp = row.empirical
        claim = tightest_claim(row, relation)
        exact = next((c.epsilon for c in row.claims if c.kind == "exact-instance"), None)
        certified = emp.epsilon_lower_bound
        ratio = certified / claim.epsilon if claim and _number(certified) and claim.epsilon > 0 else None
        rows.append({
            "index": "-" if row.index is None else str(row.index),
            "epsilon": _plain_num(certified, ".4f"),
            "mu": "n/a" if result.anytime else _plain_num(emp.mu_lower_bound, ".4f"),  # anytime fits no GDP
            "claim": str(claim.name) if claim else "none applicable",
            "claim_epsilon": _plain_num(claim.epsilon) if claim else "n/a",
            "exact": _plain_num(exact),
            "ceiling": _plain_num(row.ceiling) + (" (simulated)" if row.ceiling_source else ""),
            "ceiling_band": band_text(row.ceiling_band) + (" (certified bound above it)" if row.above_ceiling_band
                                                           else " (certified bound below it)"
                                                           if row.below_ceiling_band else ""),
            "tightness": _plain_num(ratio, ".3g") if ratio is not None else "n/a",
            "verdict": str(row.verdict),
        })
    return rows


INDEX_COLUMNS = (("index", "index"), ("epsilon", "epsilon >= (certified)"), ("claim", "tightest claim"),
                 ("claim_epsilon", "claim epsilon"), ("tightness", "tightness"), ("exact", "exact value"),
                 ("ceiling", "ceiling"), ("ceiling_band", "ceiling band (95%)"), ("mu", "mu >= (model-based)"),
                 ("verdict", "verdict"))


ESTIMATE_COLUMNS = ("estimator", "certified", "value", "method", "confidence")


PORTFOLIO_COLUMNS = ("index", "score", "applicable", "epsilon >= on held-out calibration", "mu >=", "chose",
                     "why not applicable")


def strongest_row(result: Result) -> IndexResult:
    """The position whose bound the headline states."""
    result = typed(result)
    return next((r for r in result.per_index if r.index == result.empirical.index), result.per_index[0])


def estimate_rows(result: Result) -> list[list[str]]:
    """One row per estimator that ran at the strongest position (whichever they were)."""
    return [[str(e.name), str(e.quantity), _plain_num(e.value, ".4g"), str(e.method), _plain_num(e.confidence, ".4g")]
            for e in typed(result).empirical.estimates]


def portfolio_rows(result: Result) -> list[list[str]]:
    """One row per distinct test of a portfolio at a position: its calibration strength, the scores that gave
    it (``projection = gaussian = logistic`` where they tie), and which one certified.

    A score that does not apply is listed once with its reason after the others, at the positions it
    does not apply to ("every position" when that is all of them), not once per position; so is a score that
    applies but was not judged (a preferred score was taken without a contest there).
    """
    candidates = list(typed(result).attack.get("portfolio") or ())
    positions = list(dict.fromkeys(c.get("index") for c in candidates))
    skipped: dict[tuple[str, str], list[Any]] = {}
    not_judged: dict[tuple[str, str], list[Any]] = {}
    for c in candidates:
        if not c.get("applicable"):
            skipped.setdefault((str(c.get("name")), str(c.get("reason") or "")), []).append(c.get("index"))
        elif c.get("epsilon") is None:  # applicable, but a preferred score was taken without a contest
            not_judged.setdefault((str(c.get("name")), str(c.get("reason") or "")), []).append(c.get("index"))
    # scores that gave the same test (the same held-out figures at a position: on a one-dimensional output every
    # score monotone in it orders the trials alike) are one row, naming every score that ties
    tied: dict[tuple[Any, Any, Any], list[Mapping[str, Any]]] = {}
    for c in candidates:
        if c.get("applicable") and c.get("epsilon") is not None:
            tied.setdefault((c.get("index"), c.get("epsilon"), c.get("mu")), []).append(c)
    rows = [["-" if index is None else str(index), " = ".join(str(c.get("name")) for c in group), "yes",
             _plain_num(epsilon, ".4g"), _plain_num(mu, ".4g"),
             ("certified (" + str(next(c.get("name") for c in group if c.get("chosen")))
              + ")" if len(group) > 1 else "certified") if any(c.get("chosen") for c in group) else "",
             "; ".join(dict.fromkeys(str(c.get("reason")) for c in group if c.get("reason")))]
            for (index, epsilon, mu), group in tied.items()]
    rows += [[_positions_text(where, positions), name, "yes", "not judged", "", "", reason]
             for (name, reason), where in not_judged.items()]
    rows += [[_positions_text(where, positions), name, "no", "n/a", "n/a", "", reason]
             for (name, reason), where in skipped.items()]
    return rows


def _positions_text(where: list[Any], positions: list[Any]) -> str:
    if len(positions) > 1 and len(set(where)) == len(positions):
        return "every position"
    return ", ".join("-" if index is None else str(index) for index in dict.fromkeys(where))

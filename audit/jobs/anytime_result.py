"""Build the :class:`AuditResult` of an anytime-valid audit (docs/theory.md 13).

The certified figure of each position is its confidence sequence's bound when the design stopped; the
headline is the largest over positions (each position's sequence holds at ``1 - beta / K``, so all hold
together at the audit's confidence). The ``anytime`` section records why and when it stopped, every
position's trajectory and the wealth of the e-process testing the claim, and the sentences every report
prints. The histogram and ROC are of the last score on every trial, labelled as figures, not certified.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.auditing.jobs.fingerprint import code_version
from dpaudit.auditing.jobs.one_run_result import distributions_of
from dpaudit.auditing.jobs.result import AuditResult, Empirical, EstimateEntry, IndexResult
from dpaudit.auditing.statistics.verdict import compare

__all__ = ["ANYTIME_MEANING", "METHOD", "anytime_result"]

METHOD = "anytime-betting"
#: What anytime-valid means, in the one sentence every report prints
ANYTIME_MEANING = ("Anytime-valid: the bound holds at the stated confidence simultaneously at every number of "
                   "trials, so stopping at the first certified violation, or watching longer, keeps it.")
_REASONS = {
    "violation": "the certified bound exceeded the claim",
    "budget": "the budget of trials was spent",
    "futility": "even favourable rates could not have certified the claim in the trials left",
}


def _row(job: Any, index: int, position: Any, claims: list, trials: int) -> IndexResult:
    process, settings = position.process, job.job.settings
    bound = process.lower_bound
    record = process.record(position.target)
    entry = EstimateEntry(name="anytime", quantity="epsilon >=", value=bound, method=METHOD,
                          confidence=1 - process.alpha, record=record)
    several = len(job.job.pairs) > 1  # each position's sequence holds at 1 - beta / K; all of them at 1 - beta
    empirical = Empirical(
        epsilon_lower_bound=bound, mu_lower_bound=0.0, confidence=settings.confidence, delta=settings.delta,
        trials=trials, method=METHOD, model_based_epsilon=None,
        epsilon={"epsilon_lower_bound": bound, "method": METHOD, "confidence": 1 - process.alpha, **record},
        gdp={}, profile={}, index=position.pair.index, estimates=(entry,),
        per_index_confidence=1 - process.alpha if several else None)
    judged = compare(bound, claims, str(position.pair.relation))
    scores = {side: np.concatenate(position.scores[side]) if position.scores[side] else np.zeros(1)
              for side in ("a", "b")}
    labels = np.concatenate([np.ones(scores["a"].size), np.zeros(scores["b"].size)])
    pooled = np.concatenate([scores["a"], scores["b"]])
    # the ROC reads larger scores as S's; oriented so, it never lies below chance only because of the score's sign
    sign = 1.0 if np.median(scores["a"]) >= np.median(scores["b"]) else -1.0
    figures = {"histogram": distributions_of(pooled, labels)["histogram"],
               "roc": distributions_of(sign * pooled, labels)["roc"]}
    return IndexResult(index=position.pair.index, empirical=empirical, claims=judged.with_slack(claims),
                       verdict=judged.verdict, verdict_reason=judged.reason, violations=judged.violations,
                       tightness=judged.tightness, distributions=figures, ceiling=None,
                       theory_slack=judged.theory_slack())


def anytime_result(job: Any, positions: dict[int, Any], claims: dict[int, list], *, sizes: list[int], drawn: int,
                   timings: dict[str, Any], store: str | None) -> AuditResult:
    """The result of ``job`` (an ``AnytimeJob``) from its positions' processes when it stopped."""
    base, settings = job.job, job.job.settings
    rows = [_row(job, i, positions[i], claims[i], drawn) for i in positions]
    head = max(rows, key=lambda r: r.empirical.epsilon_lower_bound)
    reasons = [p.stopped for p in positions.values()]
    reason = "violation" if "violation" in reasons else ("futility" if reasons and all(r == "futility"
                                                                                     for r in reasons) else "budget")
    flagged = [p.process.exceeded_at(p.target) for p in positions.values()
               if p.stopped == "violation" and p.target is not None]
    stopping = min(flagged) if flagged else drawn
    targets = {str(i): p.target for i, p in positions.items()}
    statement = (f"Certified with confidence {settings.confidence:g}, anytime-valid: epsilon is at least "
                 f"{head.empirical.epsilon_lower_bound:.3f} at delta = {settings.delta:g} after {drawn} trials per "
                 f"dataset (budget {settings.trials}); stopped because {_REASONS[reason]}"
                 + (f", first certified at trial {stopping}" if reason == "violation" else "") + ".")
    anytime = {
        "design": "anytime", "first_chunk": job.first, "budget": settings.trials, "largest_chunk": settings.chunk_size,
        "chunks": sizes[:_chunks_drawn(sizes, drawn)], "trials_drawn": drawn, "stopped": reason,
        "stopped_because": _REASONS[reason], "stopping_trial": stopping, "targets": targets,
        "scores": {str(i): p.chosen for i, p in positions.items()},
        "score_fits": {str(i): p.fits for i, p in positions.items()},
        "positions": {str(i): p.process.record(p.target) for i, p in positions.items()},
        "statement": statement, "meaning": ANYTIME_MEANING,
    }
    mech = base.mechanism
    chosen = sorted({p.chosen for p in positions.values() if p.chosen})
    return AuditResult(
        audit_id=job.audit_id, title=base.title,
        mechanism={"name": mech.name, "params": mech.params, "inapplicable": sorted(mech.inapplicable()),
                   "release_grid": mech.release_grid},
        canary={**base.description.get("canary", {}), "kind": base.pairs[0].kind,
                "relation": str(base.pairs[0].relation),
                "indices": [pair.index for pair in base.pairs]},
        attack={**base.attack_table(), "score": chosen[0] if len(chosen) == 1 else chosen},
        audit={**settings.to_dict(), "design": "anytime", "first_chunk": job.first, "trials": drawn,
               "budget": settings.trials},
        seed=settings.seed, code_version=code_version(), code_fingerprint=base.code_fingerprint,
        config_source=base.source, empirical=head.empirical, claims=head.claims, per_index=tuple(rows),
        verdict=_verdict(rows), verdict_reason=_reason(rows), violations=tuple(v for r in rows for v in r.violations),
        tightness=head.tightness, timings=timings, store=store, theory_slack=head.theory_slack, anytime=anytime)


def _chunks_drawn(sizes: list[int], drawn: int) -> int:
    total = count = 0
    for size in sizes:
        if total >= drawn:
            break
        total += size
        count += 1
    return count


def _verdict(rows: list[IndexResult]) -> str:
    verdicts = [r.verdict for r in rows]
    if "violation" in verdicts:
        return "violation"
    return "consistent" if "consistent" in verdicts else "inconclusive"


def _reason(rows: list[IndexResult]) -> str:
    violated = [r for r in rows if r.verdict == "violation"]
    if violated:
        return "violated claims: " + ", ".join(dict.fromkeys(v for r in violated for v in r.violations))
    return max(rows, key=lambda r: r.empirical.epsilon_lower_bound).verdict_reason

"""Build the :class:`~dpaudit.audit.result.AuditResult` of one audit from its scores: the one place it is made.

With ``K`` canary positions each position is certified at confidence
``1 - beta / K`` (a union bound), so that every per-index statement, and the
top-level verdict "some index violates a claim", hold simultaneously at the
audit's confidence ``1 - beta``.
"""

from __future__ import annotations

from typing import Any


from dpaudit.attacks.canaries import CanaryPair
from dpaudit.audit.ceiling import exact_ceiling
from dpaudit.audit.fingerprint import code_version
from dpaudit.audit.job import AuditJob
from dpaudit.audit.result import AuditResult, ClaimEntry, Empirical, IndexResult
from dpaudit.audit.streaming import PROFILE_EPSILONS, ScoreSource, certify_source
from dpaudit.audit.verdict import combine, judge
from dpaudit.mechanisms.accounting.claims import evaluate_claims
from dpaudit.mechanisms.errors import NotExact

__all__ = ["assemble", "theory_slack"]

def _empirical(results: dict[str, Any], trials: int) -> Empirical:
    eps, gdp, profile = results["epsilon"], results["gdp"], results["profile"]
    return Empirical(
        epsilon_lower_bound=eps.epsilon_lower_bound, mu_lower_bound=gdp.mu_lower_bound,
        confidence=eps.confidence, delta=eps.delta, trials=trials, method=eps.method,
        model_based_epsilon=gdp.model_based_epsilon, epsilon=eps.to_dict(), gdp=gdp.to_dict(),
        profile=profile.to_dict())


def _exact(pair: CanaryPair, delta: float, certified: int, confidence: float) -> tuple[dict, float] | None:
    """The exact value of a one-dimensional instance and its statistical ceiling (docs/theory.md 3.4, 5)."""
    from dpaudit.mechanisms.accounting.instances import (
        exact_delta_curve,
        exact_epsilon,
        exact_laws,
        likelihood_ratio_law,
    )

    try:  # the accountant remembers each instance's laws and values (audits of one pair come in runs)
        laws = exact_laws(pair.mechanism, pair.dataset_a, pair.dataset_b)
    except NotExact:
        return None
    value = exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, delta, laws=laws)
    ceiling = exact_ceiling(*likelihood_ratio_law(laws), trials=certified, delta=delta, confidence=confidence)
    claim = {"name": "exact-instance", "citation": "numerical E_gamma of this instance (docs/theory.md 5, exact1d)",
             "relation": str(pair.relation), "kind": "exact-instance", "applicable": True, "reason": "",
             "index": pair.index, "epsilon": value if value != float("inf") else None, "delta": delta,
             "notes": ["the exact value of this instance (a lower bound on the worst case), not a guarantee"],
             "profile": {"epsilons": list(PROFILE_EPSILONS),
                         "deltas": exact_delta_curve(pair.mechanism, pair.dataset_a, pair.dataset_b, PROFILE_EPSILONS,
                                                     laws=laws).tolist()}}
    return claim, ceiling


def _law_ceiling(pair: CanaryPair, delta: float, certified: int, confidence: float) -> float | None:
    """The ceiling from a mechanism's own law of its exact score (``score_law``: e.g. every DP-SGD iterate)."""
    hook = getattr(pair.mechanism, "score_law", None)
    if hook is None:
        return None
    try:
        law = hook(pair.dataset_a, pair.dataset_b)
    except NotExact:
        return None
    return exact_ceiling(*law, trials=certified, delta=delta, confidence=confidence)


def theory_slack(claims: list[dict[str, Any]], relation: str) -> dict[str, Any]:
    """How far each claim is from the tightest valid claim, and the tightest from the exact value.

    Adds ``slack`` (claim / tightest claim) to every applicable upper-bound
    claim for ``relation``; returns the tightest claim's name and epsilon and
    ``tightest_over_exact`` (tightest claim / exact value of the instance)
    where an exact value exists. Both ratios are theory slack: what the
    analyses leave on the table, apart from anything an audit can show.
    """
    bounds = [c for c in claims if c["applicable"] and c.get("kind", "upper-bound") == "upper-bound"
              and c["relation"] == relation and c["epsilon"] is not None]
    if not bounds:
        return {"tightest": None, "tightest_epsilon": None, "exact_epsilon": None, "tightest_over_exact": None}
    tightest = min(bounds, key=lambda c: c["epsilon"])
    for claim in bounds:
        claim["slack"] = claim["epsilon"] / tightest["epsilon"] if tightest["epsilon"] > 0 else None
    exact = next((c["epsilon"] for c in claims if c.get("kind") == "exact-instance" and c["epsilon"]), None)
    return {"tightest": tightest["name"], "tightest_epsilon": tightest["epsilon"], "exact_epsilon": exact,
            "tightest_over_exact": tightest["epsilon"] / exact if exact else None}


def _claim_entries(mechanism, index: int | None, delta: float) -> list[dict[str, Any]]:
    """Every claim evaluated at ``delta``, with its profile on ``PROFILE_EPSILONS``."""
    claim_objects = mechanism.claims(index=index)
    entries = evaluate_claims(claim_objects, delta=delta)
    for claim, entry in zip(claim_objects, entries):
        if entry["applicable"]:
            entry["profile"] = {"epsilons": list(PROFILE_EPSILONS),
                                "deltas": [claim.delta(e) for e in PROFILE_EPSILONS]}
    return entries


def _index_result(job: AuditJob, pair: CanaryPair, source: ScoreSource, confidence: float) -> IndexResult:
    settings = job.settings
    results = certify_source(source, delta=settings.delta, confidence=confidence, threshold=settings.threshold)
    claims = _claim_entries(job.mechanism, pair.index, settings.delta)
    exact = _exact(pair, settings.delta, results["trials"]["a"], confidence)
    if exact is not None:
        claims.append(exact[0])
    slack = theory_slack(claims, pair.relation)
    empirical = _empirical(results, settings.trials)
    judged = judge(empirical.epsilon_lower_bound, claims, pair.relation)
    return IndexResult(
        index=pair.index, empirical=empirical, claims=tuple(ClaimEntry.from_dict(c) for c in claims),
        verdict=judged["verdict"], verdict_reason=judged["reason"], violations=tuple(judged["violations"]),
        tightness=judged["tightness"], distributions=results["distributions"],
        ceiling=exact[1] if exact else _law_ceiling(pair, settings.delta, results["trials"]["a"], confidence),
        theory_slack=slack)


def assemble(job: AuditJob, scores: dict[int, ScoreSource], *, timings: dict[str, Any],
             store: str | None = None) -> AuditResult:
    """Certify every canary position, evaluate claims and verdicts, and build the result.

    Parameters
    ----------
    job : AuditJob
    scores : dict
        Per canary position (``index or 0``): its scores (``audit.streaming.ScoreSource``); the
        certification scores are read one chunk at a time.
    timings : dict
        At least ``seconds``.
    store : str, optional
        Where the chunks are stored.
    """
    settings = job.settings
    beta = 1 - settings.confidence
    per_index_confidence = 1 - beta / len(job.pairs)
    pairs = sorted(job.pairs, key=lambda p: p.index or 0)
    per_index = tuple(_index_result(job, pair, scores[pair.index or 0], per_index_confidence) for pair in pairs)
    top = max(per_index, key=lambda row: row.empirical.epsilon_lower_bound)
    verdict = combine([row.verdict for row in per_index])
    violations = sorted({f"{name}@{row.index}" if row.index is not None else name
                         for row in per_index for name in row.violations})
    first = pairs[0]
    canary = {**job.description.get("canary", {}), "kind": first.kind, "relation": str(first.relation),
              "indices": [row.index for row in per_index]}
    empirical = Empirical(**{**{f: getattr(top.empirical, f) for f in Empirical.__dataclass_fields__},
                             "index": top.index, "confidence": settings.confidence,
                             "per_index_confidence": per_index_confidence})
    return AuditResult(
        audit_id=job.audit_id, title=job.title,
        mechanism={"name": job.mechanism.name, "params": job.mechanism.params,
                   "inapplicable": sorted(job.mechanism.inapplicable()),
                   "release_grid": job.mechanism.release_grid}, canary=canary,
        attack=dict(job.description.get("attack", {"score": job.score})), audit=settings.to_dict(),
        seed=settings.seed, code_version=code_version(), code_fingerprint=job.code_fingerprint,
        config_source=job.source, empirical=empirical, claims=top.claims, per_index=per_index, verdict=verdict,
        verdict_reason=(top.verdict_reason if verdict != "violation" else "violated claims: " + ", ".join(violations)),
        violations=tuple(violations), tightness=top.tightness, timings=timings, store=store,
        theory_slack=top.theory_slack)

"""Build the :class:`~dpaudit.auditing.jobs.result.AuditResult` of one audit from its scores: the one place it is made.

With ``K`` canary positions each position is certified at confidence
``1 - beta / K`` (a union bound), so that every per-index statement, and the
top-level verdict "some index violates a claim", hold simultaneously at the
audit's confidence ``1 - beta``.
"""

from __future__ import annotations

from typing import Any

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.auditing.jobs.conformance import conformance
from dpaudit.auditing.jobs.fingerprint import code_version
from dpaudit.auditing.jobs.job import AuditJob
from dpaudit.auditing.jobs.result import AuditResult, ClaimEntry, Empirical, IndexResult
from dpaudit.auditing.jobs.streaming import ScoreSource, certify_source
from dpaudit.auditing.statistics.ceiling import CeilingBand, exact_ceiling_band
from dpaudit.auditing.statistics.certify import PROFILE_EPSILONS
from dpaudit.auditing.statistics.verdict import combine, compare
from dpaudit.core.errors import NotExact
from dpaudit.mechanisms.accounting.builders import evaluated_claims, pair_claims_for
from dpaudit.mechanisms.accounting.claims import evaluate_claims, shows_profile
from dpaudit.mechanisms.accounting.instances import exact_delta_curve, exact_epsilon, exact_laws, likelihood_ratio_law
from dpaudit.mechanisms.accounting.score_law import ScoreLaw

__all__ = ["CLAIMED", "assemble", "claim_entries", "claimed_entry"]

#: The name of the claim a caller gives with the audit (``claimed_epsilon``: ``assert_private``'s ``epsilon``)
CLAIMED = "claimed_epsilon"
#: Why an instance's exact value is not given at ``delta = 0``.
EXACT_AT_ZERO = ("not computed at delta = 0: the numerical accountant's delta(eps) carries an error bound "
                 "(docs/theory.md 5.2), so where it reaches 0 exactly is not known")


def _exact(pair: CanaryPair, delta: float, certified: int,
           confidence: float) -> tuple[ClaimEntry, CeilingBand] | None:
    """The exact value of a one-dimensional instance and its statistical ceiling (docs/theory.md 3.4, 5)."""
    try:  # the accountant remembers each instance's laws and values (audits of one pair come in runs)
        laws = exact_laws(pair.mechanism, pair.dataset_a, pair.dataset_b)
    except NotExact:
        return None
    ceiling = exact_ceiling_band(*likelihood_ratio_law(laws), trials=certified, delta=delta, confidence=confidence)
    # at delta = 0 the answer is where the numerical delta(eps) reaches 0 exactly, which its error (docs/theory.md
    # 5.2) decides: no value is given there
    value = exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, delta, laws=laws) if delta > 0 else None
    claim = ClaimEntry(
        name="exact-instance", citation="numerical E_gamma of this instance (docs/theory.md 5, exact1d)",
        relation=str(pair.relation), kind="exact-instance", applicable=value is not None,
        reason="" if value is not None else EXACT_AT_ZERO, index=pair.index,
        epsilon=value if value is not None and value != float("inf") else None, delta=delta,
        notes=("the exact value of this instance (a lower bound on the worst case), not a guarantee",),
        profile={"epsilons": list(PROFILE_EPSILONS),
                 "deltas": exact_delta_curve(pair.mechanism, pair.dataset_a, pair.dataset_b, PROFILE_EPSILONS,
                                             laws=laws).tolist()})
    return claim, ceiling


def _law_ceiling(pair: CanaryPair, delta: float, certified: int,
                 confidence: float) -> tuple[CeilingBand | None, str]:
    """The ceiling and its band from the mechanism's own law of its exact score (``score_law``: e.g. every
    DP-SGD iterate), and how that law was obtained ("" when exact)."""
    try:
        law = pair.mechanism.score_law(pair.dataset_a, pair.dataset_b)
    except NotExact:
        return None, ""
    source = law.source if isinstance(law, ScoreLaw) and law.source != "exact" else ""
    return exact_ceiling_band(*law, trials=certified, delta=delta, confidence=confidence), source


def claim_entries(mechanism, index: int | None, delta: float, pair: CanaryPair | None = None) -> list[ClaimEntry]:
    """Every claim evaluated at ``delta``, with its profile on ``PROFILE_EPSILONS`` (a ``pair`` whose canary the
    mechanism's claims do not describe, such as a scheduled canary, brings its own: ``pair_claims_for``)."""
    description = mechanism.privacy_description
    usual = mechanism.claims(index=index)  # checks the index
    own = None if pair is None else pair_claims_for(description, pair.dataset_a, pair.dataset_b,
                                                    str(pair.relation), usual)
    if own is None:  # the usual claims, evaluated once per description, position and delta
        return list(evaluated_claims(description, index, delta=delta, profile_epsilons=PROFILE_EPSILONS))
    entries = evaluate_claims(own, delta=delta)
    return [entry.replace(profile=claim.profile(PROFILE_EPSILONS)) if shows_profile(claim, entry) else entry
            for claim, entry in zip(own, entries)]


def claimed_entry(epsilon: float, pair: CanaryPair, delta: float) -> ClaimEntry:
    """The caller's claim (``claimed_epsilon``) as an upper-bound claim for the relation of ``pair``: the pair the
    caller gave (or the canary built for them) is the relation the claim is judged under."""
    return ClaimEntry(name=CLAIMED, citation="the claim given with the audit (claimed_epsilon)",
                      relation=str(pair.relation), kind="upper-bound", applicable=True, reason="", index=pair.index,
                      epsilon=float(epsilon), delta=delta,
                      notes=("stated by the caller, for the relation of the audited pair",))


def _index_result(job: AuditJob, pair: CanaryPair, source: ScoreSource, confidence: float,
                  trials: int) -> IndexResult:
    settings = job.settings
    certification = certify_source(source, delta=settings.delta, confidence=confidence,
                                   threshold=settings.threshold, estimators=job.estimators, seed=settings.seed)
    claims = claim_entries(job.mechanism, pair.index, settings.delta, pair)
    if job.claimed_epsilon is not None:
        claims.append(claimed_entry(job.claimed_epsilon, pair, settings.delta))
    exact = _exact(pair, settings.delta, certification.trials["a"], confidence)
    if exact is not None:
        claims.append(exact[0])
    empirical = Empirical.from_certification(certification, trials)
    judged = compare(empirical.epsilon_lower_bound, claims, pair.relation)
    ceiling, source = (exact[1], "") if exact else _law_ceiling(pair, settings.delta, certification.trials["a"],
                                                                 confidence)
    return IndexResult(
        index=pair.index, empirical=empirical, claims=judged.with_slack(claims),
        verdict=judged.verdict, verdict_reason=judged.reason, violations=judged.violations,
        tightness=judged.tightness, distributions=certification.distributions,
        ceiling=ceiling.ceiling if ceiling else None, ceiling_band=ceiling.band if ceiling else None,
        ceiling_source=source, theory_slack=judged.theory_slack())


def _attack(job: AuditJob, chosen: dict[int, str] | None, candidates: dict[int, tuple] | None,
            calibration: int | None = None) -> dict[str, Any]:
    """The ``attack`` table: the score that certified (``score``), for a portfolio every candidate, and the
    calibration trials per dataset where known."""
    table = job.attack_table()
    if calibration is not None:
        table["calibration_trials"] = calibration
    if len(job.scores) > 1:
        names = sorted(set((chosen or {}).values()))
        table["requested"] = job.description.get("attack", {}).get("score")
        table["candidates"] = list(job.score_names)
        table["score"] = names[0] if len(names) == 1 else names
        table["portfolio"] = [{"index": index or None, **candidate.to_dict()}
                              for index, rows in sorted((candidates or {}).items()) for candidate in rows]
    return table


def _verdict_reason(per_index: tuple[IndexResult, ...], top: IndexResult, verdict: str,
                    violations: list[str]) -> str:
    """The combined verdict's reason: the strongest position's, said to be of that position when there are
    several (each position is judged against its own claims: a claim at one is not the claim at another)."""
    if verdict == "violation":
        return "violated claims: " + ", ".join(violations)
    if len(per_index) < 2:
        return top.verdict_reason
    return (f"at canary index {top.index}, the strongest position, {top.verdict_reason}; every position is judged "
            "against the claims made for it, and none exceeds them")


def assemble(job: AuditJob, scores: dict[int, ScoreSource], *, timings: dict[str, Any],
             store: str | None = None, chosen: dict[int, str] | None = None,
             candidates: dict[int, tuple] | None = None, confidence: float | None = None,
             trials: int | None = None, sequential: dict[str, Any] | None = None,
             calibration: int | None = None) -> AuditResult:
    """Certify every canary position, evaluate claims and verdicts, and build the result.

    Parameters
    ----------
    job : AuditJob
    scores : dict
        Per canary position (``index or 0``): its scores (``audit.jobs.streaming.ScoreSource``); the
        certification scores are read one chunk at a time.
    timings : dict
        At least ``seconds``.
    store : str, optional
        Where the chunks are stored.
    chosen, candidates : dict, optional
        Per canary position: the score that certified and, for a portfolio, every candidate's
        calibration strength (``audit.statistics.portfolio``).
    confidence : float, optional
        The confidence this certification is made at (default the audit's; a look of a sequential
        audit spends ``1 - confidence`` of it, ``audit.statistics.sequential``).
    trials : int, optional
        Trials per dataset used (default the audit's; fewer when a sequential audit stopped early).
    sequential : dict, optional
        The looks' record (``Looks.record``), kept in the result.
    calibration : int, optional
        Calibration trials per dataset, recorded in the ``attack`` table as ``calibration_trials``
        (more than ``calibration_fraction`` asks for where a fitted score asked for a larger share).
    """
    settings = job.settings
    beta = 1 - (settings.confidence if confidence is None else confidence)
    per_index_confidence = 1 - beta / len(job.pairs)
    pairs = sorted(job.pairs, key=lambda p: p.index or 0)
    used = settings.trials if trials is None else trials
    per_index = tuple(_index_result(job, pair, scores[pair.index or 0], per_index_confidence, used)
                      for pair in pairs)
    top = max(per_index, key=lambda row: row.empirical.epsilon_lower_bound)
    verdict = combine([row.verdict for row in per_index])
    violations = sorted({f"{name}@{row.index}" if row.index is not None else name
                         for row in per_index for name in row.violations})
    first = pairs[0]
    canary = {**job.description.get("canary", {}), "kind": first.kind, "relation": str(first.relation),
              "indices": [row.index for row in per_index]}
    empirical = top.empirical.replace(index=top.index, confidence=settings.confidence,
                                      per_index_confidence=per_index_confidence)
    return AuditResult(
        audit_id=job.audit_id, title=job.title,
        mechanism={"name": job.mechanism.name, "params": job.mechanism.params,
                   "inapplicable": sorted(job.mechanism.inapplicable()),
                   "release_grid": job.mechanism.release_grid, "seeded": bool(job.mechanism.seeded)},
        canary=canary,
        attack=_attack(job, chosen, candidates, calibration), audit=settings.to_dict(),
        seed=settings.seed, code_version=code_version(), code_fingerprint=job.code_fingerprint,
        config_source=job.source, empirical=empirical, claims=top.claims, per_index=per_index, verdict=verdict,
        verdict_reason=_verdict_reason(per_index, top, verdict, violations),
        violations=tuple(violations), tightness=top.tightness, timings=timings, store=store,
        theory_slack=top.theory_slack, sequential=sequential or {},
        conformance=conformance(job.mechanism, str(first.relation), top.claims, top.empirical.epsilon_lower_bound,
                                verdict))

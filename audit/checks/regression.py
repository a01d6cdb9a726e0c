"""Privacy regression tests: ``assert_private`` raises when an audit certifies a violation.

A correct implementation fails such a test with probability at most
``1 - confidence`` (the certified bound is a valid lower bound), so a suite
of ``K`` audits has a controlled false-alarm rate: at most ``K (1 - confidence)``,
or ``1 - confidence`` overall when the pytest plugin splits it (``--dp-audit-split``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dpaudit.attacks.canaries import PAIR_FOR_RELATION, CanarySpec
from dpaudit.auditing.checks.designs import (
    Anytime,
    AuditOptions,
    AuditTarget,
    ManyRuns,
    OneRun,
    design_from_keywords,
)
from dpaudit.auditing.jobs.float_rounding import OUTCOME_CLAUSES
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_real
from dpaudit.mechanisms.base import Mechanism

__all__ = ["DEFAULT_TRIALS", "PrivacyViolation", "assert_private"]

#: Trials per dataset of ``assert_private``'s many-runs design when none are given
DEFAULT_TRIALS = 100_000


class PrivacyViolation(AssertionError):
    """An audit certified that a mechanism is less private than claimed; ``result`` is its ``AuditResult``."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


def assert_private(mechanism: Mechanism, *, epsilon: float, delta: float, dataset_pair=None,
                   canary: CanarySpec | None = None, trials: int | None = None, confidence: float = 0.95,
                   seed: int = 0, score: Any = None, chunk_size: int | None = None, design: Any = "many-runs",
                   canaries: int | None = None, runs: int | None = None) -> dict[str, Any]:
    """Audit ``mechanism`` against the claim ``(epsilon, delta)``; raise if a violation is certified.

    The audit looks at the data after 1, 2, 4, ... certification chunks (planned from ``trials`` before
    any data are seen), spends ``1 - confidence`` over those looks and stops at the first certified
    violation (``audit.statistics.sequential``); a correct mechanism runs its whole budget.

    Parameters
    ----------
    mechanism : Mechanism
        A registered mechanism, or one wrapped with ``mechanisms.from_callable``.
    epsilon, delta : float
        The claimed guarantee.
    dataset_pair : (array_like, array_like), optional
        Neighbouring datasets ``(S, S')``; default: the mechanism's tightest canary
        (the first of its ``canary_kinds``) at its last position.
    trials : int, optional
        Trials per dataset (default :data:`DEFAULT_TRIALS`; 10% calibrate the threshold and any fitted score).
    confidence : float
        A correct mechanism fails with probability at most ``1 - confidence``.
    chunk_size : int, optional
        Trials per chunk, the unit between looks (default ``trials // 64``, between 1,000 and 10,000,
        so that about six looks are planned: the first after about 1.5% of the budget). By default the
        calibration part is drawn in chunks of ``dpaudit.audit``'s default size, so that both choose the
        same score and place the same test from the same seed and trials (when that size fits the memory
        budget); a ``chunk_size`` given is used for both parts.
    score : str, Score or list of them, optional
        A score's name, a score object, or a list of either (a portfolio, one chosen on calibration
        trials). Default ``"auto"``: every registered score that applies, one chosen on calibration trials.
    design : {"many-runs", "one-run"} or Anytime
        ``"many-runs"``: a sequential ``ManyRuns`` of ``trials`` and ``chunk_size``. ``"one-run"``: ``OneRun``,
        one training run with ``canaries`` canaries (``runs`` pooled) instead of ``trials`` trainings per
        dataset (``audit.jobs.one_run_design``); ``trials`` and ``chunk_size`` do not apply. A
        ``dpaudit.Anytime(budget=...)``: watch with a bound valid at every trial and stop at the first trial it
        exceeds ``epsilon`` (docs/theory.md 13); its budget is its own, so ``trials`` and ``chunk_size`` are
        not given beside it.

    Returns
    -------
    dict
        The certified bounds and the claim, when no violation is certified (``result``: the ``AuditResult``).

    Raises
    ------
    PrivacyViolation
        With the certified bound, the claim, the confidence and how to reproduce (its ``result``: the
        ``AuditResult``).
    """
    __tracebackhide__ = True  # pytest shows the message, not this helper's frames
    epsilon = check_real("epsilon", epsilon, nonnegative=True)
    audit_design = _design(design, trials=trials, chunk_size=chunk_size, canaries=canaries, runs=runs, canary=canary)
    trials = DEFAULT_TRIALS if trials is None else trials
    result = audit_design.run(AuditTarget(mechanism, dataset_pair=dataset_pair, canary=canary, score=score),
                              AuditOptions(delta=delta, confidence=confidence, seed=seed, claimed_epsilon=epsilon))
    bound = result.epsilon_lower_bound
    chosen = result.attack["score"]
    looks = result.sequential
    summary = {
        "mechanism": mechanism.label, "claimed_epsilon": epsilon, "delta": delta,
        "epsilon_lower_bound": bound, "mu_lower_bound": result.empirical.mu_lower_bound,
        "confidence": confidence, "trials": trials, "seed": seed, "score": chosen, "violation": bound > epsilon,
        "trials_used": looks.get("trials_used", trials), "looks": looks, "result": result,
    }
    if not mechanism.seeded:
        summary["seeded"] = False
    if result.anytime:
        return _anytime_summary(summary, result, mechanism, epsilon, delta, seed, confidence, audit_design)
    if result.one_run:
        summary.update(trials=result.empirical.trials, trials_used=result.empirical.trials, design="one-run",
                       canaries=result.one_run["pooled_canaries"])
        if bound > epsilon:
            raise PrivacyViolation(
                f"{summary['mechanism']} is not ({epsilon:g}, {delta:g})-DP: {result.one_run['statement']} "
                + _rerun(mechanism, f"design='one-run', canaries={result.one_run['canaries']}, "
                                    f"runs={result.one_run['runs']}", seed, confidence), result)
        return summary
    if bound > epsilon:
        raise PrivacyViolation(
            f"{summary['mechanism']} is not ({epsilon:g}, {delta:g})-DP: certified epsilon >= {bound:.4f} "
            f"at delta={delta:g} with confidence {confidence:g} ({summary['trials_used']} of {trials} trials per "
            f"dataset{_looks_clause(looks)}, score {chosen!r}, "
            f"{result.canary['kind']} canary, {result.canary['relation']}). "
            + _relation_hint(result, epsilon, bound) + _float_rounding_text(result)
            + _rerun(mechanism, f"trials={trials}", seed, confidence, f", chunk_size={audit_design.chunk_size}"),
            result)
    return summary


def _relation_hint(result: Any, epsilon: float, bound: float) -> str:
    """When ``epsilon`` is the mechanism's own claim under another relation than the one audited, and its claim
    under the audited relation is not exceeded: a sentence naming both, and the pair that audits the other
    ("" otherwise). The violation stands: ``epsilon`` was asserted for the audited relation."""
    audited = str(result.canary.get("relation"))
    own = [c for c in result.claims if c.is_bound and c.name != "claimed_epsilon"]
    here = [c for c in own if str(c.relation) == audited]
    elsewhere = [c for c in own if str(c.relation) != audited and c.epsilon <= epsilon]
    if not elsewhere or not here or any(bound > c.epsilon for c in here):
        return ""
    other = elsewhere[0]
    tightest = min(here, key=lambda c: c.epsilon)
    pair = PAIR_FOR_RELATION.get(str(other.relation))
    how = f" pass canary={{'pair': {pair!r}}} to audit that relation" if pair else ""
    return (f"The mechanism claims epsilon {other.epsilon:.4g} under {other.relation} ({other.name}), not under "
            f"{audited}, the relation audited, where its claim is {tightest.epsilon:.4g} ({tightest.name}) and is "
            f"not exceeded: if epsilon={epsilon:g} is meant for {other.relation},{how}. ")


def _float_rounding_text(result: Any) -> str:
    """Whether a float-bits violation survives rounding, one sentence per position ("" without one)."""
    positions = (getattr(result, "float_rounding", None) or {}).get("positions") or ()
    several = len(result.per_index) > 1
    return "".join(f"{'At canary index ' + str(entry.get('index')) + ': r' if several else 'R'}ounded to a grid "
                   f"(a post-processing), {OUTCOME_CLAUSES.get(entry.get('outcome'), 'the violation was not attributed')}"
                   ". " for entry in positions)


def _looks_clause(looks: dict[str, Any]) -> str:
    """``", stopped early at look 2 of 7"`` for a sequential audit ("" for one that looks once)."""
    planned, stopped = looks.get("looks_planned", 1), looks.get("stopped_at_look", 1)
    if planned < 2:
        return ""
    return f", stopped early at look {stopped} of {planned}" if stopped < planned else f", all {planned} looks taken"


def _anytime_summary(summary: dict[str, Any], result: Any, mechanism: Mechanism, epsilon: float, delta: float,
                     seed: int, confidence: float, design: Anytime) -> dict[str, Any]:
    """The summary of an anytime-valid audit; a :class:`PrivacyViolation` when it certified one."""
    record = result.anytime
    summary.update(design="anytime", trials=record["trials_drawn"], budget=record["budget"],
                   trials_used=record["stopping_trial"], stopped=record["stopped"], looks={})
    if summary["violation"]:
        raise PrivacyViolation(
            f"{summary['mechanism']} is not ({epsilon:g}, {delta:g})-DP: {record['statement']} "
            f"({summary['score']!r} score, {result.canary['kind']} canary, {result.canary['relation']}). "
            + _rerun(mechanism, f"design=dpaudit.Anytime(budget={design.budget}, first={design.first})", seed,
                     confidence), result)
    return summary


def _design(design: Any, *, trials: int | None, chunk_size: int | None, canaries: int | None, runs: int | None,
            canary: Any) -> ManyRuns | OneRun | Anytime:
    """The design :func:`assert_private` runs: the one-run design that ``design``, ``canaries`` and ``runs``
    spell (``trials`` and ``chunk_size`` do not apply to it), else a sequential :class:`ManyRuns` whose
    chunks are ``chunk_size`` trials, by default ``trials // 64`` between 1,000 and 10,000, with its calibration
    drawn in chunks of ``dpaudit.audit``'s default size where that fits the memory budget."""
    if isinstance(design, Anytime):
        given = [name for name, value in (("trials", trials), ("chunk_size", chunk_size), ("canaries", canaries),
                                          ("runs", runs)) if value is not None]
        if given:
            raise ParameterError(f"a design object holds its own settings: give {given[0]} to Anytime(...) "
                                 f"(budget, first, chunk_size), not beside it")
        return design
    if not isinstance(design, str):
        raise ParameterError(f"assert_private takes design='many-runs', 'one-run' or dpaudit.Anytime(...), got "
                             f"design={design!r}; audit with another design object by dpaudit.audit(..., design=..., "
                             f"claimed_epsilon=...)")
    trials = DEFAULT_TRIALS if trials is None else trials
    if design == "one-run" or canaries is not None or runs is not None:
        return design_from_keywords(design, canaries=canaries, runs=runs, canary=canary)
    calibration_chunk = None
    if chunk_size is None:  # fine looks; the calibration drawn as dpaudit.audit draws it
        chunk_size = min(10_000, max(1_000, trials // 64))
        calibration_chunk = AUDIT_DEFAULTS["chunk_size"]
    looking = design_from_keywords(design, sequential=True, trials=trials, chunk_size=chunk_size)
    return dataclasses.replace(looking, calibration_chunk=calibration_chunk)


def _rerun(mechanism: Mechanism, options: str, seed: int, confidence: float, tail: str = "") -> str:
    """How to reproduce the audit: the call with its seed, or, for a mechanism whose randomness the seed does not fix
    (``seeded`` False), that a rerun draws other trials and is a fresh audit."""
    if mechanism.seeded:
        return f"Reproduce with assert_private(..., {options}, seed={seed}, confidence={confidence:g}{tail})."
    return (f"Not reproducible from a seed: {mechanism.label} draws randomness the seed does not fix (seeded=False), "
            f"so assert_private(..., {options}, confidence={confidence:g}{tail}) again is a fresh audit of other "
            f"trials, valid at the same confidence.")

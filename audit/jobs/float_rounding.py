"""After a violation certified through ``float-bits``: does it survive rounding? (docs/theory.md 3.5.1)

A float leak and a defect of the mechanism itself (a sensitivity bug) both
end in a ``float-bits`` violation. For every canary position whose violation
was certified through ``float-bits``, this step audits the same mechanism
twice more, on fresh trials:

1. its release *rounded to a grid* (``attacks.float_rounding.release_grids``:
   fine beside the noise, coarse beside the float spacing), a
   post-processing, so every claim still applies: the strongest other
   candidate of the audit's own contest (``float-bits`` has nothing to read on
   a grid; where it was named alone, the default portfolio's contest is held on
   the rounded outputs) is fitted on the audit's own calibration outputs,
   rounded, and certifies an epsilon bound compared with the same claims;
2. its *bits below the grid given the rounded value*
   (``attacks.float_rounding.fit_sub_grid``, tested by
   ``audit.statistics.stratified``): every bit feature of every read
   coordinate, with a Bonferroni factor for their number.

The outcome is ``"float artefact"`` (the rounded release certifies no
violation: the violation does not survive rounding), ``"mechanism defect"``
(it does, and the bits below the grid were not shown to depend on the
dataset) or ``"both"`` (it does, and they were).

Paying for the looks: the certification outputs of the audit are not kept
(only their scores are), so the two statements rest on fresh trials, as many
per dataset as the audit certified on (a sequential audit that stopped early:
as many as it had used), drawn under seeds of their own (part ``"round"`` of
``audit.jobs.runner.unit_seed``), independent of the trials behind the
headline. The audit's failure probability ``beta`` (per
position: ``beta / K``) is split in two halves by a union bound, one for the
rounded bound and one for the low-bit test, so that both statements hold
together at the audit's confidence; the headline holds at its own, and all
three together at ``1 - 2 beta``. What is chosen on calibration outputs (the
grid, the rounded audit's score, the low-bit scores) costs nothing
(docs/theory.md 3.6).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpaudit.attacks.float_rounding import coarse_coordinates, fit_sub_grid, release_grids, round_to_grids
from dpaudit.attacks.score_protocol import fitted_tail_model
from dpaudit.attacks.scores import AUTO, Score, resolve_scores
from dpaudit.auditing.jobs.chunk_checks import check_chunk
from dpaudit.auditing.jobs.job import AuditJob
from dpaudit.auditing.jobs.parts import chunk_sizes
from dpaudit.auditing.jobs.result import AuditResult, IndexResult
from dpaudit.auditing.jobs.store import Store
from dpaudit.auditing.jobs.streaming import ArraySource, certify_source
from dpaudit.auditing.statistics.portfolio import Candidate, choose_score
from dpaudit.auditing.statistics.stratified import StratifiedShift
from dpaudit.auditing.statistics.verdict import compare
from dpaudit.core.errors import DPAuditError

__all__ = ["FLOAT_BITS", "OUTCOMES", "OUTCOME_CLAUSES", "attribute_float_rounding"]

FLOAT_BITS = "float-bits"
#: The outcomes, in the words of the reports
OUTCOMES = ("float artefact", "mechanism defect", "both")
#: Each outcome as a clause of ``assert_private``'s violation message (the reports say more: reports/float_rounding.py)
OUTCOME_CLAUSES = {"float artefact": "the violation does not survive: a float artefact of the low bits",
                   "mechanism defect": "the violation survives: a defect of the mechanism itself",
                   "both": "the violation survives and the low bits leak too: a float leak and a defect of the "
                           "mechanism itself"}

#: ``seed_of(index, side, chunk) -> numpy.random.SeedSequence`` of the fresh trials (``audit.jobs.runner``)
SeedOf = Callable[[int, str, int], np.random.SeedSequence]


class _Rounded(ArraySource):
    """The rounded release's scores, with the chosen score's tail model (``audit.jobs.streaming``)."""

    def __init__(self, cal: tuple[np.ndarray, np.ndarray], cert: dict[str, np.ndarray], tail_model: str) -> None:
        super().__init__(*cal, cert["a"], cert["b"])
        self._tail_model = tail_model

    def tail_model(self) -> str:
        return self._tail_model


def _rounded_scores(job: AuditJob, candidates: Sequence[Candidate]) -> tuple[Score, ...]:
    """The scores the rounded audit chooses among: the strongest other candidate of the audit's own contest (its
    strength read on the calibration outputs before rounding, which a grid this fine barely moves), else every
    score of the job but ``float-bits``, else the default portfolio's (``float-bits`` was named alone)."""
    judged = [c for c in candidates if c.applicable and c.epsilon is not None and c.name != FLOAT_BITS]
    if judged:
        best = max(judged, key=lambda c: (max(c.epsilon, 0.0), -math.inf if c.mu is None else c.mu))
        return tuple(score for score in job.scores if score.name == best.name)
    kept = tuple(score for score in job.scores if score.name != FLOAT_BITS)
    return kept or tuple(score for score in resolve_scores(AUTO) if score.name != FLOAT_BITS)


def _position(plan: Any, store: Store, row: IndexResult, seed_of: SeedOf, confidence: float,
              trials: int) -> dict[str, Any]:
    """The rounded audit and the low-bit test of one canary position on ``trials`` fresh trials per dataset
    (``plan``: the runner's plan)."""
    job, key = plan.job, row.index or 0
    pair, settings = plan.pairs[key], job.settings
    cal_a = store.get_chunks(plan.draws_id, key, "a", "cal")
    cal_b = store.get_chunks(plan.draws_id, key, "b", "cal")
    cal_a, cal_b = cal_a.reshape(len(cal_a), -1), cal_b.reshape(len(cal_b), -1)
    grids = release_grids(cal_a, cal_b)
    rounded_cal = round_to_grids(cal_a, grids), round_to_grids(cal_b, grids)
    record: dict[str, Any] = {"index": row.index, "grids": grids.tolist(),
                              "coarse_coordinates": coarse_coordinates(cal_a, cal_b, grids),
                              "claim_violated": list(row.violations)}
    try:
        score, scorer, _ = choose_score(_rounded_scores(job, plan.candidates.get(key, ())), pair, *rounded_cal,
                                        seed=settings.seed,
                                        delta=settings.delta, confidence=confidence, planned=trials)
    except DPAuditError as exc:
        return {**record, "outcome": None, "reason": f"the rounded release could not be scored: {exc}"}
    low_bits = fit_sub_grid(cal_a, cal_b, grids)
    tests = {(table.column, table.feature): StratifiedShift() for table in low_bits.tables}
    fresh: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    for side, dataset in (("a", pair.dataset_a), ("b", pair.dataset_b)):
        for chunk, size in enumerate(chunk_sizes(trials, settings.chunk_size)):
            seed = seed_of(key, side, chunk)
            outputs = np.asarray(pair.mechanism.sample(dataset, trials=size, seed=seed), dtype=np.float64)
            outputs = outputs.reshape(size, -1)
            # a NaN release is refused as in any chunk, naming the seed that draws it again
            check_chunk(pair, (key, side, "round", chunk), size, settings.seed, outputs, None, tuple(seed.spawn_key))
            scores = np.asarray(scorer(round_to_grids(outputs, grids)), dtype=np.float64).ravel()
            if not np.all(np.isfinite(scores)):  # the rounded audit's own score: its failure is no user error
                return {**record, "outcome": None,
                        "reason": f"score {score.name!r} gave scores that are not finite on the rounded release"}
            fresh[side].append(scores)
            for table, values, cells in low_bits.scored(outputs):
                tests[(table.column, table.feature)].add(side, values, cells)
    try:
        certification = certify_source(
            _Rounded((np.asarray(scorer(rounded_cal[0]), dtype=float), np.asarray(scorer(rounded_cal[1]), dtype=float)),
                     {side: np.concatenate(parts) for side, parts in fresh.items()}, fitted_tail_model(scorer)),
            delta=settings.delta, confidence=confidence, threshold=settings.threshold, seed=settings.seed)
    except DPAuditError as exc:
        return {**record, "outcome": None, "reason": f"the rounded release could not be certified: {exc}"}
    bound = float(certification.epsilon.epsilon_lower_bound)
    judged = compare(bound, row.claims, pair.relation)
    outcomes = {name: test.finish() for name, test in tests.items()}
    (column, feature), best = min(outcomes.items(), key=lambda item: item[1].log_p_value)
    # Bonferroni over every (coordinate, feature) tested; its log10 too, where the p-value underflows
    log10_p = min(0.0, (best.log_p_value + math.log(len(outcomes))) / math.log(10))
    p_value = 10.0 ** log10_p
    level = 1 - confidence
    survives, leak = judged.verdict == "violation", p_value <= level
    return {**record, "outcome": "both" if survives and leak else "mechanism defect" if survives
            else "float artefact", "reason": "", "survives_rounding": survives, "float_leak": leak,
            "rounded": {"epsilon_lower_bound": bound, "score": score.name, "verdict": judged.verdict,
                        "violations": list(judged.violations), "confidence": confidence,
                        "claims": {c.name: c.epsilon for c in row.claims if c.name in judged.violations},
                        "trials": int(certification.trials["a"])},
            "low_bits": {"p_value": p_value, "log10_p_value": log10_p, "level": level,
                         "coordinate": int(column) + 1, "feature": feature, "tests": len(outcomes),
                         "strata": best.strata}}


def attribute_float_rounding(plan: Any, store: Store, result: AuditResult, seed_of: SeedOf) -> AuditResult:
    """``result`` with ``float_rounding`` filled in where a violation was certified through ``float-bits``.

    Parameters
    ----------
    plan : audit.jobs.runner._Plan
        The runner's plan of the audit (job, pairs, chosen scores, calibration outputs' id, ``n_cert``).
    store : Store
        Holds the audit's calibration outputs.
    result : AuditResult
        The finished audit (returned unchanged where no position's violation came through ``float-bits``).
    seed_of : callable
        ``(index, side, chunk) -> SeedSequence`` of the fresh trials.

    Returns
    -------
    AuditResult
        With ``float_rounding``: ``confidence`` (of each of the two statements), ``joint_confidence``,
        ``seconds`` and ``positions`` (one record per position attributed).

    References
    ----------
    Mironov (2012); Casacuberta et al. (2022), "Widespread underestimation of sensitivity in differentially
    private libraries and how to fix it"; docs/theory.md 3.5.1.
    """
    if not plan.job.fitted:  # float-bits is fitted: an audit that keeps no calibration outputs never chose it
        return result
    rows = [row for row in result.per_index
            if plan.chosen.get(row.index or 0) == FLOAT_BITS and row.verdict == "violation"]
    if not rows:
        return result
    started = time.perf_counter()
    beta = (1 - plan.job.settings.confidence) / len(plan.job.pairs)
    confidence = 1 - beta / 2
    # as many fresh trials as the headline certified on (fewer than planned where a sequential audit stopped early)
    trials = max(result.empirical.trials - plan.n_cal, 1)
    positions = [_position(plan, store, row, seed_of, confidence, trials) for row in rows]
    record = {"confidence": confidence, "joint_confidence": 1 - beta, "positions": positions,
              "seconds": time.perf_counter() - started}
    return dataclasses.replace(result, float_rounding=record)

"""Choose one score of a portfolio on calibration trials only (docs/theory.md, "every attack").

With several candidate scores, the calibration outputs of each side are cut
in two halves, and the contest is cross-fitted: every applicable candidate
is fitted on the first half (a share :data:`SELECTION_SHARE` of the
calibration trials, at least :data:`SELECTION_FIT` of them where the half
holds that many: the share grows with the budget, docs/theory.md 7) and
judged on the second, then fitted on the second half and judged on the
first; its strength is the mean of the two judgements: by the bound the
planned certification trials would give to the test chosen on one part of
its held-out scores, at the rates of the other part (:func:`_strength`;
without a plan, by the bound certified on a split of them), with the mu
bound (the mean of both ways) breaking ties. Judged one way only, the
contest read one half of the trials: on a one-step gradient descent released
on a grid, at ``10^5`` trials, it chose float-bits (which certified
0.94-0.99) or the projection (1.26) by the seed and the chunk size
(docs/theory.md 3.6).
A fitted score that says it is ``preferred`` is
chosen without a contest: the ``discrete`` score's outcome table (the
plug-in likelihood ratio of the whole output: every score is a function of
the output), and its classifier on outputs whose every coordinate is a
category or holds sentinel codes, which the other scores read as
magnitudes. At small epsilon a contest judged on a few thousand held-out
trials is mostly noise (docs/theory.md 7). The others are then listed as
applicable but not judged: their strengths would decide nothing, and only
the chosen score's own strength is computed. Where no candidate certifies
anything on its held-out scores (strengths and mu bounds all at 0), a
candidate whose fit says it is the more efficient local test than the mean
of the outputs (an ``efficiency`` above 1, read without labels: the
``median`` score under heavy-tailed noise) goes before the others' order.
A fitted score that says it has nothing to read in these outputs
(``declined``: ``float-bits`` on outputs already on a coarse grid) is
skipped with its reason.
The chosen score is refitted on all calibration outputs and is the only
score the certification trials ever see. Everything chosen is a function of
calibration trials, which are independent of the certification trials, so
the certified bound holds at its stated confidence whatever was chosen: the
choice costs nothing in the failure probability.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.score_protocol import fitted_declined, score_arithmetic
from dpaudit.attacks.scores import Score, ScoreFunction, score_applies, score_needs_calibration
from dpaudit.auditing.statistics.confidence import Counts, split_calibration
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, gdp_lower_bound, plan_epsilon
from dpaudit.auditing.statistics.thresholds import planned_value
from dpaudit.core.errors import DPAuditError, ParameterError

__all__ = ["Candidate", "PORTFOLIO_CALIBRATION", "SELECTION_FIT", "SELECTION_SHARE", "choose_score",
           "selection_fit"]

#: Calibration trials per dataset a portfolio needs at least: two halves of 20, each fitted on and judged by the
#: other (an audit with fewer is refused when it is made, before any trial: ``audit.jobs.job.AuditJob``)
PORTFOLIO_CALIBRATION = 40

#: Candidates are fitted on at least this many calibration trials per side while choosing (fewer only when
#: the first half holds fewer), so a small audit chooses on as much as before.
SELECTION_FIT = 1_000
#: ... and on this share of the calibration trials per side, which grows with the budget (no fixed cap):
#: at epsilon 0.1 candidates differ by a few hundredths, which 10^3 trials per side cannot tell apart
#: (docs/theory.md 7). The chosen score is refitted on all calibration trials.
SELECTION_SHARE = 0.02
#: Thresholds a candidate's strength is searched over (of its held-out scores): the strength is a noisy
#: figure for choosing, and a finer search would cost more than the candidates' fits
STRENGTH_CANDIDATES = 500


def selection_fit(calibration: int) -> int:
    """Calibration trials per side the candidates are fitted on while choosing (of ``calibration``)."""
    half = calibration // 2
    return min(half, max(SELECTION_FIT, int(SELECTION_SHARE * calibration)))


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate score of a portfolio and its calibration strength (not certified)."""

    name: str
    applicable: bool
    reason: str = ""
    epsilon: float | None = None
    mu: float | None = None
    chosen: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _fit(score: Score, pair: CanaryPair, cal_a: np.ndarray, cal_b: np.ndarray, seed: int) -> ScoreFunction:
    with score_arithmetic():
        if score_needs_calibration(score):
            return score.fit(pair, cal_a, cal_b, seed)
        return score.fit(pair, None, None, seed)


def _strength(held_a: np.ndarray, held_b: np.ndarray, *, delta: float, confidence: float, seed: int,
              planned: int | None) -> float:
    """A candidate's strength on its held-out scores (a figure for choosing, certifying nothing).

    Without ``planned``: the epsilon bound certified on a split of them. With it: the bound ``planned``
    certification trials per side would give to the test chosen on one half of them at the rates of the
    other half, and the other way round, averaged (docs/theory.md 7: at small epsilon a few thousand
    held-out trials certify nothing, so their certified bounds cannot tell candidates apart).
    """
    if planned is None:
        return epsilon_lower_bound(held_a, held_b, delta=delta, confidence=confidence, calibration_fraction=0.5,
                                   seed=seed).epsilon_lower_bound
    first_a, first_b, second_a, second_b = split_calibration(held_a, held_b, 0.5, seed)
    budget = (planned, planned)
    values = []
    for choose, read in (((first_a, first_b), (second_a, second_b)), ((second_a, second_b), (first_a, first_b))):
        plan = plan_epsilon(*choose, delta=delta, confidence=confidence, planned=budget, seed=seed,
                            candidates=STRENGTH_CANDIDATES)
        values.append(planned_value(plan, Counts.of(plan, *read), delta=delta, beta=1 - confidence,
                                    planned=budget))
    # both ways round: half the variance of one. A way that plans no bound gives the most negative float
    # (``conditional_epsilon_estimate``): halves are added, never the two sentinels (an overflow), and a
    # strength at such a sentinel reads as 0, nothing resolved, as any strength at or below 0 ranks
    value = 0.5 * values[0] + 0.5 * values[1]
    return value if np.isfinite(value) and value > -1e300 else 0.0


def _order_key(held_a: np.ndarray, held_b: np.ndarray) -> bytes:
    """The joint order of held-out scores of both sides, ties kept: equal keys, equal tests at every threshold.

    Every threshold a strength tries is a pooled held-out value picked by its rank
    (``audit.statistics.thresholds.candidate_thresholds``), and every count is of scores on either side of it,
    so :func:`_strength` is the same for any two candidates with the same key.
    """
    _, ranks = np.unique(np.concatenate([held_a, held_b]), return_inverse=True)
    return np.int64(held_a.size).tobytes() + ranks.astype(np.int64).tobytes()


def choose_score(scores: Sequence[Score], pair: CanaryPair, cal_a: np.ndarray, cal_b: np.ndarray, *,
                 seed: int, delta: float, confidence: float,
                 planned: int | None = None) -> tuple[Score, ScoreFunction, tuple[Candidate, ...]]:
    """The chosen score, fitted on all calibration outputs, and every candidate's calibration strength.

    Parameters
    ----------
    scores : sequence of Score
        The portfolio (at least one). A single score is fitted without a choice (no candidates listed).
    pair : CanaryPair
    cal_a, cal_b : numpy.ndarray
        Calibration outputs on ``S`` and ``S'`` (never certification trials).
    seed : int
        Seeds fitting and the threshold split of the strength estimate.
    delta, confidence : float
        Of the strength estimate (a figure for choosing only; it certifies nothing).
    planned : int, optional
        Certification trials per side to come: candidates are judged by the bound that budget would
        give (:func:`_strength`); without it, by the bound certified on a split of their held-out scores.
    """
    if len(scores) == 1:
        return scores[0], _fit(scores[0], pair, cal_a, cal_b, seed), ()
    half_a, half_b = len(cal_a) // 2, len(cal_b) // 2
    if min(len(cal_a), len(cal_b)) < PORTFOLIO_CALIBRATION:
        raise ParameterError(f"a portfolio of scores needs at least {PORTFOLIO_CALIBRATION} calibration trials per "
                             f"dataset, got {min(len(cal_a), len(cal_b))}: raise trials or calibration_fraction")
    # the two halves of each side: every candidate is fitted on one and judged on the other, both ways round
    halves = ((cal_a[:half_a], cal_b[:half_b]), (cal_a[half_a:], cal_b[half_b:]))
    fit_a_rows, fit_b_rows = selection_fit(len(cal_a)), selection_fit(len(cal_b))
    strengths: dict[bytes, float] = {}
    # per candidate, in portfolio order: why it is not applicable, or its held-out scores of each way round
    outcome: dict[str, str | list[tuple[np.ndarray, np.ndarray]]] = {}
    first_preferred: dict[str, bool] = {}
    efficiency: dict[str, float] = {}

    def judged_strength(held_a: np.ndarray, held_b: np.ndarray) -> float:
        # a strength reads the held-out scores' order only: candidates whose scores one increasing map takes to
        # another's (on a one-dimensional output: the projection, the Gaussian and logistic fits) share it
        key = _order_key(held_a, held_b)
        if key not in strengths:
            strengths[key] = _strength(held_a, held_b, delta=delta, confidence=confidence, seed=seed,
                                       planned=planned)
        return strengths[key]

    def judge(score: Score, way: int) -> tuple[np.ndarray, np.ndarray] | str:
        """Fit on one half, score the other: the held-out scores, or why the fit declined."""
        (fit_a, fit_b), (judge_a, judge_b) = (halves, halves[::-1])[way]
        fitted = _fit(score, pair, fit_a[:fit_a_rows], fit_b[:fit_b_rows], seed)
        reason = fitted_declined(fitted)
        if reason:
            return reason
        with score_arithmetic():
            held_a = np.asarray(fitted(judge_a), dtype=float)
            held_b = np.asarray(fitted(judge_b), dtype=float)
        if not (np.all(np.isfinite(held_a)) and np.all(np.isfinite(held_b))):
            raise ParameterError(f"score {score.name!r} gave scores that are not finite numbers")
        if way == 0:  # the first way round: what the fit says of itself
            first_preferred[score.name] = getattr(fitted, "preferred", False) is True
            efficiency[score.name] = float(getattr(fitted, "efficiency", 0.0))
        return held_a, held_b

    def judged_way(score: Score, way: int) -> None:
        try:
            judged = judge(score, way)
        except (DPAuditError, ValueError, RuntimeError, FloatingPointError, np.linalg.LinAlgError) as exc:
            outcome[score.name] = str(exc) or type(exc).__name__
            return
        if isinstance(judged, str):
            outcome[score.name] = judged
        else:
            outcome.setdefault(score.name, []).append(judged)
    for score in scores:  # every candidate's first way round
        reason = score_applies(score, pair)
        if reason:
            outcome[score.name] = reason
            continue
        judged_way(score, 0)

    def rows(judged_names: set[str], chosen: str | None, not_judged: str = "") -> list[Candidate]:
        listed = []
        for score in scores:
            found = outcome[score.name]
            if isinstance(found, str):
                listed.append(Candidate(score.name, False, found))
            elif score.name in judged_names:
                strength = float(np.mean([judged_strength(a, b) for a, b in found]))
                listed.append(Candidate(score.name, True, "", strength, chosen=score.name == chosen))
            else:
                listed.append(Candidate(score.name, True, not_judged))
        return listed
    # a plug-in likelihood ratio, or the only score that reads the output's codes as codes, is taken without a
    # contest (the others are not judged: their strengths would decide nothing) when its second way round fits
    # too and its fit on all calibration outputs still says so (a few thousand trials can show an atom that is
    # not there)
    dropped: dict[str, str] = {}  # name -> why its fit on all calibration outputs failed
    for score in scores:
        if not (first_preferred.get(score.name) and isinstance(outcome[score.name], list)):
            continue
        judged_way(score, 1)
        if isinstance(outcome[score.name], str):
            continue
        try:
            fitted = _fit(score, pair, cal_a, cal_b, seed)
        except (DPAuditError, ValueError, RuntimeError, FloatingPointError, np.linalg.LinAlgError) as exc:
            dropped[score.name] = f"not chosen: its fit on all calibration trials failed ({exc or type(exc).__name__})"
            continue
        if getattr(fitted, "preferred", False) is True:
            why = getattr(fitted, "preferred_reason", "its fit says it reads the whole output, docs/theory.md 7")
            note = f"not judged: {score.name!r} was taken without a contest ({why})"
            return score, fitted, tuple(rows({score.name}, score.name, note))
    # the contest: every other candidate's second way round, then the strengths of both
    for score in scores:
        found = outcome[score.name]
        if isinstance(found, list) and len(found) == 1:
            judged_way(score, 1)
    contest = {name for name, found in outcome.items() if isinstance(found, list)}
    candidates = rows(contest, None)
    held = {name: outcome[name] for name in contest}
    if not contest:
        raise ParameterError("no score of the portfolio applies: " + "; ".join(
            f"{c.name}: {c.reason}" for c in candidates))
    applicable = [c for c in candidates if c.applicable and c.name not in dropped]
    if not applicable:
        raise ParameterError("no score of the portfolio applies on all calibration outputs")
    # strengths at or below 0 tie (none resolves an effect at this budget); the mu bound, read near the
    # centre where the noise is smallest, breaks ties (computed for the tied candidates only)
    top = max(max(c.epsilon, 0.0) for c in applicable)
    mus = {c.name: float(np.mean([gdp_lower_bound(a, b, confidence=confidence, calibration_fraction=0.5,
                                                  seed=seed).mu_lower_bound for a, b in held[c.name]]))
           for c in applicable if max(c.epsilon, 0.0) == top}
    # where the mu bounds tie too (in practice at 0: nothing certified at this budget), a candidate that says
    # it is the more efficient local test (``efficiency`` above 1: the median test under heavy-tailed noise)
    # goes first
    name = max(mus, key=lambda n: (mus[n], efficiency.get(n, 0.0) > 1.0, -[c.name for c in applicable].index(n)))
    chosen = next(score for score in scores if score.name == name)
    candidates = [dataclasses.replace(c, mu=mus.get(c.name)) for c in candidates]
    candidates = [dataclasses.replace(c, chosen=c.name == chosen.name, reason=dropped.get(c.name, c.reason))
                  for c in candidates]
    return chosen, _fit(chosen, pair, cal_a, cal_b, seed), tuple(candidates)

"""Choosing thresholds on calibration scores, before any certification score is seen (docs/theory.md 3.2).

Every estimator of :mod:`dpaudit.auditing.statistics.estimators` and :mod:`dpaudit.auditing.statistics.conditional`
chooses its orientation and thresholds here, from calibration scores (or
scores drawn from a known law) only, so the choice costs nothing in the
failure probability.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpaudit.auditing.statistics.conditional import conditional_epsilon_estimate
from dpaudit.auditing.statistics.confidence import (
    Counts,
    ThresholdPlan,
    check_scores,
    cp_upper,
    error_counts,
    split_calibration,
)
from dpaudit.auditing.statistics.tilt import Tilt
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice

__all__ = ["ATOM_SHARE", "MIN_PLANNED_REGION", "MIN_PLANNED_SHARE", "PLANNING_LEVELS", "STRATEGIES", "TIE_FRACTIONS",
           "TILT_LEVEL", "calibration_sizes", "candidate_tests", "candidate_thresholds", "choose_conditional",
           "choose_test", "choose_threshold", "epsilon_objective", "failure_split", "orientation", "planned_counts",
           "planned_value", "planning_floor", "prepare_scores", "quantile_grid", "round_down", "thin_tests",
           "thresholds_for"]

STRATEGIES = ("split", "union")


def candidate_thresholds(cal_a: np.ndarray, cal_b: np.ndarray, limit: int = 4000) -> np.ndarray:
    pooled = np.unique(np.concatenate([cal_a, cal_b]))
    if pooled.size > limit:
        ranks = np.unique(np.concatenate([
            np.linspace(0, pooled.size - 1, limit // 2),
            np.geomspace(1, pooled.size, limit // 4) - 1,
            pooled.size - np.geomspace(1, pooled.size, limit // 4),
        ]).round().astype(int))
        pooled = pooled[ranks]
    return pooled


#: Fractions of a boundary atom a randomised test may take (besides all of it, 1): a grid fixed in advance
TIE_FRACTIONS = np.arange(1, 32) / 32
#: A score value is an atom worth splitting when this share of the pooled calibration scores sit on it
ATOM_SHARE = 1e-3
#: Calibration rates enter the planned bound as one-sided upper bounds at the first of these levels at
#: which some test plans a positive bound: a penalty for the noise of thin tails, where the largest of
#: thousands of noisy calibration estimates is mostly luck, relaxed when it leaves nothing (the effect is
#: smaller than the calibration part's noise, and the point estimates are the best guide left). Chosen on
#: seeded audits (docs/theory.md 7): at 0.1-0.25 alone, a mixed output whose likelihood ratio is flat in
#: its tail had its test placed in a tail of a few calibration trials and certified 0 in 2-5 of 6 audits.
PLANNING_LEVELS = (0.05, 0.25, 0.5)
#: Smoothed rates (``audit.statistics.tilt``) enter the planned bound as their point estimates (no level):
#: their noise is that of two fitted parameters, not of a thin tail's count. (Shrinking the tilt's slope by
#: 0.67-1.64 of its standard errors certified less on parallel Laplace: docs/theory.md 7.)
TILT_LEVEL = None
#: With planned certification trials, a test whose region (or the region's complement) holds fewer pooled
#: calibration trials than this is not planned on (unless every test is): the certification trials multiply
#: a thin tail's luck, and a classifier's extreme calibration scores in particular fit their own labels (SVT3 ||
#: SVT4 at 10^6 trials: 25 trials of S' against 3 of S above the chosen threshold, 0 certified; docs/theory.md 7)
MIN_PLANNED_REGION = 100
#: ... capped at this share of the pooled calibration trials, so that a small audit keeps its tails
MIN_PLANNED_SHARE = 1e-3


def candidate_tests(cal_a: np.ndarray, cal_b: np.ndarray,
                    limit: int = 4000) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidate tests ``score > t, or score == t and U < g`` and their calibration error counts.

    Every candidate threshold comes with ``g = 1`` (the test ``score >= t``); a
    threshold on an atom (a value that at least :data:`ATOM_SHARE` of the
    calibration scores take) also with each fraction of :data:`TIE_FRACTIONS`.
    Returns ``(thresholds, fractions, false_positives, false_negatives)``; the
    counts are expected counts ``#{a > t} + g #{a == t}`` and ``#{b < t} + (1 - g)
    #{b == t}`` (fractional where ``g`` is), the rates the randomised test has
    on these scores given them.
    """
    values = candidate_thresholds(cal_a, cal_b, limit)
    sorted_a, sorted_b = np.sort(cal_a), np.sort(cal_b)
    above_a = sorted_a.size - np.searchsorted(sorted_a, values, side="right")
    above_b = sorted_b.size - np.searchsorted(sorted_b, values, side="right")
    equal_a = sorted_a.size - np.searchsorted(sorted_a, values, side="left") - above_a
    equal_b = sorted_b.size - np.searchsorted(sorted_b, values, side="left") - above_b
    atoms = np.flatnonzero(equal_a + equal_b >= max(2.0, ATOM_SHARE * (cal_a.size + cal_b.size)))
    rows = np.concatenate([np.arange(values.size), np.repeat(atoms, TIE_FRACTIONS.size)])
    fractions = np.concatenate([np.ones(values.size), np.tile(TIE_FRACTIONS, atoms.size)])
    false_positives = above_a[rows] + fractions * equal_a[rows]
    false_negatives = sorted_b.size - above_b[rows] - fractions * equal_b[rows]
    return values[rows], fractions, false_positives.astype(float), false_negatives.astype(float)


def planning_floor(trials_a: int, trials_b: int) -> float:
    """The fewest pooled calibration trials a planned test's region or complement holds (:func:`thin_tests`)."""
    return min(MIN_PLANNED_REGION, MIN_PLANNED_SHARE * (trials_a + trials_b))


def thin_tests(false_positives: np.ndarray, false_negatives: np.ndarray, trials_a: int, trials_b: int,
               widest: float = np.inf, narrowest: float = 0.0) -> np.ndarray:
    """Which candidate tests have a region (``score >= t``, or its complement) of fewer pooled calibration
    trials than :data:`MIN_PLANNED_REGION` (at most :data:`MIN_PLANNED_SHARE` of them); none when all do.

    With ``widest``, a test whose smaller side (region or complement) holds ``widest`` pooled calibration
    trials or more is left out too (the thin-tail member of a hedged placement, ``audit.statistics.hedged``);
    with ``narrowest``, one whose smaller side holds fewer than ``narrowest`` (the wide member). When that
    leaves no test, only the floor applies.
    """
    inside = false_positives + (trials_b - false_negatives)
    tail = np.minimum(inside, trials_a + trials_b - inside)
    thin = tail < planning_floor(trials_a, trials_b)
    if thin.all():
        thin = np.zeros_like(thin)
    narrow = thin | (tail >= widest) | (tail < narrowest)
    return narrow if not narrow.all() else thin


def planned_counts(counts: np.ndarray, trials: int, planned: int, level: float | None = 0.5) -> np.ndarray:
    """The counts ``planned`` certification trials would give at the calibration rates, taken at their
    one-sided upper bounds at ``level`` (so that a rate seen a few times is not taken at its luckiest;
    0.5: about the point estimate; ``None``: the point estimates themselves)."""
    if level is None:
        return np.asarray(counts, dtype=float) / trials * planned
    return cp_upper(counts, trials, level) * planned


def choose_test(cal_a, cal_b, failure: float, objective, selection_level: float = 1.0,
                planned: tuple[int, int] | None = None, level: float | None = PLANNING_LEVELS[0],
                limit: int = 4000, tilt: Tilt | None = None,
                widest: float | Sequence[float] = np.inf,
                narrowest: float | Sequence[float] = 0.0) -> tuple[float, float, float] | list:
    """The test (threshold, tie fraction) whose bound is largest, and that bound; calibration scores only.

    Without ``planned`` the bound is certified on the calibration scores themselves (at ``failure *
    selection_level``). With ``planned = (m_a, m_b)``, the certification trials to come, it is the bound
    those trials would certify at ``failure`` from the counts they would give at the calibration rates
    (:func:`planned_counts` at ``level``): at small epsilon the best test sits in a tail that the
    certification budget resolves and the calibration part alone does not (docs/theory.md 7). With a
    ``tilt`` of these scores (:func:`dpaudit.auditing.statistics.tilt.fit_tilt`) the calibration counts are
    the tilt's smoothed ones. ``widest`` and ``narrowest``: see :func:`thin_tests` (planned tests only);
    sequences of them (paired, or one against many) give the best test under each pair, computed at once,
    as a list.
    """
    thresholds, fractions, fp, fn = candidate_tests(cal_a, cal_b, limit)
    if tilt is not None:
        fp, fn = tilt.counts(thresholds, fractions, cal_a.size, cal_b.size)
        level = TILT_LEVEL
    if planned is None:
        level = failure * selection_level
        values, _ = objective(cp_upper(fp, cal_a.size, level), cp_upper(fn, cal_b.size, level))
        masks = [np.zeros(fp.size, dtype=bool) for _ in _spans(widest, narrowest)]
    else:
        m_a, m_b = planned
        masks = _masks(fp, fn, cal_a.size, cal_b.size, widest, narrowest, tilt is None)
        values, _ = objective(cp_upper(planned_counts(fp, cal_a.size, m_a, level), m_a, failure),
                              cp_upper(planned_counts(fn, cal_b.size, m_b, level), m_b, failure))
    picks = []
    for mask in masks:
        masked = np.where(mask, -np.inf, values)
        best = int(np.argmax(masked))
        picks.append((float(thresholds[best]), float(fractions[best]), float(masked[best])))
    return picks[0] if np.ndim(widest) == 0 and np.ndim(narrowest) == 0 else picks


def _spans(widest, narrowest) -> list[tuple[float, float]]:
    """``(widest, narrowest)`` pairs of the arguments of :func:`choose_test` (scalars or sequences)."""
    wide, narrow = np.broadcast_arrays(np.atleast_1d(np.asarray(widest, dtype=float)),
                                       np.atleast_1d(np.asarray(narrowest, dtype=float)))
    return list(zip(wide.tolist(), narrow.tolist()))


def _masks(fp: np.ndarray, fn: np.ndarray, trials_a: int, trials_b: int, widest, narrowest,
           counted: bool) -> list[np.ndarray]:
    """The tests left out under each span (:func:`thin_tests`; none for smoothed counts)."""
    return [thin_tests(fp, fn, trials_a, trials_b, wide, narrow) if counted else np.zeros(fp.size, dtype=bool)
            for wide, narrow in _spans(widest, narrowest)]


def epsilon_objective(delta: float) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``(FPR_hi, FNR_hi) -> (bound, direction)``: the epsilon bound of docs/theory.md 3.1 either way."""
    def objective(fpr: np.ndarray, fnr: np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore"):
            forward = np.log(np.maximum(1 - delta - fnr, 0.0) / fpr)   # log((1 - delta - FNR) / FPR)
            backward = np.log(np.maximum(1 - delta - fpr, 0.0) / fnr)  # log((1 - delta - FPR) / FNR)
        forward = np.nan_to_num(forward, nan=-np.inf)
        backward = np.nan_to_num(backward, nan=-np.inf)
        return np.maximum(forward, backward), np.where(forward >= backward, 0, 1)
    return objective


def choose_conditional(cal_a, cal_b, beta: float, delta: float, planned: tuple[int, int] | None,
                       level: float | None = PLANNING_LEVELS[0], limit: int = 4000,
                       tilt: Tilt | None = None,
                       widest: float | Sequence[float] = np.inf,
                       narrowest: float | Sequence[float] = 0.0) -> tuple[float, float, float, int] | list:
    """Threshold, tie fraction, calibration value and region of the best conditional bound
    (``audit.conditional``); with ``planned``, the value the planned certification trials would give;
    with ``tilt``, from the tilt's smoothed calibration counts, and ``widest``, ``narrowest`` (as
    :func:`choose_test`)."""
    thresholds, fractions, fp, fn = candidate_tests(cal_a, cal_b, limit)
    if tilt is not None:
        fp, fn = tilt.counts(thresholds, fractions, cal_a.size, cal_b.size)
        level = TILT_LEVEL
    n_a, n_b = cal_a.size, cal_b.size
    masks = _masks(fp, fn, n_a, n_b, widest, narrowest, planned is not None and tilt is None)
    if planned is not None:  # the counts the planned certification trials would give
        n_a, n_b = planned
        fp, fn = planned_counts(fp, cal_a.size, n_a, level), planned_counts(fn, cal_b.size, n_b, level)
    forward = conditional_epsilon_estimate(n_b - fn, n_b, fp, n_a, delta=delta, failure=beta)  # score >= t
    backward = conditional_epsilon_estimate(n_a - fp, n_a, fn, n_b, delta=delta, failure=beta)  # score < t
    picks = []
    for mask in masks:
        ahead, behind = np.where(mask, -np.inf, forward), np.where(mask, -np.inf, backward)
        values = np.maximum(ahead, behind)
        best = int(np.argmax(values))
        picks.append((float(thresholds[best]), float(fractions[best]), float(values[best]),
                      int(behind[best] > ahead[best])))
    return picks[0] if np.ndim(widest) == 0 and np.ndim(narrowest) == 0 else picks


def planned_value(plan: ThresholdPlan, counts: Counts, *, delta: float, beta: float,
                  planned: tuple[int, int]) -> float:
    """The bound ``planned = (m_a, m_b)`` certification trials would give to ``plan``'s first test at the rates
    of ``counts`` (held-out trials the plan was not chosen on), each at its upper bound at the strictest
    planning level: an estimate for choosing, certifying nothing."""
    (m_a, m_b), fp, fn = planned, counts.false_positives[:1], counts.false_negatives[:1]
    level = PLANNING_LEVELS[0]  # held-out rates of a few trials are noisy too: a max over candidates favours them
    fp, fn = planned_counts(fp, counts.trials_a, m_a, level), planned_counts(fn, counts.trials_b, m_b, level)
    if plan.method != "conditional":
        return float(epsilon_objective(delta)(cp_upper(fp, m_a, beta / 2), cp_upper(fn, m_b, beta / 2))[0][0])
    if plan.direction == 0:
        return float(conditional_epsilon_estimate(m_b - fn, m_b, fp, m_a, delta=delta, failure=beta)[0])
    return float(conditional_epsilon_estimate(m_a - fp, m_a, fn, m_b, delta=delta, failure=beta)[0])


def choose_threshold(cal_a, cal_b, failure: float, objective, selection_level: float = 1.0) -> tuple[float, float]:
    """The candidate whose bound, certified on the calibration scores themselves, is largest.

    Certifying on calibration penalises thresholds in thin tails where the
    calibration counts are mostly noise (maximising raw rates there picks
    lucky fluctuations). The epsilon bound lives in the tails and uses the
    nominal level; the mu bound is best near the centre and uses a level 100
    times stricter (``selection_level``, :data:`MU_SELECTION_LEVEL`), which penalises thin tails
    harder. Over 8 seeded audits of a mu = 1 Gaussian with 10^6 trials per
    side this reached 0.975 of the oracle ceiling in epsilon and 0.995 in mu
    on average. Only the choice changes: the bound is certified on other data.
    Deterministic tests only (``score >= t``); :func:`choose_test` may split an atom.
    """
    candidates = candidate_thresholds(cal_a, cal_b)
    fp, fn = error_counts(cal_a, cal_b, candidates)
    level = failure * selection_level
    values, _ = objective(cp_upper(fp, cal_a.size, level), cp_upper(fn, cal_b.size, level))
    best = int(np.argmax(values))
    return float(candidates[best]), float(values[best])


def orientation(cal_a, cal_b, failure: float, objective, selection_level: float = 1.0) -> float:
    """``+1.0`` when high scores point to ``S'`` on the calibration scores, ``-1.0`` when low ones do.

    The orientation whose best calibration bound is larger wins; scores are
    negated for ``"smaller under S'"``. Only calibration data decide, so the
    choice costs nothing in the failure probability, and swapping the two
    datasets (or a score oriented the other way) never turns a strong result
    into 0.
    """
    forward = choose_threshold(cal_a, cal_b, failure, objective, selection_level)[1]
    backward = choose_threshold(-cal_a, -cal_b, failure, objective, selection_level)[1]
    return -1.0 if backward > forward else 1.0


def quantile_grid(cal_a, cal_b, size: int) -> np.ndarray:
    """``size`` thresholds at log-spaced tail quantiles of both calibration arrays."""
    half = max(size // 2, 1)
    tails = np.geomspace(1.0 / max(cal_a.size, cal_b.size), 0.5, half)
    grid = np.concatenate([np.quantile(cal_a, 1 - tails), np.quantile(cal_b, tails)])
    return np.unique(grid)[:size]


def prepare_scores(scores_a, scores_b, calibration, calibration_fraction, seed):
    scores_a = check_scores("scores_a", scores_a)
    scores_b = check_scores("scores_b", scores_b)
    if calibration is None:
        return split_calibration(scores_a, scores_b, calibration_fraction, seed)
    if len(calibration) != 2:
        raise ParameterError("calibration must be a pair (calibration_a, calibration_b)")
    return (check_scores("calibration_a", calibration[0]), check_scores("calibration_b", calibration[1]),
            scores_a, scores_b)


def thresholds_for(strategy, cal_a, cal_b, beta, grid_size, objective, selection_level: float = 1.0):
    check_choice("threshold", strategy, STRATEGIES)
    if strategy == "split":
        return np.array([choose_threshold(cal_a, cal_b, beta / 2, objective, selection_level)[0]])
    if grid_size < 1:
        raise ParameterError(f"grid_size must be >= 1, got grid_size={grid_size}")
    return quantile_grid(cal_a, cal_b, grid_size)


def calibration_sizes(cal_a: np.ndarray, cal_b: np.ndarray) -> dict[str, int]:
    return {"calibration_a": int(cal_a.size), "calibration_b": int(cal_b.size)}


def failure_split(beta: float, plan: ThresholdPlan) -> dict[str, Any]:
    size = int(plan.thresholds.size)
    return {"beta": beta, "rates": 2, "thresholds": size, "per_rate": beta / (2 * size)}


def round_down(value: float) -> float:
    # a certified lower bound must never be overstated
    if not np.isfinite(value) or value <= 0:
        return 0.0
    return max(float(np.nextafter(value, -np.inf)), 0.0)

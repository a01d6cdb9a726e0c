"""Certified lower bounds from two arrays of scores (docs/theory.md section 3).

Convention: scores are larger under ``S'`` (dataset B). For a threshold
``t``: ``FPR = P[score(M(S)) >= t]``, ``FNR = P[score(M(S')) < t]``.
``(eps, delta)``-DP implies ``FPR + e^eps FNR >= 1 - delta`` and
``FNR + e^eps FPR >= 1 - delta``.

Soundness. A threshold (or grid of thresholds) is always chosen on
*calibration* scores that are not used for the bound: either the caller
passes them (e.g. the calibration trials a fitted score was trained on), or
the estimator splits the given scores itself with a seeded permutation.
The failure probability ``beta = 1 - confidence`` is split by a union bound
over both error rates and every threshold certified; the split is recorded
in the result. Each estimator's statement holds at its own confidence
(several estimators on the same scores are not simultaneous).

Orientation: whether high or low scores point to ``S'`` is chosen on the
calibration scores (:func:`dpaudit.auditing.statistics.thresholds.orientation`), so either order of the two arrays
gives the same bound and the choice costs nothing.

Strategies: ``"split"`` certifies at the one threshold whose bound is
largest on the calibration scores; ``"union"`` certifies at a grid of ``grid_size`` calibration quantiles,
each at level ``beta / (2 * grid_size)``.

References
----------
Jagielski, Ullman, Oprea 2020, "Auditing Differentially Private Machine
Learning"; Nasr et al. 2021, "Adversary Instantiation" (threshold tests).
Dong, Roth, Su 2022, "Gaussian Differential Privacy" (tradeoff of mu-GDP).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import ndtri

from dpaudit.auditing.statistics.conditional import RATE_SHARE, conditional_parts
from dpaudit.auditing.statistics.confidence import (
    Counts,
    ThresholdPlan,
    check_confidence,
    check_delta,
    cp_upper,
)
from dpaudit.auditing.statistics.thresholds import (
    PLANNING_LEVELS,
    STRATEGIES,
    calibration_sizes,
    choose_conditional,
    choose_test,
    epsilon_objective,
    failure_split,
    orientation,
    planning_floor,
    prepare_scores,
    quantile_grid,
    round_down,
    thresholds_for,
)
from dpaudit.auditing.statistics.hedged import THIN_SPAN, PlanFamily, family_of, finish_family, splits_end_atom
from dpaudit.auditing.statistics.records import EpsilonBound, GDPBound, ProfileBound
from dpaudit.auditing.statistics.tilt import TAIL_MODELS, fit_tilt
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice

__all__ = [
    "Counts",
    "EpsilonBound",
    "GDPBound",
    "ProfileBound",
    "STRATEGIES",
    "ThresholdPlan",
    "epsilon_lower_bound",
    "finish_epsilon",
    "finish_gdp",
    "finish_profile",
    "gdp_lower_bound",
    "plan_epsilon",
    "plan_gdp",
    "plan_profile",
    "profile_lower_bound",
]


# -- objectives on (FPR upper, FNR upper) ------------------------------------
_epsilon_objective = epsilon_objective


def _mu_objective(fpr: np.ndarray, fnr: np.ndarray):
    # mu-GDP: FNR >= Phi(Phi_inv(1 - FPR) - mu)  =>  mu >= Phi_inv(1 - FPR) - Phi_inv(FNR)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = -ndtri(fpr) - ndtri(fnr)  # scipy.stats' norm.isf(fpr) - norm.ppf(fnr), without importing it
    return np.nan_to_num(value, nan=-np.inf, posinf=np.inf), np.zeros(value.shape, dtype=int)


#: The mu bound's threshold is chosen at a level this much stricter than nominal (see choose_threshold).
MU_SELECTION_LEVEL = 0.01


# -- epsilon -----------------------------------------------------------------------
def plan_epsilon(cal_a, cal_b, *, delta: float, confidence: float, threshold: str = "split",
                 grid_size: int = 32, planned: tuple[int, int] | None = None, seed: int = 0,
                 candidates: int = 4000, tail_model: str = "calibration",
                 widest: float = np.inf) -> ThresholdPlan | PlanFamily:
    """Orientation, tests and method of :func:`epsilon_lower_bound`, from calibration scores only.

    With ``threshold="split"`` the method is chosen too: each rate bounded on
    its own, or their ratio in one step (``audit.statistics.conditional``), whichever
    certifies more on the calibration scores. The test may take a fraction of
    the trials whose score sits on its threshold (a randomised tie-break
    seeded by ``seed``, docs/theory.md 7). With ``planned = (m_a, m_b)``, the
    certification trials per side to come, the test is the one whose bound
    at that budget is largest (``audit.statistics.thresholds.choose_test``; the calibration rates taken
    at their upper bounds at the strictest of ``PLANNING_LEVELS`` that leaves a positive bound), among
    at most ``candidates`` thresholds (calibration quantiles, denser in the tails). With
    ``tail_model="tilt"`` (a score whose log likelihood ratio is about linear in its value declares it,
    ``attacks.score_protocol.fitted_tail_model``) the rates are first read from the exponential tilt fitted
    to the calibration scores (``audit.statistics.tilt``) where the calibration scores do not reject it.
    With ``tail_model="hedged"`` and ``planned``, the test the counts place, the best whose smaller side
    holds fewer than ``audit.statistics.hedged.THIN_SPAN`` times the planning floor of calibration trials,
    the best whose smaller side holds at least that many (a planned test's side holds fewer than
    ``widest``), and the tilt's, are certified together
    (:class:`~dpaudit.auditing.statistics.hedged.PlanFamily`), less any that takes part of the scores' end
    atom (``audit.statistics.hedged.splits_end_atom``) while another is left.
    """
    delta, beta = check_delta(delta), 1 - check_confidence(confidence)
    tail_model = check_choice("tail_model", tail_model, TAIL_MODELS)
    if threshold != "split":
        objective = _epsilon_objective(delta)
        sign = orientation(cal_a, cal_b, beta / 2, objective)
        return ThresholdPlan(sign, thresholds_for(threshold, sign * cal_a, sign * cal_b, beta, grid_size, objective),
                             calibration_sizes(cal_a, cal_b))
    place = functools.partial(_placed, cal_a, cal_b, delta=delta, beta=beta, planned=planned, seed=seed,
                              candidates=candidates)
    if planned is None or tail_model == "calibration":
        return place(None, ((widest, 0.0),))[0]
    tilt = fit_tilt(cal_a, cal_b)
    if tail_model == "tilt":
        return place(tilt, ((widest, 0.0),))[0]
    # hedged: the counts' test, the thin tail's and the best outside the thin tail from one pass over the
    # candidates, and the tilt's (its smoothed rates only: where they plan nothing positive it has no member)
    tilted = place(tilt, ((np.inf, 0.0),), counted=False)[0] if tilt is not None else None
    span = THIN_SPAN * planning_floor(cal_a.size, cal_b.size)
    placed = [*place(None, ((widest, 0.0), (span, 0.0), (widest, span))), tilted]
    # a test taking part of the scores' end atom: the whole atom certifies more (the wide member may take it)
    kept = [plan for plan in placed if plan is not None and not splits_end_atom(plan, cal_a, cal_b)]
    return family_of(kept or placed)


def _placed(cal_a, cal_b, tilt, spans: tuple[tuple[float, float], ...], *, delta: float, beta: float,
            planned: tuple[int, int] | None, seed: int, candidates: int,
            counted: bool = True) -> list[ThresholdPlan | None]:
    """The split plan under each ``(widest, narrowest)`` of ``spans`` (``thin_tests``), all from one pass over the
    candidate tests per planning level: smoothed rates first where ``tilt`` is given, then the calibration
    counts at each of ``PLANNING_LEVELS`` until a test plans a positive bound (docs/theory.md 7). With
    ``counted=False`` only the smoothed rates place it, and a span where they plan nothing positive is None."""
    objective = _epsilon_objective(delta)
    levels = (PLANNING_LEVELS if planned is not None else PLANNING_LEVELS[:1]) if counted else ()
    attempts = ([(None, tilt)] if tilt is not None else []) + [  # smoothed rates first (docs/theory.md 7)
        (level, None) for level in levels]
    chosen: dict[int, tuple] = {}
    for number, (level, smooth) in enumerate(attempts):
        pending = [k for k in range(len(spans)) if k not in chosen]
        if not pending:
            break
        tilts = {1.0: smooth, -1.0: None if smooth is None else smooth.negated()}
        widest, narrowest = [spans[k][0] for k in pending], [spans[k][1] for k in pending]
        separate = {s: choose_test(s * cal_a, s * cal_b, beta / 2, objective, planned=planned, level=level,
                                   limit=candidates, tilt=tilts[s], widest=widest, narrowest=narrowest)
                    for s in (1.0, -1.0)}
        joint = {s: choose_conditional(s * cal_a, s * cal_b, beta, delta, planned, level, candidates,
                                       tilt=tilts[s], widest=widest, narrowest=narrowest) for s in (1.0, -1.0)}
        for row, k in enumerate(pending):
            best_separate = max(((*separate[s][row], s) for s in (1.0, -1.0)), key=lambda r: r[2])
            best_joint = max(((*joint[s][row], s) for s in (1.0, -1.0)), key=lambda r: r[2])
            if max(best_separate[2], best_joint[2]) > 0 or (counted and number == len(attempts) - 1):
                placement = "tilt" if smooth is not None else (
                    f"calibration (level {level})" if planned is not None else "calibration (certified on it)")
                chosen[k] = (best_separate, best_joint, placement)
    sizes = calibration_sizes(cal_a, cal_b)
    plans = []
    for k in range(len(spans)):
        if k not in chosen:  # counted=False: the smoothed rates planned nothing positive
            plans.append(None)
            continue
        separate, joint, placement = chosen[k]
        if joint[2] > separate[2]:
            plans.append(ThresholdPlan(joint[4], np.array([joint[0]]), sizes, method="conditional",
                                       direction=joint[3], tie_fractions=np.array([joint[1]]), tie_seed=seed,
                                       placement=placement))
        else:
            plans.append(ThresholdPlan(separate[3], np.array([separate[0]]), sizes,
                                       tie_fractions=np.array([separate[1]]), tie_seed=seed, placement=placement))
    return plans


def _finish_conditional(plan: ThresholdPlan, counts: Counts, delta: float, beta: float) -> EpsilonBound:
    fp, fn = float(counts.false_positives[0]), float(counts.false_negatives[0])
    if plan.direction == 0:  # the region score >= t: likely under S' (its count: trials_b - fn), rare under S
        parts = conditional_parts(counts.trials_b - fn, counts.trials_b, fp, counts.trials_a, delta=delta,
                                  failure=beta)
    else:
        parts = conditional_parts(counts.trials_a - fp, counts.trials_a, fn, counts.trials_b, delta=delta,
                                  failure=beta)
    per_rate = beta * RATE_SHARE / 3
    return EpsilonBound(
        epsilon_lower_bound=round_down(parts.pop("epsilon")), conditional=parts, delta=delta, confidence=1 - beta,
        method="conditional/split", threshold=float(plan.thresholds[0]), orientation=plan.orientation,
        direction=("log((1-delta-FNR)/FPR)", "log((1-delta-FPR)/FNR)")[plan.direction],
        false_positive_rate_upper=float(cp_upper(fp, counts.trials_a, per_rate)[()]),
        false_negative_rate_upper=float(cp_upper(fn, counts.trials_b, per_rate)[()]), trials=counts.trials(plan),
        failure_split={"beta": beta, "odds_ratio": beta * (1 - RATE_SHARE), "rates": 3, "thresholds": 1,
                       "per_rate": per_rate}, tie_fraction=float(plan.fractions[0]), placement=plan.placement)


def finish_epsilon(plan: ThresholdPlan | PlanFamily, counts: Counts, *, delta: float, confidence: float,
                   threshold: str = "split") -> EpsilonBound:
    """The certified epsilon bound from the error counts at ``plan``'s thresholds (for a hedged family, the
    largest of its members' bounds, each at its share of the failure probability)."""
    delta, beta = check_delta(delta), 1 - check_confidence(confidence)
    if isinstance(plan, PlanFamily):
        return finish_family(plan, counts, beta, lambda member, part, level: finish_epsilon(
            member, part, delta=delta, confidence=level, threshold=threshold))
    if plan.method == "conditional":
        return _finish_conditional(plan, counts, delta, beta)
    split = failure_split(beta, plan)
    fpr_hi = cp_upper(counts.false_positives, counts.trials_a, split["per_rate"])
    fnr_hi = cp_upper(counts.false_negatives, counts.trials_b, split["per_rate"])
    values, directions = _epsilon_objective(delta)(fpr_hi, fnr_hi)
    best = int(np.argmax(values))
    return EpsilonBound(
        epsilon_lower_bound=round_down(values[best]), delta=delta, confidence=1 - beta,
        method=f"clopper-pearson/{threshold}", threshold=float(plan.thresholds[best]),
        orientation=plan.orientation,
        direction=("log((1-delta-FNR)/FPR)", "log((1-delta-FPR)/FNR)")[int(directions[best])],
        false_positive_rate_upper=float(fpr_hi[best]), false_negative_rate_upper=float(fnr_hi[best]),
        trials=counts.trials(plan), failure_split=split, tie_fraction=float(plan.fractions[best]),
        placement=plan.placement)


def epsilon_lower_bound(scores_a, scores_b, *, delta: float, confidence: float = 0.95,
                        threshold: str = "split", calibration=None, calibration_fraction: float = 0.1,
                        grid_size: int = 32, seed: int = 0, tail_model: str = "calibration") -> EpsilonBound:
    """Certified lower bound on epsilon at ``delta`` (docs/theory.md 3.1-3.2).

    Parameters
    ----------
    scores_a, scores_b : array_like
        Scores of trials on ``S`` and ``S'`` (larger under ``S'``).
    delta : float
        In [0, 1).
    confidence : float
        The bound holds with probability at least ``confidence``.
    threshold : {"split", "union"}
        How thresholds are chosen (see the module docstring).
    calibration : (array_like, array_like), optional
        Scores not used for the bound, to choose thresholds from. Without
        them a ``calibration_fraction`` of each array is split off (seeded).
    grid_size : int
        Thresholds certified with ``threshold="union"``.
    seed : int
        Of the calibration split and the tie-break uniforms.
    tail_model : {"calibration", "tilt", "hedged"}
        How the calibration rates that place the test are read (:func:`plan_epsilon`).

    Returns
    -------
    EpsilonBound
        ``epsilon_lower_bound >= 0``; 0 means nothing was shown.
    """
    check_delta(delta), check_confidence(confidence)
    cal_a, cal_b, cert_a, cert_b = prepare_scores(scores_a, scores_b, calibration, calibration_fraction, seed)
    plan = plan_epsilon(cal_a, cal_b, delta=delta, confidence=confidence, threshold=threshold, grid_size=grid_size,
                        planned=(cert_a.size, cert_b.size), seed=seed, tail_model=tail_model)
    return finish_epsilon(plan, Counts.of(plan, cert_a, cert_b), delta=delta, confidence=confidence,
                          threshold=threshold)


# -- mu-GDP ------------------------------------------------------------------------
def plan_gdp(cal_a, cal_b, *, confidence: float, threshold: str = "split", grid_size: int = 32) -> ThresholdPlan:
    """Orientation and thresholds of :func:`gdp_lower_bound`, from calibration scores only."""
    beta = 1 - check_confidence(confidence)
    sign = orientation(cal_a, cal_b, beta / 2, _mu_objective, MU_SELECTION_LEVEL)
    thresholds = thresholds_for(threshold, sign * cal_a, sign * cal_b, beta, grid_size, _mu_objective,
                             MU_SELECTION_LEVEL)
    return ThresholdPlan(sign, thresholds, calibration_sizes(cal_a, cal_b))


def finish_gdp(plan: ThresholdPlan, counts: Counts, *, confidence: float, delta: float | None = None,
               threshold: str = "split") -> GDPBound:
    """The certified mu bound (and the epsilon mu-GDP would imply) from the counts."""
    beta = 1 - check_confidence(confidence)
    split = failure_split(beta, plan)
    values, _ = _mu_objective(cp_upper(counts.false_positives, counts.trials_a, split["per_rate"]),
                              cp_upper(counts.false_negatives, counts.trials_b, split["per_rate"]))
    best = int(np.argmax(values))
    mu = round_down(values[best])
    model_eps = None
    if delta is not None:
        model_eps = float(gaussian_epsilon(check_delta(delta), mu)) if delta > 0 else None
    return GDPBound(
        mu_lower_bound=mu, confidence=1 - beta, method=f"gdp-clopper-pearson/{threshold}",
        threshold=float(plan.thresholds[best]), orientation=plan.orientation, trials=counts.trials(plan),
        failure_split=split, model_based_epsilon=model_eps, model_based_delta=delta)


def gdp_lower_bound(scores_a, scores_b, *, confidence: float = 0.95, delta: float | None = None,
                    threshold: str = "split", calibration=None, calibration_fraction: float = 0.1,
                    grid_size: int = 32, seed: int = 0) -> GDPBound:
    """Certified lower bound on mu under mu-GDP (docs/theory.md 3.3).

    ``mu >= Phi_inv(1 - FPR_hi) - Phi_inv(FNR_hi)``, clamped at 0. With
    ``delta`` it also reports the epsilon that mu-GDP implies at ``delta``
    (docs/theory.md 2.1): a *model-based* figure, valid only if the mechanism is
    exactly Gaussian-like, labelled as such.
    """
    check_confidence(confidence)
    cal_a, cal_b, cert_a, cert_b = prepare_scores(scores_a, scores_b, calibration, calibration_fraction, seed)
    plan = plan_gdp(cal_a, cal_b, confidence=confidence, threshold=threshold, grid_size=grid_size)
    return finish_gdp(plan, Counts.of(plan, cert_a, cert_b), confidence=confidence, delta=delta,
                      threshold=threshold)


# -- privacy profile -----------------------------------------------------------------
def _check_epsilons(epsilons) -> np.ndarray:
    grid_eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    if grid_eps.size == 0 or not np.all(np.isfinite(grid_eps)) or np.any(grid_eps < 0):
        raise ParameterError("epsilons must be finite numbers >= 0")
    return grid_eps


def plan_profile(cal_a, cal_b, *, confidence: float, grid_size: int = 32) -> ThresholdPlan:
    """Orientation and threshold grid of :func:`profile_lower_bound`, from calibration scores only."""
    beta = 1 - check_confidence(confidence)
    sign = orientation(cal_a, cal_b, beta / 2, _epsilon_objective(0.0))
    return ThresholdPlan(sign, quantile_grid(sign * cal_a, sign * cal_b, grid_size), calibration_sizes(cal_a, cal_b))


def finish_profile(plan: ThresholdPlan, counts: Counts, *, epsilons, confidence: float) -> ProfileBound:
    """Certified ``delta_lb(eps)`` on the epsilon grid from the counts."""
    beta = 1 - check_confidence(confidence)
    grid_eps = _check_epsilons(epsilons)
    split = failure_split(beta, plan)
    fpr_hi = cp_upper(counts.false_positives, counts.trials_a, split["per_rate"])
    fnr_hi = cp_upper(counts.false_negatives, counts.trials_b, split["per_rate"])
    scale = np.exp(grid_eps)[:, None]
    forward = (1 - fnr_hi)[None, :] - scale * fpr_hi[None, :]
    backward = (1 - fpr_hi)[None, :] - scale * fnr_hi[None, :]
    deltas = np.maximum(np.maximum(forward, backward).max(axis=1), 0.0)
    return ProfileBound(
        epsilons=tuple(float(e) for e in grid_eps), delta_lower_bounds=tuple(float(d) for d in deltas),
        confidence=1 - beta, method="profile-clopper-pearson/union", orientation=plan.orientation,
        trials=counts.trials(plan), failure_split=split)


def profile_lower_bound(scores_a, scores_b, *, epsilons, confidence: float = 0.95, calibration=None,
                        calibration_fraction: float = 0.1, grid_size: int = 32, seed: int = 0) -> ProfileBound:
    """Certified ``delta_lb(eps) = max_t (TPR_lo(t) - e^eps FPR_hi(t))`` on an epsilon grid.

    Both directions are taken; the statements hold simultaneously over the
    epsilon grid because they are functions of the same ``2 * grid_size``
    one-sided bounds, each at level ``beta / (2 * grid_size)`` (docs/theory.md 3.3).
    """
    check_confidence(confidence)
    _check_epsilons(epsilons)
    cal_a, cal_b, cert_a, cert_b = prepare_scores(scores_a, scores_b, calibration, calibration_fraction, seed)
    plan = plan_profile(cal_a, cal_b, confidence=confidence, grid_size=grid_size)
    return finish_profile(plan, Counts.of(plan, cert_a, cert_b), epsilons=epsilons, confidence=confidence)

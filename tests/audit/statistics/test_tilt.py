"""Placing a test by the exponential tilt of the calibration scores (``audit.statistics.tilt``).

Statistical checks run at fixed seeds; each tolerance is stated with the sampling error it was derived
from. The placement checks judge a placed test by its *exact* rates (a count of signs, whose law is
binomial), so only the calibration part's noise is in them, not the certification trials'.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, norm

import dpaudit
from dpaudit.attacks.medians import fit_median
from dpaudit.attacks.score_protocol import fitted_tail_model
from dpaudit.auditing.jobs.streaming import ArraySource, StreamingCertifier, certify_source
from dpaudit.auditing.statistics.confidence import Counts, ThresholdPlan
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, finish_epsilon, plan_epsilon
from dpaudit.auditing.statistics.tilt import fit_tilt
from dpaudit.core.errors import ParameterError

SIGNS = 20
SHIFT = (1 - math.exp(-1 / 200)) / 2  # P(sign +) - 1/2 for Laplace(200) noise shifted by 1: parallel Laplace
OUTCOMES = np.arange(SIGNS + 1)
LAW_A, LAW_B = binom.pmf(OUTCOMES, SIGNS, 0.5), binom.pmf(OUTCOMES, SIGNS, 0.5 + SHIFT)
PLANNED = 450_000
CONFIDENCE = 0.975


def _exact_value(plan: ThresholdPlan) -> float:
    """The bound ``plan``'s test certifies at the expected counts of ``PLANNED`` trials per side."""
    oriented, threshold, fraction = plan.sign * OUTCOMES, plan.thresholds[0], plan.fractions[0]
    fpr = LAW_A[oriented > threshold].sum() + fraction * LAW_A[oriented == threshold].sum()
    fnr = LAW_B[oriented < threshold].sum() + (1 - fraction) * LAW_B[oriented == threshold].sum()
    counts = Counts(np.array([fpr * PLANNED]), np.array([fnr * PLANNED]), PLANNED, PLANNED)
    return finish_epsilon(plan, counts, delta=0.0, confidence=CONFIDENCE).epsilon_lower_bound


def _best_exact_value() -> float:
    """The most a deterministic test (threshold, method, region) certifies at the expected counts."""
    best = 0.0
    for sign in (1.0, -1.0):
        for threshold in sign * OUTCOMES:
            plans = [ThresholdPlan(sign, np.array([threshold]), {})] + [
                ThresholdPlan(sign, np.array([threshold]), {}, method="conditional", direction=d) for d in (0, 1)]
            best = max(best, *(_exact_value(plan) for plan in plans))
    return best


def test_the_tilt_reads_a_gaussian_shift():
    # log dP_b/dP_a = mu s - mu^2 / 2 exactly; 5 x 10^4 scores per side: the slope's standard error is
    # 2 / sqrt(10^5) = 0.0063 (reported by the fit, checked to 20%); 4 of them allowed. The tilted tails
    # are the pooled sample's reweighted: sd sqrt(p (1 - p) / 10^5) = 0.0008 at p = 0.07; 5 of them allowed
    rng = np.random.default_rng(11)
    mu = 0.05
    tilt = fit_tilt(rng.normal(0.0, 1.0, 50_000), rng.normal(mu, 1.0, 50_000))
    assert tilt is not None and tilt.p_value > 0.01
    assert tilt.slope_error == pytest.approx(2 / math.sqrt(100_000), rel=0.2)
    assert abs(tilt.slope - mu) <= 4 * tilt.slope_error
    false_positives, false_negatives = tilt.counts(np.array([1.5]), np.array([1.0]), 1, 1)
    assert false_positives[0] == pytest.approx(norm.sf(1.5), abs=5 * 0.0008)
    assert false_negatives[0] == pytest.approx(norm.cdf(1.5 - mu), abs=5 * 0.0008)
    negated = tilt.negated()
    assert negated.slope == -tilt.slope
    # -s >= -1.5 is s <= 1.5: the complement of the test above under either dataset (no ties)
    negated_positives, negated_negatives = negated.counts(np.array([-1.5]), np.array([1.0]), 1, 1)
    assert negated_positives[0] == pytest.approx(1 - false_positives[0])
    assert negated_negatives[0] == pytest.approx(1 - false_negatives[0])


def test_a_clean_shift_seen_in_its_tails_under_one_dataset_only_keeps_its_tilt():
    # 100 scores per side of N(0, 1) and N(2, 1): the pooled top 1% (and often the bottom) sit under one dataset
    # only. Every knot was once kept, the spline's hinge there had no finite fit and the tilt was refused on
    # 200 of 200 seeds (benchmarks/tilt_gate.py --all-knots); such a knot is now left out (kept on 200 of 200)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        assert fit_tilt(rng.normal(0.0, 1.0, 100), rng.normal(2.0, 1.0, 100)) is not None, seed


def test_the_tilt_places_a_gaussian_pair_where_a_hundred_calibration_trials_cannot():
    # N(0, 1) against N(2, 1), 1,000 per side (a tenth calibrates), delta 1e-5: the full-batch model audit's
    # yardstick. Over seeds 0-19 the tilt certified 3.37 on average and the counts 2.69: a paired gap of 0.68,
    # standard error 0.11 (the ideal test's median is 3.40, docs/guide.md). Asserted: a mean gap above 0.35 (3
    # standard errors below the measured one) and a mean above 3.1 (the tilt's spread, 0.35, over sqrt(20):
    # 3.4 standard errors below)
    counted, tilted = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        a, b = rng.normal(0.0, 1.0, 1_000), rng.normal(2.0, 1.0, 1_000)
        counted.append(epsilon_lower_bound(a, b, delta=1e-5, seed=seed).epsilon_lower_bound)
        tilted.append(epsilon_lower_bound(a, b, delta=1e-5, seed=seed, tail_model="tilt").epsilon_lower_bound)
    assert np.mean(tilted) - np.mean(counted) > 0.35
    assert np.mean(tilted) > 3.1


def test_the_tilt_declines_where_the_scores_reject_a_straight_line():
    rng = np.random.default_rng(12)
    # a Laplace shift of 1 at scale 1: the log ratio is flat outside (0, 1), and 5 x 10^4 scores show it
    assert fit_tilt(rng.laplace(0.0, 1.0, 50_000), rng.laplace(1.0, 1.0, 50_000)) is None
    # a value seen under S' only (no finite fit), and a constant score
    base = rng.normal(0.0, 1.0, 20_000)
    assert fit_tilt(base, np.r_[base[:19_000], np.full(1_000, 9.0)]) is None
    assert fit_tilt(np.ones(100), np.ones(100)) is None


def test_a_count_of_signs_is_placed_by_its_tilt_where_its_counts_place_it_by_luck():
    # parallel Laplace's count of signs (20 coordinates, each shifted by 0.0025 in probability): the
    # calibration part (5 x 10^4 per side) resolves no tail. Over seeds 0-31 the placed test's exact value
    # at 4.5 x 10^5 certification trials averaged 0.0143 by the counts (min 0) and 0.0233 by the tilt, the
    # best deterministic test's being 0.0243; the tilt came within 0.83 of it on every seed (a paired gap of
    # 0.009, standard error 0.0015). Here seeds 0-15 (gap 0.0076, standard error about 0.002): the mean gap
    # must exceed 0.004 (2 of them), and every placement reach 0.75 of the best.
    best = _best_exact_value()
    counted, tilted = [], []
    for seed in range(16):
        rng = np.random.default_rng(seed)
        a = rng.binomial(SIGNS, 0.5, 50_000).astype(float)
        b = rng.binomial(SIGNS, 0.5 + SHIFT, 50_000).astype(float)
        plans = [plan_epsilon(a, b, delta=0.0, confidence=CONFIDENCE, planned=(PLANNED, PLANNED), seed=seed,
                              tail_model=model) for model in ("calibration", "tilt")]
        assert plans[0].placement.startswith("calibration") and plans[1].placement == "tilt"
        counted.append(_exact_value(plans[0]))
        tilted.append(_exact_value(plans[1]))
    assert np.mean(tilted) - np.mean(counted) > 0.004
    assert min(tilted) >= 0.75 * best


def test_the_median_score_declares_its_tilt_and_the_audit_records_the_placement():
    rng = np.random.default_rng(5)
    fitted = fit_median(rng.laplace(0.0, 50.0, (2_000, 10)), rng.laplace(1.0, 50.0, (2_000, 10)))
    assert fitted_tail_model(fitted) == "tilt"
    assert fitted_tail_model(lambda outputs: outputs.sum(axis=1)) == "calibration"

    def parallel_laplace(records, rng, trials):
        return float(np.ravel(records)[0]) + rng.laplace(0.0, 10.0, (trials, 10))

    mechanism = dpaudit.from_batched_callable(parallel_laplace, 10, name="parallel-laplace")
    result = dpaudit.audit(mechanism, dataset_pair=(np.array([0.0]), np.array([1.0])), trials=20_000,
                           delta=0.0, score="median", seed=1)
    assert result.empirical.epsilon["placement"] == "tilt"  # the tilt is tried first for this score, and fits


def test_a_tail_model_outside_the_two_is_refused_by_name():
    scores = np.random.default_rng(0).normal(0.0, 1.0, 1_000)
    with pytest.raises(ParameterError, match="tail_model"):
        epsilon_lower_bound(scores, scores + 1, delta=0.0, tail_model="smooth")
    with pytest.raises(ParameterError, match="tail_model"):
        StreamingCertifier(scores, scores, delta=0.0, confidence=0.95, tail_model="spline")

    def bad(outputs):
        return outputs

    bad.tail_model = "linear"
    with pytest.raises(ParameterError, match="tail_model='linear'"):
        fitted_tail_model(bad)


def test_a_source_that_declares_the_tilt_has_its_test_placed_by_it():
    rng = np.random.default_rng(7)
    a, b = rng.binomial(SIGNS, 0.5, 300_000).astype(float), rng.binomial(SIGNS, 0.5 + SHIFT, 300_000).astype(float)

    class Declared(ArraySource):
        def tail_model(self) -> str:
            return "tilt"

    plain = certify_source(ArraySource(a[:30_000], b[:30_000], a[30_000:], b[30_000:]), delta=0.0,
                           confidence=0.95, threshold="split")
    tilted = certify_source(Declared(a[:30_000], b[:30_000], a[30_000:], b[30_000:]), delta=0.0,
                            confidence=0.95, threshold="split")
    assert plain.epsilon.placement.startswith("calibration") and tilted.epsilon.placement == "tilt"


def test_placing_by_the_tilt_keeps_the_bound_at_its_confidence():
    # a count of 3 signs, P(+) 0.5 under S and 0.6 under S': pure epsilon max |log ratio| = 3 log(0.5 / 0.4)
    # = 0.669 (at the count 0). 200 seeded audits, 10^4 trials per side, placed by the tilt: at most 5%
    # may certify above it; with the binomial sd of 200 draws at 0.05 (3.1), 10 + 3 x 3.1 = 19 allowed
    # (seen: 5, the median bound 0.551; the tilt placed 199 of the 200 tests). The placement reads
    # calibration scores only, which is why it cannot break the level.
    truth = 3 * math.log(0.5 / 0.4)
    above = 0
    for seed in range(200):
        rng = np.random.default_rng(1_000 + seed)
        a, b = rng.binomial(3, 0.5, 10_000).astype(float), rng.binomial(3, 0.6, 10_000).astype(float)
        bound = epsilon_lower_bound(a, b, delta=0.0, seed=seed, tail_model="tilt")
        above += bound.epsilon_lower_bound > truth
    assert above <= 19

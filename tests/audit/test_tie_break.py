"""Tests that split an atom: the seeded tie-break, its counts, and placement at the planned budget."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.auditing.statistics.confidence import ThresholdPlan, tie_uniforms
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, plan_epsilon
from dpaudit.auditing.jobs.streaming import ArraySource, certify_source
from dpaudit.auditing.statistics.thresholds import TIE_FRACTIONS, candidate_tests


def _plan(threshold: float, fraction: float, seed: int = 0) -> ThresholdPlan:
    return ThresholdPlan(1.0, np.array([threshold]), {}, tie_fractions=np.array([fraction]), tie_seed=seed)


def test_fraction_one_is_the_deterministic_test():
    scores = np.array([0.0, 1.0, 1.0, 2.0, 3.0])
    plan = _plan(1.0, 1.0)
    old = ThresholdPlan(1.0, np.array([1.0]), {})
    for side in ("a", "b"):
        assert plan.count(side, scores).tolist() == old.count(side, scores).tolist()
    assert plan.count("a", scores).tolist() == [4.0] and plan.count("b", scores).tolist() == [1.0]


def test_a_fraction_of_the_boundary_atom_is_taken_binomially():
    # 20,000 trials on the atom, fraction 0.3: the accepted count is Binomial(20000, 0.3) given the
    # scores (sd 65); 4.5 sd covers it for any seed with probability 1 - 7e-6
    scores = np.r_[np.zeros(10_000), np.ones(20_000), np.full(5_000, 2.0)]
    accepted = _plan(1.0, 0.3).count("a", scores)[0] - 5_000
    assert abs(accepted - 6_000) <= 4.5 * math.sqrt(20_000 * 0.3 * 0.7)
    # side b counts the trials the test does not fire on, with side b's own uniforms
    accepted_b = scores.size - 5_000 - _plan(1.0, 0.3).count("b", scores)[0]
    assert abs(accepted_b - 6_000) <= 4.5 * math.sqrt(20_000 * 0.3 * 0.7) and accepted_b != accepted


def test_uniforms_depend_on_seed_side_and_chunk_only():
    first = tie_uniforms(7, "a", 0, 1_000)
    assert np.array_equal(first, tie_uniforms(7, "a", 0, 1_000))
    for other in (tie_uniforms(8, "a", 0, 1_000), tie_uniforms(7, "b", 0, 1_000), tie_uniforms(7, "a", 1, 1_000)):
        assert not np.array_equal(first, other)
    # independent of the scores: the same uniforms whatever the chunk holds
    scores = np.ones(1_000)
    plan = _plan(1.0, 0.5, seed=7)
    assert plan.count("a", scores, 0)[0] == np.count_nonzero(first < 0.5)


def test_streamed_chunks_each_draw_their_own_uniforms():
    rng = np.random.default_rng(0)
    cal_a, cal_b = rng.integers(0, 3, 2_000).astype(float), rng.integers(0, 3, 2_000).astype(float) + 0.0
    cert = [rng.integers(0, 3, 500).astype(float) for _ in range(4)]
    plan = _plan(1.0, 0.5, seed=3)
    by_hand = sum(plan.count("a", chunk, k)[0] for k, chunk in enumerate(cert[:2]))

    class Chunks(ArraySource):
        def chunks(self, side):
            yield from (cert[:2] if side == "a" else cert[2:])

    source = Chunks(cal_a, cal_b, np.concatenate(cert[:2]), np.concatenate(cert[2:]))
    certification = certify_source(source, delta=0.0, confidence=0.95, threshold="split", seed=3)
    assert certification.trials == {"a": 1_000, "b": 1_000}
    # the same plan applied chunk by chunk: counts add up with chunk k's own uniforms
    from dpaudit.auditing.jobs.streaming import StreamingCertifier

    certifier = StreamingCertifier(cal_a, cal_b, delta=0.0, confidence=0.95, seed=3)
    certifier.plans["epsilon"] = plan
    certifier.counts["epsilon"] = {"a": 0.0, "b": 0.0}
    for chunk in cert[:2]:
        certifier.add("a", chunk)
    assert certifier.counts["epsilon"]["a"][0] == by_hand


def test_candidate_tests_split_atoms_with_expected_counts():
    cal_a = np.r_[np.zeros(600), np.ones(300), np.full(100, 2.0)]
    cal_b = np.r_[np.zeros(300), np.ones(300), np.full(400, 2.0)]
    thresholds, fractions, fp, fn = candidate_tests(cal_a, cal_b)
    assert set(np.unique(thresholds)) == {0.0, 1.0, 2.0}
    rows = (thresholds == 1.0) & np.isclose(fractions, 0.25)
    assert rows.sum() == 1 and 0.25 in TIE_FRACTIONS
    # the test "score > 1, or score == 1 with probability 0.25"
    assert fp[rows][0] == pytest.approx(100 + 0.25 * 300) and fn[rows][0] == pytest.approx(1_000 - 400 - 0.25 * 300)
    deterministic = (thresholds == 1.0) & (fractions == 1.0)
    assert fp[deterministic][0] == 400 and fn[deterministic][0] == 300


def test_the_planned_test_moves_into_the_tail_as_the_budget_grows():
    # outcomes 0 < 1 < 2 with likelihood ratios about 1, 1.5 and 2; the top outcome is rare (0.2% under S):
    # a small certification budget cannot resolve it alone and takes outcomes 1 and 2 together, a large one
    # takes the top outcome alone (its ratio 2 against 1.55). 200,000 calibration trials: rates are sharp.
    n, top = 200_000, 0.002
    cal_a = np.r_[np.zeros(int((0.98 - top) * n)), np.ones(int(0.02 * n)), np.full(int(top * n), 2.0)]
    cal_b = np.r_[np.zeros(int((0.97 - 2 * top) * n)), np.ones(int(0.03 * n)), np.full(int(2 * top * n), 2.0)]
    small = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.95, planned=(5_000, 5_000))
    large = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.95, planned=(1_000_000, 1_000_000))
    assert small.sign == large.sign == 1.0
    assert small.thresholds[0] == 1.0 and large.thresholds[0] == 2.0


def test_bound_with_ties_is_recorded_and_reproducible():
    rng = np.random.default_rng(5)
    law_a, law_b = [0.5, 0.3, 0.2], [0.3, 0.3, 0.4]
    a = rng.choice(3, size=40_000, p=law_a).astype(float)
    b = rng.choice(3, size=40_000, p=law_b).astype(float)
    first = epsilon_lower_bound(a, b, delta=0.0, seed=1)
    again = epsilon_lower_bound(a, b, delta=0.0, seed=1)
    assert first == again
    assert 0.0 <= first.tie_fraction <= 1.0 and "tie_fraction" in first.to_dict()
    # never above the exact epsilon of the pair here (log 2), and clearly positive at 36,000 trials
    assert 0.3 < first.epsilon_lower_bound <= math.log(2.0)


def test_thin_tests_need_a_hundred_calibration_trials_or_a_thousandth_of_them():
    from dpaudit.auditing.statistics.thresholds import thin_tests

    n = 100_000  # floor 100: regions of 28, 1,200 and 89,000 trials, and complements of 20 and 120
    fp, fn = np.array([3.0, 500, 50_000, n - 10, n - 60]), np.array([n - 25.0, n - 700, 1_000, 10, 60])
    assert thin_tests(fp, fn, n, n).tolist() == [True, False, False, True, False]
    # 1,000 per side: the floor is 2 of the 2,000 pooled trials (regions of 0.28, 12, 1,490; complements 0.2, 0.6)
    assert thin_tests(fp / 100, fn / 100, 1_000, 1_000).tolist() == [True, False, False, True, True]
    assert not thin_tests(np.array([1.0]), np.array([n - 1.0]), n, n).any()  # every test thin: none is


def test_a_lucky_handful_in_the_last_tail_is_not_planned_on():
    # 2 x 10^5 calibration scores with a true effect (mean 0.1 apart), and a planted tail of 25 trials of
    # S' against 3 of S: the planned bound of that tail is the largest; it is not a candidate
    from dpaudit.auditing.statistics.thresholds import choose_conditional

    rng = np.random.default_rng(0)
    cal_a, cal_b = rng.normal(0.0, 1.0, 100_000), rng.normal(0.1, 1.0, 100_000)
    cal_a[:3], cal_b[:25] = 10.0, 10.0
    threshold, _, value, _ = choose_conditional(cal_a, cal_b, 0.025, 0.0, (900_000, 900_000))
    assert threshold < 10.0 and 0.0 < value < 0.3
    inside = np.sum(cal_a >= threshold) + np.sum(cal_b >= threshold)
    assert min(inside, 200_000 - inside) >= 100

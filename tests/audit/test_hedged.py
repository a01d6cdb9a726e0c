"""Hedged placement (docs/theory.md 7): a few tests placed on calibration, certified together under a union bound."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.attacks.discrete import fit_discrete
from dpaudit.attacks.score_protocol import fitted_tail_model
from dpaudit.auditing.jobs.streaming import StreamingCertifier
from dpaudit.auditing.statistics.confidence import Counts, ThresholdPlan
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, finish_epsilon, plan_epsilon
from dpaudit.auditing.statistics.hedged import THIN_SPAN, PlanFamily, family_of, splits_end_atom
from dpaudit.auditing.statistics.thresholds import planning_floor, thin_tests


def _members() -> tuple[ThresholdPlan, ThresholdPlan]:
    wide = ThresholdPlan(1.0, np.array([0.0]), {"calibration_a": 10, "calibration_b": 10})
    thin = ThresholdPlan(-1.0, np.array([-2.5]), {"calibration_a": 10, "calibration_b": 10},
                         tie_fractions=np.array([0.5]), tie_seed=3)
    return wide, thin


def test_a_family_counts_member_by_member_and_cuts_its_counts_back():
    wide, thin = _members()
    family = family_of([wide, None, thin, wide])  # None dropped, the repeated plan certified once
    assert isinstance(family, PlanFamily) and family.members == (wide, thin)
    assert family.sign == 1.0 and family.orientation == wide.orientation
    scores = np.random.default_rng(0).normal(size=1_000).round(1)  # ties at the thin member's threshold
    for side in ("a", "b"):
        for chunk in (0, 4):
            expected = np.concatenate([wide.count(side, scores, chunk), thin.count(side, scores, chunk)])
            assert family.count(side, scores, chunk).tolist() == expected.tolist()
    parts = family.parts(Counts.of(family, scores, scores + 0.3))
    assert [p.false_positives.tolist() for p in parts] == [wide.count("a", scores).tolist(),
                                                            thin.count("a", scores).tolist()]
    assert family_of([wide, wide]) is wide  # one distinct plan: no family


def test_the_hedged_bound_is_the_best_member_certified_at_its_share_of_beta():
    rng = np.random.default_rng(1)
    cert_a, cert_b = rng.normal(0.0, 1.0, 200_000), rng.normal(0.2, 1.0, 200_000)
    wide, thin = _members()
    thin = ThresholdPlan(1.0, np.array([2.5]), wide.calibration)
    family = family_of([wide, thin])
    counts = Counts.of(family, cert_a, cert_b)
    hedged = finish_epsilon(family, counts, delta=0.0, confidence=0.95)
    members = [finish_epsilon(m, Counts.of(m, cert_a, cert_b), delta=0.0, confidence=0.975) for m in (wide, thin)]
    alone = [finish_epsilon(m, Counts.of(m, cert_a, cert_b), delta=0.0, confidence=0.95) for m in (wide, thin)]
    assert hedged.epsilon_lower_bound == max(m.epsilon_lower_bound for m in members)
    # the union bound is paid: each member at beta / 2 certifies less than at beta
    assert all(m.epsilon_lower_bound < a.epsilon_lower_bound for m, a in zip(members, alone))
    assert hedged.confidence == 0.95 and hedged.failure_split["tests"] == 2
    assert hedged.failure_split["per_test"] == pytest.approx(0.025)
    assert [h["epsilon_lower_bound"] for h in hedged.hedge] == [m.epsilon_lower_bound for m in members]
    assert hedged.to_dict()["hedge"][hedged.failure_split["reported"]]["threshold"] == hedged.threshold


def test_the_thin_member_keeps_to_tails_below_its_widest_side():
    n = 100_000  # sides (smaller of region and complement) of 28, 1,200, 11,000 and 20 + 60 pooled trials
    fp, fn = np.array([3.0, 500, 10_000, n - 10]), np.array([n - 25.0, n - 700, n - 1_000, 10])
    assert thin_tests(fp, fn, n, n).tolist() == [True, False, False, True]  # the floor of 100
    assert thin_tests(fp, fn, n, n, widest=2_000).tolist() == [True, False, True, True]
    # nothing narrower than ``widest`` but the floor's thin tests: only the floor applies
    assert thin_tests(fp, fn, n, n, widest=1_000).tolist() == [True, False, False, True]


def test_the_wide_member_keeps_to_tests_outside_the_thin_tail():
    n = 100_000  # the sides of the test above: 28, 1,200, 11,000 and 80 pooled trials
    fp, fn = np.array([3.0, 500, 10_000, n - 10]), np.array([n - 25.0, n - 700, n - 1_000, 10])
    assert thin_tests(fp, fn, n, n, narrowest=2_000).tolist() == [True, True, False, True]
    assert thin_tests(fp, fn, n, n, widest=20_000, narrowest=1_000).tolist() == [True, False, False, True]
    # nothing as wide as ``narrowest``: only the floor applies
    assert thin_tests(fp, fn, n, n, narrowest=50_000).tolist() == [True, False, False, True]


def test_a_hedged_plan_placed_in_a_thin_tail_also_certifies_the_best_test_outside_it():
    """S' puts 0.4% of its mass in a far cluster: the counts place the test on that tail (about 110 of
    40,000 pooled calibration trials, below 10 times the planning floor of 40), and the family certifies the
    best test of a wider side too, in case the tail was luck (before, it certified the thin tail alone)."""
    rng = np.random.default_rng(5)
    n = 20_000
    cal_a = rng.normal(0.0, 1.0, n)
    cal_b = np.where(rng.random(n) < 0.004, rng.normal(6.0, 0.3, n), rng.normal(0.1, 1.0, n))
    plan = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.95, tail_model="hedged", planned=(180_000, 180_000))
    members = plan.members if isinstance(plan, PlanFamily) else (plan,)
    span = THIN_SPAN * planning_floor(n, n)

    def side(member: ThresholdPlan) -> int:
        region = int(np.sum(member.sign * cal_a >= member.sign * member.thresholds[0])
                     + np.sum(member.sign * cal_b >= member.sign * member.thresholds[0]))
        return min(region, 2 * n - region)
    sides = sorted(side(m) for m in members)
    assert sides[0] < span <= sides[-1]


def test_hedged_plans_need_a_planned_budget_and_a_split_threshold():
    rng = np.random.default_rng(2)
    cal_a, cal_b = rng.normal(0.0, 1.0, 20_000), rng.normal(0.3, 1.0, 20_000)
    for kwargs in ({}, {"threshold": "union", "planned": (90_000, 90_000)}):
        plan = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.95, tail_model="hedged", **kwargs)
        assert isinstance(plan, ThresholdPlan)
    plan = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.95, tail_model="hedged", planned=(180_000, 180_000))
    members = plan.members if isinstance(plan, PlanFamily) else (plan,)
    assert 1 <= len(members) <= 3
    floor = planning_floor(cal_a.size, cal_b.size)
    thin = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.95, planned=(180_000, 180_000),
                        widest=THIN_SPAN * floor)
    region = np.sum(thin.sign * cal_a >= thin.sign * thin.thresholds[0]) \
        + np.sum(thin.sign * cal_b >= thin.sign * thin.thresholds[0])
    assert floor <= min(region, cal_a.size + cal_b.size - region) < THIN_SPAN * floor
    assert any(m.thresholds[0] == thin.thresholds[0] for m in members)


def test_the_discrete_score_is_placed_hedged_through_the_streaming_certifier():
    rng = np.random.default_rng(3)
    cal_a, cal_b = rng.integers(0, 4, (4_000, 2)), rng.integers(0, 4, (4_000, 2))
    cal_b[:400, 0] = 3  # outcome (3, *) more likely under S'
    score = fit_discrete(cal_a, cal_b, seed=0)
    assert fitted_tail_model(score) == "hedged"
    certifier = StreamingCertifier(score(cal_a), score(cal_b), delta=0.0, confidence=0.95,
                                   planned=(36_000, 36_000), tail_model=fitted_tail_model(score))
    certifier.add("a", score(rng.integers(0, 4, (36_000, 2))))
    b = rng.integers(0, 4, (36_000, 2))
    b[:3_600, 0] = 3
    certifier.add("b", score(b))
    epsilon = certifier.finish().estimates["epsilon"]
    assert epsilon.epsilon_lower_bound > 0.1
    # on this draw the three placements differ; the thin tail's takes part of the top outcome's atom and is
    # left out (splits_end_atom): the other two are certified
    family = certifier.plans["epsilon"]
    assert isinstance(family, PlanFamily) and len(family.members) == 2
    assert not any(splits_end_atom(member, score(cal_a), score(cal_b)) for member in family.members)
    assert epsilon.confidence == 0.95 and len(epsilon.hedge) == 2 and epsilon.failure_split["tests"] == 2


def test_one_shot_bounds_take_the_hedged_model_too():
    rng = np.random.default_rng(4)
    a, b = rng.laplace(0.0, 1.0, 200_000), rng.laplace(0.5, 1.0, 200_000)  # a Laplace shift: pure epsilon 0.5
    hedged = epsilon_lower_bound(a, b, delta=0.0, seed=0, tail_model="hedged")
    assert 0.25 < hedged.epsilon_lower_bound <= 0.5 and hedged.confidence == 0.95


def test_a_test_taking_part_of_the_end_atom_is_recognised_on_either_side():
    calibration = {"calibration_a": 4, "calibration_b": 4}
    cal_a, cal_b = np.array([0.0, 0.0, 1.0, 2.0]), np.array([1.0, 2.0, 2.0, 2.0])  # the top atom: 2.0
    part_of_top = ThresholdPlan(1.0, np.array([2.0]), calibration, tie_fractions=np.array([0.25]))
    assert splits_end_atom(part_of_top, cal_a, cal_b)
    # the whole atom, or part of an atom with values beyond it, is not
    assert not splits_end_atom(ThresholdPlan(1.0, np.array([2.0]), calibration), cal_a, cal_b)
    assert not splits_end_atom(ThresholdPlan(1.0, np.array([1.0]), calibration, tie_fractions=np.array([0.5])),
                               cal_a, cal_b)
    # oriented the other way the bottom atom 0.0 is the end (-0.0 the largest oriented score); a region
    # holding most trials leaves its complement, a part of the bottom atom, as the smaller side
    assert splits_end_atom(ThresholdPlan(-1.0, np.array([0.0]), calibration, tie_fractions=np.array([0.5])),
                           cal_a, cal_b)
    assert splits_end_atom(ThresholdPlan(1.0, np.array([0.0]), calibration, tie_fractions=np.array([0.75])),
                           cal_a, cal_b)


def test_no_hedged_member_takes_part_of_the_end_atom_of_a_few_valued_score():
    """Eleven outcomes, the best (1.5% of the trials, ratio e^0.1) the top atom of the score: the thin-tail
    member used to be a fraction of that atom (at most 1,000 pooled calibration trials of 100,000 per side),
    the same ratio on fewer trials, and cost the other members a third of beta in place of a half."""
    rng = np.random.default_rng(7)
    mass_a = np.array([0.015, 0.035, 0.05, 0.1, 0.2, 0.2, 0.2, 0.1, 0.05, 0.035, 0.015])
    ratio = np.exp(np.linspace(0.1, -0.1, mass_a.size))
    mass_b = mass_a * ratio / np.sum(mass_a * ratio)
    values = np.linspace(1.0, -1.0, mass_a.size)  # a score ordering the outcomes as their ratio
    n = 100_000
    cal_a, cal_b = rng.choice(values, n, p=mass_a), rng.choice(values, n, p=mass_b)
    thin = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.975, planned=(400_000, 400_000),
                        widest=THIN_SPAN * planning_floor(n, n))
    assert splits_end_atom(thin, cal_a, cal_b)  # what the thin member would be
    plan = plan_epsilon(cal_a, cal_b, delta=0.0, confidence=0.975, tail_model="hedged", planned=(400_000, 400_000))
    members = plan.members if isinstance(plan, PlanFamily) else (plan,)
    assert members and not any(splits_end_atom(member, cal_a, cal_b) for member in members)

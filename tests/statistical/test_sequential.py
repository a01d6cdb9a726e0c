"""Stop at the first certified violation: sound looks, and a float leak caught early with default settings.

The looks are planned from the budget (``audit.statistics.sequential.plan_looks``): the final look is
certified at ``1 - beta / 2`` and the earlier ones share the other half equally; a union bound keeps the
whole sequence at ``1 - beta``. The null test runs the
looks of 200 seeded audits of a correct mechanism (vectorised: every seed's trials in one batched
sample) and counts the seeds where any look certifies more than the exact epsilon of the instance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.statistics.confidence import Counts
from dpaudit.auditing.statistics.estimators import finish_epsilon, plan_epsilon
from dpaudit.auditing.statistics.sequential import plan_looks
from dpaudit.mechanisms.accounting.shuffle_exact import shuffled_rr_epsilon

pytestmark = pytest.mark.statistical

BETA = 0.05


def test_looks_are_planned_from_the_budget_only():
    looks = plan_looks(58, 0.95)
    assert looks.chunks == (1, 2, 4, 8, 16, 32, 58)
    # half of beta at the final look, the other half shared by the six earlier ones; all of it adds up to beta
    assert looks.betas == pytest.approx((0.025 / 6,) * 6 + (0.025,)) and sum(looks.betas) == pytest.approx(0.05)
    assert looks.confidence_at(6) == pytest.approx(0.975) and looks.confidence_at(0) == pytest.approx(1 - 0.025 / 6)
    assert plan_looks(1, 0.95).chunks == (1,) and plan_looks(1, 0.95).confidence_at(0) == pytest.approx(0.95)
    record = looks.record(0, 1234)
    assert record["stopped_early"] and record["look_confidence"] == pytest.approx(1 - 0.025 / 6)
    assert looks.record(6, 5678)["look_confidence"] == pytest.approx(0.975)


def test_null_sequential_looks_stay_within_the_failure_probability():
    # randomized response (shuffled-rr with one record): thresholds on its two outputs reach the exact
    # epsilon quickly, so bounds come close to the truth at every look; measured on these seeds, the
    # looks with beta spent half at the last look exceed the truth in 0 of 200 audits (1 of 200 with beta
    # split equally), and the same looks each at the audit's full confidence (no split) in 11 of 200
    seeds, cal, chunk, chunks = 200, 400, 1000, 16
    pair = CanarySpec(kind="input").build(dpaudit.make("shuffled-rr", n=1, epsilon0=1.0), None)
    truth = shuffled_rr_epsilon(1e-6, n=1, epsilon0=1.0, ones=0)
    per_seed = cal + chunk * chunks
    scores = {}
    for side, data in (("a", pair.dataset_a), ("b", pair.dataset_b)):
        outputs = pair.mechanism.sample(data, trials=seeds * per_seed, seed=11 if side == "a" else 12)
        scores[side] = (outputs @ pair.direction).reshape(seeds, per_seed)
    looks = plan_looks(chunks, 1 - BETA)
    excess = 0
    for seed in range(seeds):
        cal_a, cal_b = scores["a"][seed, :cal], scores["b"][seed, :cal]
        bounds = []
        for look, used in enumerate(looks.chunks):
            plan = plan_epsilon(cal_a, cal_b, delta=1e-6, confidence=looks.confidence_at(look))
            cert_a, cert_b = scores["a"][seed, cal:cal + used * chunk], scores["b"][seed, cal:cal + used * chunk]
            bounds.append(finish_epsilon(plan, Counts.of(plan, cert_a, cert_b), delta=1e-6,
                                         confidence=looks.confidence_at(look)).epsilon_lower_bound)
        excess += max(bounds) > truth
    # a sound split fails in at most BETA of the seeds; 3 binomial standard deviations of sampling error
    assert excess / seeds <= BETA + 3 * math.sqrt(BETA * (1 - BETA) / seeds), excess


def leaky(records, rng):
    return [np.clip(records[:, 0], 0.0, 1.0).sum() + rng.laplace(0.0, 1.0)]


def twin(records, rng):
    return [np.round((np.clip(records[:, 0], 0.0, 1.0).sum() + rng.laplace(0.0, 1.0)) * 4096.0) / 4096.0]


PAIR = (np.array([[0.0]]), np.array([[1.0]]))


def test_default_assert_private_catches_a_plain_float_laplace_at_an_early_look():
    with pytest.raises(dpaudit.PrivacyViolation, match=r"stopped early at look 1 of 7, score 'float-bits'") as caught:
        dpaudit.assert_private(dpaudit.from_callable(leaky, 1), epsilon=1.0, delta=1e-5, dataset_pair=PAIR,
                               trials=100_000)
    # Laplace noise of scale 1 on a sum of sensitivity 1 is 1-DP: rounded, the violation is gone (the message
    # says what was found: the low bits, not the noise)
    assert "Rounded to a grid (a post-processing), the violation does not survive: a float artefact" in str(
        caught.value)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_assert_private_passes_the_rounded_twin_on_its_whole_budget(seed):
    summary = dpaudit.assert_private(dpaudit.from_callable(twin, 1), epsilon=1.0, delta=1e-5, dataset_pair=PAIR,
                                     trials=100_000, seed=seed)
    assert not summary["violation"] and summary["trials_used"] == 100_000
    assert summary["looks"]["stopped_at_look"] == summary["looks"]["looks_planned"] == 7

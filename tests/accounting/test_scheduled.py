"""Exact values and claims of scheduled canaries (docs/theory.md 10)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.mechanisms.accounting.builders import pair_claims_for
from dpaudit.mechanisms.accounting.instances import exact_epsilon
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.mechanisms.accounting.scheduled import best_shifts, equivalent_mu, step_differences

DELTA = 1e-5


def _pair(every=None, steps=None, **params):
    mech = mechanisms.make("dp-sgd", **{"n": 100, "batch_size": 100, "steps": 250, "noise_std": 0.1581, **params})
    return mech, CanarySpec(every=every, steps=steps).build(mech, None)


def _claims(mech, pair):
    usual = mech.claims()
    return {claim.name: claim for claim in pair_claims_for(mech.privacy_description, pair.dataset_a, pair.dataset_b,
                                                           str(pair.relation), usual)}


def test_every_5_is_the_gaussian_closed_form_and_below_every_iterate():
    mech, pair = _pair(every=5)
    z = 0.1581 * 100 / 1.0
    mu = math.sqrt(250) / (5 * z)  # = |A| / (z sqrt(T)) with |A| = 50: 0.2
    assert abs(mu - 0.2) < 1e-3
    exact = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA)
    assert abs(exact - float(gaussian_epsilon(DELTA, mu))) < 1e-6
    claims = _claims(mech, pair)
    every_iterate = float(gaussian_epsilon(DELTA, math.sqrt(50) / z))  # mu = 0.447
    assert abs(claims["scheduled-composition"].epsilon(DELTA) - every_iterate) < 1e-9
    assert exact < every_iterate
    assert exact <= claims["scheduled-amplification"].epsilon(DELTA) < every_iterate


def test_dp_lssgd_has_the_exact_value_of_dp_sgd():
    # its release is an invertible image of DP-SGD's (the smoothing is undone), docs/theory.md 10.2
    mech, pair = _pair(every=5, dim=4)
    lssgd = mechanisms.make("dp-lssgd", n=100, batch_size=100, steps=250, noise_std=0.1581, dim=4, smoothing=1.0)
    scheduled = CanarySpec(every=5).build(lssgd, None)
    assert abs(exact_epsilon(lssgd, scheduled.dataset_a, scheduled.dataset_b, DELTA)
               - exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA)) < 1e-9
    reason = _claims(lssgd, scheduled)["scheduled-amplification"].reason
    assert "isotropic" in reason


def test_at_k_1_the_hidden_state_hides_nothing():
    mech, pair = _pair(every=1)
    exact = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA)
    assert abs(exact - _claims(mech, pair)["scheduled-composition"].epsilon(DELTA)) < 1e-6


@pytest.mark.parametrize("k", [1, 2, 5, 25])
def test_best_shifts_of_every_k_have_their_closed_form(k):
    # running sums floor(t / k) Delta: the convex minorant is flat to k - 1, rises Delta / k per step through
    # the corners, and takes the last step at slope Delta: sum a^2 = Delta^2 ((|A| - 1) / k + 1)
    T, count = 100, 100 // k
    differences = np.zeros(T)
    differences[k - 1::k] = 1.0
    shifts = best_shifts(differences)
    assert np.all(shifts >= -1e-15) and abs(shifts.sum() - count) < 1e-9
    assert np.all(np.cumsum(shifts) <= np.cumsum(differences) + 1e-9)
    assert abs(np.sum(shifts**2) - ((count - 1) / k + 1)) < 1e-9


def test_amplification_is_never_below_the_exact_value_of_a_linear_loss():
    for every in (1, 3, 10, 50):
        mech, pair = _pair(every=every)
        exact = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA)
        assert exact <= _claims(mech, pair)["scheduled-amplification"].epsilon(DELTA) + 1e-9
    mech, pair = _pair(steps=[1])
    differences = np.linalg.norm(step_differences(mech.privacy_description, pair.dataset_a, pair.dataset_b), axis=1)
    assert abs(equivalent_mu(differences, 0.1581) - 1 / (15.81 * math.sqrt(250))) < 1e-12


def test_the_concave_loss_is_gaussian_with_expanding_weights_and_no_amplification():
    # theta_T = a^T start - eta sum_t a^(T-t) (noise_t + g_t / m), a = 1 + eta beta: a canary at step 1 only
    mech = mechanisms.make("dp-sgd", n=10, batch_size=10, steps=50, noise_std=0.1, loss="concave", smoothness=5.0)
    pair = CanarySpec(steps=[1]).build(mech, None)
    a, T = 1.5, 50
    mu = a ** (T - 1) * 0.1 / (0.1 * math.sqrt(sum(a ** (2 * j) for j in range(T))))  # -> sqrt(1 - 1/a^2)
    assert abs(mu - math.sqrt(1 - 1 / a**2)) < 1e-6
    exact = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA)
    assert abs(exact - float(gaussian_epsilon(DELTA, mu))) < 1e-6
    claims = _claims(mech, pair)
    assert claims["scheduled-composition"].applicable
    amplification = claims["scheduled-amplification"]
    assert not amplification.applicable and "not convex" in amplification.reason
    assert "steps expand" in amplification.reason and "mu = 0.1414" in amplification.reason
    # the sampler follows the same law: with 20000 trials the mean of theta_T / (eta a^(T-1)) is within
    # 5 standard errors (std s sqrt(sum a^(2j)) / a^(T-1) / sqrt(20000)) of -g / m = -0.1
    out = mech.sample(pair.dataset_a, trials=20_000, seed=5)[:, 0] / (0.1 * a ** (T - 1))
    error = 0.1 * math.sqrt(sum(a ** (2 * j) for j in range(T))) / a ** (T - 1) / math.sqrt(20_000)
    assert abs(out.mean() + 0.1) < 5 * error


def test_the_usual_claims_do_not_describe_a_scheduled_canary():
    mech, pair = _pair(every=5, n=1000, batch_size=10)
    claims = _claims(mech, pair)
    usual = [claim.name for claim in mech.claims()]
    assert "wor-rdp-thm27" in usual
    for name in usual:
        assert not claims[name].applicable and "inserted at chosen steps" in claims[name].reason


def test_pnsgd_with_the_concave_loss_has_a_gaussian_closed_form():
    # the canary's step (index 1) keeps w (its injected gradient replaces the record's), the 19 later steps
    # multiply it by a = 1.5: P_1 = a^19, P_k = a^(20-k) for k >= 2, and mu = 2 L P_1 / (sigma sqrt(sum P_k^2))
    mech = mechanisms.make("pnsgd", n=20, eta=0.1, sigma=1.0, domain="whole", loss="concave", smoothness=5.0)
    pair = CanarySpec(index=1).build(mech, 1)
    a = 1.5
    later = [a**19] + [a ** (20 - k) for k in range(2, 21)]
    mu = 2 * a**19 / math.sqrt(sum(p * p for p in later))
    assert abs(exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA) - float(gaussian_epsilon(DELTA, mu))) < 1e-6
    # the sampler follows it: the statistic's mean over 20000 trials is within 5 standard errors
    # (std / sqrt(20000)) of the closed form's, and its std within 5%
    from dpaudit.mechanisms.accounting.instances import exact_laws

    laws = exact_laws(mech, pair.dataset_a, pair.dataset_b)
    y = laws.statistic(mech.sample(pair.dataset_a, trials=20_000, seed=1))
    assert abs(y.mean() - laws.means_a[-1]) < 5 * laws.std / math.sqrt(20_000)
    assert abs(y.std() / laws.std - 1) < 0.05

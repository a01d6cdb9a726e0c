"""Canaries build the right pairs; scores are oriented; the reset canary is tight."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.attacks.scores import fit_score
from dpaudit.auditing.jobs.api import audit
from dpaudit.mechanisms import ParameterError


@pytest.mark.parametrize("name, params, kind", [
    ("gaussian", {}, "input"), ("laplace", {}, "input"), ("shuffled-rr", {"n": 20}, "input"),
    ("pnsgd", {"n": 5}, "gradient"), ("pnsgd", {"n": 5, "loss": "logistic"}, "input"),
    ("pnsgd", {"n": 5, "loss": "huber"}, "input"), ("pnsgd", {"n": 5, "loss": "quadratic"}, "input"),
    ("multi-epoch-pnsgd", {"n": 5}, "gradient"), ("dp-sgd", {"n": 5, "batch_size": 2}, "gradient"),
    ("dp-lssgd", {"n": 5, "dim": 4, "batch_size": 2}, "input"),
    ("projected-kernel", {"n": 5}, "reset"), ("projected-kernel", {"n": 5, "domain": "box"}, "boundary"),
])
def test_projection_scores_are_larger_under_s_prime(name, params, kind):
    mech = mechanisms.make(name, **params)
    spec = CanarySpec(kind=kind)
    pair = spec.build(mech, spec.indices(mech)[-1])
    a = pair.mechanism.sample(pair.dataset_a, trials=20_000, seed=1) @ pair.direction
    b = pair.mechanism.sample(pair.dataset_b, trials=20_000, seed=2) @ pair.direction
    gap = b.mean() - a.mean()
    spread = math.sqrt((a.var() + b.var()) / 20_000)
    assert gap > 5 * spread, (gap, spread)  # 5 standard errors: the orientation is right
    assert pair.relation == "replace-one"


def test_indices_and_pairs():
    mech = mechanisms.make("pnsgd", n=6)
    assert CanarySpec().indices(mech) == [6]
    assert CanarySpec(index="all").indices(mech) == [1, 2, 3, 4, 5, 6]
    assert CanarySpec(index=[2, 4]).indices(mech) == [2, 4]
    pair = CanarySpec(kind="gradient", pair="zero").build(mech, 3)
    assert np.allclose(pair.dataset_a.injected[3], [1.0]) and np.allclose(pair.dataset_b.injected[3], [0.0])
    removed = CanarySpec(kind="input", pair="remove").build(mechanisms.make("gaussian"), None)
    assert removed.relation == "add-remove" and removed.dataset_a.n == 1
    background = CanarySpec(background="random", seed=4).build(mech, 2)
    assert not np.allclose(background.dataset_a.records, 0)


@pytest.mark.parametrize("spec, mech, message", [
    (dict(kind="reset"), ("pnsgd", {}), "canary kind 'reset' is not supported by mechanism 'pnsgd'"),
    (dict(kind="gradient"), ("gaussian", {}), "canary kind 'gradient' is not supported by mechanism 'gaussian' (supported: 'input')"),
    (dict(pair="remove"), ("pnsgd", {}), "canary pair 'remove' changes the number of records"),
    (dict(kind="boundary"), ("pnsgd", {"domain": "whole"}), "needs a bounded domain"),
    (dict(index=0), ("pnsgd", {"n": 4}), "canary index must be an integer in 1..4 or 'all', got index=0"),
    (dict(direction=[0.0]), ("pnsgd", {}), "canary direction must be a non-zero list"),
    (dict(background="/no/such/file.npy"), ("pnsgd", {}), "canary background must be 'data', 'zeros', 'random' or a file"),
])
def test_canary_errors(spec, mech, message):
    with pytest.raises(ParameterError) as info:
        canary = CanarySpec(**spec)
        mechanism = mechanisms.make(mech[0], **mech[1])
        canary.build(mechanism, canary.indices(mechanism)[0])
    assert message in str(info.value)


def test_fitted_scores_need_calibration_and_exact_needs_a_hook():
    pair = CanarySpec().build(mechanisms.make("pnsgd", n=3), 3)
    with pytest.raises(ParameterError, match="needs calibration trials"):
        fit_score("gaussian", pair)
    with pytest.raises(ParameterError, match="'shuffled-rr' has none"):
        fit_score("exact", CanarySpec(kind="input").build(mechanisms.make("shuffled-rr", n=3), None))
    from dpaudit.mechanisms.accounting.instances import NotExact

    last = CanarySpec().build(mechanisms.make("dp-sgd", n=3, batch_size=1, loss="logistic"), 3)
    with pytest.raises(NotExact, match="needs constant gradients"):
        fit_score("exact", last)(np.zeros((4, 1)))

    flat = CanarySpec().build(mechanisms.make("pnsgd", n=3, dim=2), 3)
    with pytest.raises(NotExact, match="one-dimensional, got dim=2"):
        fit_score("exact", flat)(np.zeros((4, 2)))


def test_exact_score_of_the_gaussian_mechanism_matches_projection():
    mech = mechanisms.make("gaussian", dim=2, sigma=1.5)
    pair = CanarySpec().build(mech, None)
    outputs = mech.sample(pair.dataset_a, trials=100, seed=0)
    exact = fit_score("exact", pair)(outputs)
    projection = fit_score("projection", pair)(outputs)
    # for a Gaussian shift along u the log-likelihood ratio is an increasing affine map of <x, u>
    slope, intercept = np.polyfit(projection, exact, 1)
    assert slope > 0 and np.allclose(exact, slope * projection + intercept)


@pytest.mark.parametrize("t", [1, 4, 7, 10])
def test_reset_canary_certifies_the_exact_mu(t):
    # Issue 4: a reset canary in projected-kernel gives certified mu within 5% of
    # 2 ||u|| / (s sqrt(n - t + 1)). With 2e5 trials per side the mu bound's slack is
    # about 1-2% (Clopper-Pearson half-width at central thresholds).
    mech = mechanisms.make("projected-kernel", n=10, sigma=0.5, shift=1.0, domain="whole")
    exact = 2 * 1.0 / (0.5 * math.sqrt(10 - t + 1))
    result = audit(pair=CanarySpec(kind="reset").build(mech, t), trials=200_000, delta=1e-5, seed=t)
    mu = result.empirical.mu_lower_bound
    assert 0.95 * exact <= mu <= exact

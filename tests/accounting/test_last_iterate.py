"""The last-iterate mixture (``accounting.last_iterate``) against independent computations.

``delta(eps)`` is checked against direct numerical integration of the two
mixtures' densities (``scipy.integrate.quad``) to a relative 1e-3, and the
one-component case against the Gaussian mechanism's closed form.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import binom, norm

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.mechanisms.accounting import instances
from dpaudit.mechanisms.accounting.last_iterate import MixtureLaws, count_mixture
from dpaudit.mechanisms.accounting.profiles import gaussian_delta
from dpaudit.core.errors import NotExact

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _quad_delta(means_a, weights_a, means_b, weights_b, std, epsilon):
    """``max(E_g(P||Q), E_g(Q||P))`` by adaptive quadrature of ``[p - g q]_+`` (no root finding, no tails)."""
    gamma = math.exp(epsilon)

    def density(y, means, weights):
        return float(weights @ norm.pdf(y, means, std))

    low = min(means_a.min(), means_b.min()) - 12 * std
    high = max(means_a.max(), means_b.max()) + 12 * std
    values = []
    for (ma, wa), (mb, wb) in (((means_a, weights_a), (means_b, weights_b)),
                               ((means_b, weights_b), (means_a, weights_a))):
        integrand = lambda y: max(density(y, ma, wa) - gamma * density(y, mb, wb), 0.0)  # noqa: E731
        values.append(integrate.quad(integrand, low, high, limit=1000, epsabs=1e-15, epsrel=1e-9)[0])
    return max(values)


def _dpsgd_toml_pair():
    mech = mechanisms.make("dp-sgd", n=100, dim=4, batch_size=10, steps=50, eta=0.5, noise_std=0.1,
                           sampling="poisson")
    return CanarySpec(kind="gradient", pair="zero").build(mech, mech.n)


@pytest.mark.parametrize("shift_b,rate,steps", [(0.0, 0.1, 50), (-0.1, 0.1, 50), (0.0, 0.02, 200)])
def test_mixture_delta_matches_numerical_integration(shift_b, rate, steps):
    std = 0.1 * math.sqrt(steps)
    laws = count_mixture(0.1, shift_b, steps=steps, rate=rate, std=std)
    counts = np.arange(steps + 1)
    weights = binom.pmf(counts, steps, rate)
    for epsilon in (0.25, 1.0, 2.0, 3.0):
        ours = laws.delta(epsilon)
        theirs = _quad_delta(0.1 * counts, weights, shift_b * counts, weights, std, epsilon)
        assert ours == pytest.approx(theirs, rel=1e-3), epsilon


def test_one_component_is_the_gaussian_mechanism():
    laws = MixtureLaws([0.0], [1.0], [1.5], [1.0], 1.0)
    for epsilon in (0.0, 0.5, 2.0, 5.0):
        assert laws.delta(epsilon) == pytest.approx(float(gaussian_delta(epsilon, 1.5)), rel=1e-9, abs=1e-14)


def test_dp_sgd_example_exact_value_is_the_mixture_and_below_its_claims():
    pair = _dpsgd_toml_pair()
    value = instances.exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, 1e-5)
    # independent: the delta of the quadrature at the reported epsilon is 1e-5 (to 1e-3 relative)
    counts = np.arange(51)
    weights = binom.pmf(counts, 50, 0.1)
    assert _quad_delta(0.1 * counts, weights, 0 * counts, weights, 0.1 * math.sqrt(50), value) == pytest.approx(
        1e-5, rel=1e-3)
    claims = {c.name: c.epsilon(1e-5) for c in pair.mechanism.claims()}
    assert 3.0 < value < claims["sgm-pld"]  # the last iterate is more private than every iterate


def test_lssgd_has_dp_sgds_exact_value_and_its_statistic_undoes_the_smoothing():
    params = dict(n=100, dim=8, batch_size=10, steps=20, eta=0.5, noise_std=0.1, sampling="poisson")
    spec = CanarySpec(kind="gradient", pair="zero")
    values = []
    for name, extra in (("dp-sgd", {}), ("dp-lssgd", {"smoothing": 1.0})):
        pair = spec.build(mechanisms.make(name, **params, **extra), 100)
        values.append(instances.exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, 1e-5))
    assert values[0] == pytest.approx(values[1], rel=1e-12)
    laws = instances.exact_laws(pair.mechanism, pair.dataset_a, pair.dataset_b)
    outputs = pair.mechanism.sample(pair.dataset_a, trials=4000, seed=3)
    y = laws.statistic(outputs)
    # under S: Y = K L / m + N(0, T s^2) with K ~ Binom(20, 0.1): mean 0.2, variance 20 (0.01 * 0.09 + 0.01)
    mean, variance = 20 * 0.1 * 0.1, 20 * (0.01 * 0.1 * 0.9 + 0.01)
    assert abs(y.mean() - mean) < 5 * math.sqrt(variance / 4000)  # five standard errors
    assert y.var() == pytest.approx(variance, rel=5 * math.sqrt(2 / 4000))


def test_multi_epoch_pnsgd_whole_space_is_gaussian():
    mech = mechanisms.make("multi-epoch-pnsgd", n=10, epochs=3, dim=3, eta=0.2, sigma=2.0, domain="whole")
    pair = CanarySpec(kind="gradient").build(mech, 4)
    value = instances.exact_epsilon(mech, pair.dataset_a, pair.dataset_b, 1e-5)
    mu = 3 * 2.0 / (2.0 * math.sqrt(30))  # three uses of a shift 2L, noise sigma sqrt(nE)
    assert float(gaussian_delta(value, mu)) == pytest.approx(1e-5, rel=1e-6)


@pytest.mark.parametrize("name,params,reason", [
    ("dp-sgd", {"domain": "ball"}, "whole space"),
    ("dp-sgd", {"loss": "logistic"}, "constant gradients"),
    ("pnsgd", {"variant": "stop", "sigma": 1.0}, "variant"),
])
def test_instances_outside_the_mixture_say_why(name, params, reason):
    base = {"n": 20, "dim": 2} | ({"batch_size": 5, "steps": 5} if name == "dp-sgd" else {"domain": "whole"})
    mech = mechanisms.make(name, **(base | params))
    pair = CanarySpec(kind="gradient").build(mech, 3)
    with pytest.raises(NotExact, match=reason):
        instances.exact_laws(mech, pair.dataset_a, pair.dataset_b)


def test_without_replacement_needs_a_zero_background():
    mech = mechanisms.make("dp-sgd", n=20, dim=2, batch_size=5, steps=5, sampling="without-replacement")
    pair = CanarySpec(kind="gradient", background="random").build(mech, 3)
    with pytest.raises(NotExact, match="without replacement"):
        instances.exact_laws(mech, pair.dataset_a, pair.dataset_b)


def test_dp_sgd_example_certifies_most_of_its_ceiling():
    """``examples/dp_sgd.toml`` at its 100,000 trials: exact value and ceiling in the result, certified >= 0.85."""
    from dpaudit.auditing.jobs.config import load_configs
    from dpaudit.auditing.jobs.runner import RunOptions, run_audits

    (config,) = load_configs([EXAMPLES / "dp_sgd.toml"])
    result = run_audits([config.job()], RunOptions(store=":memory:", workers=1))[0]
    row = result.per_index[0]
    exact = next(c for c in row.claims if c.kind == "exact-instance")
    assert exact.epsilon == pytest.approx(3.8825, abs=1e-3)
    assert row.ceiling is not None and row.ceiling < exact.epsilon
    assert result.empirical.epsilon_lower_bound >= 0.85 * row.ceiling


@pytest.mark.parametrize("sampling", ["poisson", "without-replacement"])
def test_sampler_counts_follow_the_mixtures_binomial(sampling):
    """The sampler's canary count, read off the statistic at tiny noise, is Binom(T, m/n)."""
    mech = mechanisms.make("dp-sgd", n=10, dim=2, batch_size=3, steps=5, eta=0.5, noise_std=1e-3, sampling=sampling)
    pair = CanarySpec(kind="gradient", pair="zero").build(mech, 10)
    laws = instances.exact_laws(mech, pair.dataset_a, pair.dataset_b)
    trials = 20_000
    counts = np.rint(laws.statistic(mech.sample(pair.dataset_a, trials=trials, seed=11)) * 3).astype(int)
    expected = binom.pmf(np.arange(6), 5, 0.3)
    observed = np.bincount(counts, minlength=6)[:6] / trials
    # each frequency within five binomial standard errors of its probability
    assert np.all(np.abs(observed - expected) <= 5 * np.sqrt(expected * (1 - expected) / trials) + 1e-12)


@pytest.mark.parametrize("name, extra", [("dp-sgd", {}), ("dp-lssgd", {"smoothing": 0.5})])
def test_exact_laws_describe_the_packages_update_only(name, extra):
    """A subclass that keeps the update has the exact laws; one with its own step is refused, not misdescribed."""
    import dataclasses

    mech = mechanisms.make(name, n=20, dim=2, batch_size=5, steps=5, domain="whole", **extra)
    pair = CanarySpec(kind="gradient").build(mech, 3)
    fields = {field.name: getattr(mech, field.name) for field in dataclasses.fields(mech)}
    same = type("Same", (type(mech),), {})(**fields)
    assert same.exact_output_laws(pair.dataset_a, pair.dataset_b) is not None
    own_step = type("OwnStep", (type(mech),), {"direction": lambda self, gradient: 2 * gradient})(**fields)
    with pytest.raises(NotExact, match="OwnStep samples or smooths in its own way"):
        own_step.exact_output_laws(pair.dataset_a, pair.dataset_b)

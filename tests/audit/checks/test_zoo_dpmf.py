"""The DP-MF bug zoo at a budget CI affords: every violating case flagged, every correct one passed.

The full run, every case at its own budget (10^5 trials per side), is ``dpaudit zoo --suite dp-mf``.
The golden values below come from jax_privacy 2.0.0 (jax 0.10.2 with ``jax_enable_x64``, CPU); the call that
produced each is kept beside it, so the NumPy re-creations are checked against the library without this file
needing it.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import optimize

from dpaudit.auditing.checks.zoo import dpmf
from dpaudit.auditing.checks.zoo.dpmf import (
    DELTA,
    DPMF_ZOO,
    RESHUFFLED_EPSILON,
    NoiseCorrelatedByC,
    cyclic_sensitivity_squared,
    reshuffled_epsilon,
    run_dpmf_zoo,
    single_participation_sensitivity,
    toeplitz_matrix,
    toeplitz_minsep_sensitivity_squared,
)
from dpaudit.auditing.statistics.ceiling import gaussian_ceiling
from dpaudit.cli import main
from dpaudit.mechanisms.accounting.builders.matrix import release_mu
from dpaudit.mechanisms.accounting.participation import cyclic_sensitivity
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.mechanisms.accounting.strategies import banded_sqrt_coefficients, lower_matrix
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.dpmf import DPMF

CASES = {case.name: case for case in DPMF_ZOO}
BSR4 = banded_sqrt_coefficients(4)  # toeplitz.optimal_max_error_strategy_coefs(4) = (1, 0.5, 0.375, 0.3125)
#: The CI budget per side of each bug: 10,000 (they stopped at 2,000-5,000 over seeds 0-11), 30,000 for the noise
#: drawn as C z, which no exact score reads (caught at 5,000-19,000 over seeds 0-11; 11 of 12 seeds at 20,000)
CI_TRIALS = {"noise-correlated-by-C": 30_000}
TWIN_TRIALS = 4_000  # a correct twin runs its whole budget; its claim is its true epsilon (a false alarm: <= 5%)


def _ci_trials(case) -> int:
    return CI_TRIALS.get(case.name, 10_000) if case.buggy else TWIN_TRIALS


@pytest.mark.parametrize(("coef", "call", "expected"), [
    # toeplitz.minsep_sensitivity_squared(toeplitz.optimal_max_error_strategy_coefs(4), min_sep=4,
    #                                     max_participations=8)              -> 1.48828125 (PR 238: no n)
    (BSR4, {"min_sep": 4, "max_participations": 8}, 1.48828125),
    # ... and with n=32                                                      -> 11.90625
    (BSR4, {"min_sep": 4, "max_participations": 8, "n": 32}, 11.90625),
    # toeplitz.minsep_sensitivity_squared(jnp.array([1., -.75]), 1, 8, n=16, skip_checks=True) -> 2.0
    ((1.0, -0.75), {"min_sep": 1, "max_participations": 8, "n": 16}, 2.0),
    # ... and with min_sep=2                                                 -> 12.5
    ((1.0, -0.75), {"min_sep": 2, "max_participations": 8, "n": 16}, 12.5),
    # minsep_sensitivity_squared(jnp.array([1., -.5]), 1, 2, n=8, skip_checks=True)      -> 1.5 (true: 3.5)
    ((1.0, -0.5), {"min_sep": 1, "max_participations": 2, "n": 8}, 1.5),
    # minsep_sensitivity_squared(jnp.array([1., 0., 1.]), 1, 2, n=8, skip_checks=True)   -> 4.0 (true: 6.0)
    ((1.0, 0.0, 1.0), {"min_sep": 1, "max_participations": 2, "n": 8}, 4.0),
    # minsep_sensitivity_squared(jnp.array([1., .5]), 4, 4, n=16) -> 5.0, and without n -> 1.25
    ((1.0, 0.5), {"min_sep": 4, "max_participations": 4, "n": 16}, 5.0),
    ((1.0, 0.5), {"min_sep": 4, "max_participations": 4}, 1.25),
])
def test_the_toeplitz_closed_form_is_jax_privacys(coef, call, expected):
    assert toeplitz_minsep_sensitivity_squared(coef, **call) == pytest.approx(expected, rel=1e-12)


def test_the_brute_force_sensitivities_are_jax_privacys_and_dpaudits():
    """``sensitivity.single_participation_sensitivity(C)**2`` -> 1.9438788471567703 and
    ``sensitivity.fixed_epoch_sensitivity(C, 4)**2`` -> 13.80286600802343 for
    ``C = toeplitz.materialize_lower_triangular(toeplitz.optimal_max_error_strategy_coefs(16), 16)``."""
    strategy = toeplitz_matrix(banded_sqrt_coefficients(16), 16)
    assert single_participation_sensitivity(strategy) ** 2 == pytest.approx(1.9438788471567703, rel=1e-12)
    assert cyclic_sensitivity_squared(strategy, 4) == (pytest.approx(13.80286600802343, rel=1e-12), 0)
    # C = Toeplitz (1, 0, -1): columns 0 and 2 are (1, 0, -1, 0) and (0, 0, 1, 0); opposite signs give
    # (1, 0, -2, 0), 5 against 1 for equal ones; dpaudit's sign enumeration agrees
    signed = toeplitz_matrix((1.0, 0.0, -1.0), 4)
    assert cyclic_sensitivity_squared(signed, 2) == (pytest.approx(5.0), 0)
    assert cyclic_sensitivity(signed.T @ signed, 4, 2, dim=1).squared == pytest.approx(5.0)
    # the Toeplitz matrices are dp-mf's own
    mechanism, _ = CASES["noise-correlated-by-C"].build()
    assert np.array_equal(toeplitz_matrix(dpmf.BANDMF_32, 32), lower_matrix(mechanism.strategy_value))


def test_every_case_agrees_with_dpaudits_exact_values():
    """The zoo's brute force and canary against dp-mf's own: the canary is at ``default_index``, the twin's claim
    is ``mf-releases`` (exact), and a cyclic pair's true epsilon is that of its exact law (the noise as drawn)."""
    for case in DPMF_ZOO:
        mechanism, (data_a, data_b) = case.build()
        assert data_a.injected.keys() == data_b.injected.keys() == {mechanism.default_index}, case.name
        mu, value = release_mu(mechanism.privacy_description)
        twin = CASES[case.name.removesuffix(":correct") + ":correct"]
        assert value.exact and twin.claim(mechanism) == pytest.approx(float(gaussian_epsilon(DELTA, mu))), case.name
        if mechanism.selection != "cyclic":
            continue
        fields = {f.name: getattr(mechanism, f.name) for f in dataclasses.fields(DPMF)}
        sampled = dpmf._NoisingMatrixC(**fields) if isinstance(mechanism, NoiseCorrelatedByC) else mechanism
        laws = sampled.exact_output_laws(data_a, data_b)
        exact = float(gaussian_epsilon(DELTA, abs(laws.means_b[0] - laws.means_a[0]) / laws.std))
        assert case.true_epsilon == pytest.approx(exact, rel=1e-6), case.name


def test_the_bug_draws_its_noise_as_c_z():
    """Noisy gradients read back from the iterates on zero records, whitened by ``C^{-1}`` (the bug) or by ``C``
    (dp-mf), are ``N(0, I)``: every entry of their sample covariance within 6 standard errors (``sqrt(2 / N)``)."""
    trials = 20_000
    bug, (data, _) = CASES["noise-correlated-by-C"].build()
    correct, _ = CASES["noise-correlated-by-C:correct"].build()
    strategy = toeplitz_matrix(dpmf.BANDMF_32, 32)
    scale = bug.batch_size / (bug.noise_multiplier * bug.lipschitz)
    for mechanism, whiten in ((bug, np.linalg.inv(strategy)), (correct, strategy)):
        zero = Dataset(np.zeros_like(data.records))
        thetas = np.hstack([np.zeros((trials, 1)), mechanism.sample(zero, trials=trials, seed=3)])
        gradients = (thetas[:, :-1] - thetas[:, 1:]) / mechanism.eta
        whitened = gradients @ whiten.T * scale
        assert np.abs(np.cov(whitened.T) - np.eye(32)).max() < 6 * math.sqrt(2 / trials), type(mechanism).__name__


def test_the_reshuffled_release_stays_within_the_cyclic_claim():
    """A fresh Monte Carlo estimate (2e5 draws, another seed) agrees with the stored one within 4 standard errors
    of the difference, and both lie more than 4 of their standard errors below the cyclic claim."""
    case = CASES["reshuffled-epochs"]
    mechanism, _ = case.build()
    estimate, error = reshuffled_epsilon(toeplitz_matrix(dpmf.BANDMF_16, 16), epochs=4,
                                         noise_multiplier=mechanism.noise_multiplier, samples=200_000, seed=1)
    stored, stored_error = RESHUFFLED_EPSILON
    assert abs(estimate - stored) < 4 * math.hypot(error, stored_error)
    claim = case.claim(mechanism)
    assert estimate + 4 * error < claim and stored + 4 * stored_error < claim and case.true_epsilon == stored
    # one slot per epoch: no mixture, the estimate is the Gaussian's
    one, one_error = reshuffled_epsilon(np.eye(4), epochs=4, noise_multiplier=2.0, samples=200_000, seed=2)
    assert abs(one - float(gaussian_epsilon(DELTA, 1.0))) < 4 * one_error


def test_the_ci_budgets_suffice():
    """At its CI budget each bug's true value has an oracle ceiling (docs/theory.md 3.4) at least 0.5 above its
    claim: the audit, which keeps a tenth for calibrating and looks several times, is then left a margin."""
    for case in DPMF_ZOO:
        if not case.buggy or case.name == "reshuffled-epochs":
            continue
        mechanism, _ = case.build()
        mu = optimize.brentq(lambda m: float(gaussian_epsilon(DELTA, m)) - case.true_epsilon, 0.01, 10.0)
        ceiling = gaussian_ceiling(mu, trials=_ci_trials(case), delta=DELTA)
        assert ceiling > case.claim(mechanism) + 0.5, (case.name, ceiling)


def test_every_bug_is_caught_and_every_twin_passes_at_a_ci_budget():
    results = {}
    for case in DPMF_ZOO:
        (results[case.name],) = run_dpmf_zoo(cases=[case], trials=_ci_trials(case))
    statuses = {name: result.status for name, result in results.items()}
    assert statuses == {
        "jax-privacy-pr238-sep-sensitivity": "caught", "jax-privacy-pr238-sep-sensitivity:correct": "passed",
        "one-participation-claim": "caught", "one-participation-claim:correct": "passed",
        "toeplitz-closed-form-non-monotone": "caught", "toeplitz-closed-form-non-monotone:correct": "passed",
        "noise-correlated-by-C": "caught", "noise-correlated-by-C:correct": "passed",
        "reshuffled-epochs": "within-claim", "reshuffled-epochs:correct": "passed"}
    assert not any(result.failed for result in results.values())
    # the bugs stop early; the twins certify well below their claim (= their true epsilon)
    assert all(r.trials_used < r.trials for r in results.values() if r.status == "caught")
    assert all(r.epsilon_lower_bound < r.claimed_epsilon - 1 for r in results.values() if not r.buggy)


def test_the_command_prints_json_and_refuses_unknown_names(capsys):
    assert main(["zoo", "--suite", "dp-mf", "--only", "one-participation-claim:correct", "--trials", "2000",
                 "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["suite"] == "dp-mf" and document["failed"] == []
    (case,) = document["cases"]
    assert case["name"] == "one-participation-claim:correct" and case["status"] == "passed"
    assert case["true_epsilon"] == pytest.approx(case["claimed_epsilon"])
    assert main(["zoo", "--suite", "dp-mf", "--only", "nothing-like-this"]) == 2
    assert main(["zoo", "--suite", "dp-mf", "--screen-trials", "100"]) == 2

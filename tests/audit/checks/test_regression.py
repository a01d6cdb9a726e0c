"""assert_private and the pytest plugin: pass on correct mechanisms, fail readably on broken ones."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit import PrivacyViolation, assert_private, mechanisms
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon


def test_assert_private_passes_a_correct_mechanism_and_returns_the_audit():
    mech = mechanisms.make("gaussian", sigma=2.0)  # replace-one mu = 1
    summary = assert_private(mech, epsilon=float(gaussian_epsilon(1e-5, 1.0)), delta=1e-5, trials=50_000)
    assert 0 < summary["epsilon_lower_bound"] < summary["claimed_epsilon"] and not summary["violation"]


def test_assert_private_raises_a_readable_violation():
    mech = mechanisms.make("gaussian", sigma=1.0)  # replace-one mu = 2, true epsilon 10 at 1e-5
    with pytest.raises(PrivacyViolation) as info:
        assert_private(mech, epsilon=1.0, delta=1e-5, trials=50_000, seed=3)
    message = str(info.value)
    assert "is not (1, 1e-05)-DP: certified epsilon >=" in message
    assert "confidence 0.95" in message and "seed=3" in message and "trials=50000" in message
    assert isinstance(info.value, AssertionError)


def test_assert_private_with_a_user_function_and_dataset_pair():
    def leaky_mean(data, rng):  # forgot the noise on the second coordinate
        return [data.mean() + rng.laplace(scale=10.0), data.mean()]

    mech = mechanisms.from_callable(leaky_mean, 2)
    with pytest.raises(PrivacyViolation):
        assert_private(mech, epsilon=1.0, delta=1e-5, dataset_pair=(np.zeros((4, 1)), np.ones((4, 1))),
                       trials=3000)
    with pytest.raises(ParameterError, match="needs dataset_pair"):
        assert_private(mech, epsilon=1.0, delta=1e-5, trials=100)


PLUGIN_TESTS = """
import pytest
from dpaudit import mechanisms
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

pytestmark = pytest.mark.dp_audit(trials=20_000, seed=1)

def test_correct(dp_audit):
    dp_audit(mechanisms.make("gaussian", sigma=2.0), epsilon=float(gaussian_epsilon(1e-5, 1.0)), delta=1e-5)

def test_broken(dp_audit):
    # noise four times too small for the claim
    dp_audit(mechanisms.make("gaussian", sigma=0.5), epsilon=float(gaussian_epsilon(1e-5, 1.0)), delta=1e-5)
"""


def test_plugin_passes_correct_and_fails_broken_with_a_summary(pytester):
    pytester.makepyfile(test_dp=PLUGIN_TESTS)
    result = pytester.runpytest("-q", "--dp-audit-split", "-p", "no:randomly")  # the summary lists tests in order
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*PrivacyViolation: gaussian is not (4.37*, 1e-05)-DP: certified epsilon >=*",
        "*dpaudit privacy audits*",
        "ok*test_correct*confidence 0.975*20000 trials*",
        "VIOLATION*test_broken*",
    ])


ANYTIME_TESTS = """
import dpaudit

def test_correct_anytime(dp_audit):
    # Laplace of scale 1 is exactly 2-DP for its replace-one canary
    dp_audit(dpaudit.make("laplace", scale=1.0), epsilon=2.0, delta=0.0, design=dpaudit.Anytime(budget=4_000))

def test_broken_anytime(dp_audit):
    dp_audit(dpaudit.make("laplace", scale=1.0), epsilon=1.0, delta=0.0, design=dpaudit.Anytime(budget=20_000))
"""


def test_plugin_takes_the_anytime_design_and_keeps_its_summary_under_xdist(pytester):
    pytester.makepyfile(test_any=ANYTIME_TESTS)
    result = pytester.runpytest_subprocess("-q", "-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*dpaudit privacy audits*"])
    result.stdout.fnmatch_lines(["*ok*test_correct_anytime*anytime-valid*"])
    result.stdout.fnmatch_lines(["*VIOLATION*test_broken_anytime*anytime-valid: epsilon is at least*first certified "
                                 "at trial*"])

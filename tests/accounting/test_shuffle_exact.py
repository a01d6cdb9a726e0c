"""Shuffled randomized response: the exact claim against an mpmath enumeration, and every claim above it."""

from __future__ import annotations

import math

import mpmath
import pytest

from dpaudit import mechanisms
from dpaudit.mechanisms.accounting.shuffle_exact import shuffled_rr_delta, shuffled_rr_epsilon

mpmath.mp.dps = 40


def _mp_delta(epsilon: float, n: int, epsilon0: float, ones: int) -> mpmath.mpf:
    """delta(eps) of one background, by direct enumeration in 40-digit arithmetic."""
    p = mpmath.e ** epsilon0 / (1 + mpmath.e ** epsilon0)
    rest = [mpmath.mpf(0)] * n  # law of R = Bin(ones, p) + Bin(n - 1 - ones, 1 - p)
    for x in range(ones + 1):
        px = mpmath.binomial(ones, x) * p**x * (1 - p) ** (ones - x)
        for y in range(n - ones):
            rest[x + y] += px * mpmath.binomial(n - 1 - ones, y) * (1 - p) ** y * p ** (n - 1 - ones - y)
    law_s = [p * (rest[c - 1] if c > 0 else 0) + (1 - p) * (rest[c] if c < n else 0) for c in range(n + 1)]
    law_t = [(1 - p) * (rest[c - 1] if c > 0 else 0) + p * (rest[c] if c < n else 0) for c in range(n + 1)]
    gamma = mpmath.e ** mpmath.mpf(epsilon)
    forward = sum(max(a - gamma * b, 0) for a, b in zip(law_s, law_t))
    backward = sum(max(b - gamma * a, 0) for a, b in zip(law_s, law_t))
    return max(forward, backward)


@pytest.mark.parametrize("n", [10, 50, 200])
@pytest.mark.parametrize("epsilon0", [1.0, 3.0])
def test_exact_claim_matches_mpmath(n, epsilon0):
    for ones in sorted({0, n // 3, n - 1}):
        for epsilon in (0.05, 0.5 * epsilon0):
            reference = _mp_delta(epsilon, n, epsilon0, ones)
            value = shuffled_rr_delta(epsilon, n=n, epsilon0=epsilon0, ones=ones)
            assert value == pytest.approx(float(reference), rel=1e-9, abs=1e-300)
        # epsilon mode: the bisection's root, checked against the reference profile at the root
        target = 1e-5
        root = shuffled_rr_epsilon(target, n=n, epsilon0=epsilon0, ones=ones)
        if root > 0:
            assert _mp_delta(root, n, epsilon0, ones) <= target * (1 + 1e-9)
            assert _mp_delta(root - 1e-9, n, epsilon0, ones) > target * (1 - 1e-9)


@pytest.mark.parametrize("n", [10, 50, 200])
@pytest.mark.parametrize("epsilon0", [1.0, 3.0])
def test_every_claim_is_at_least_the_exact_value(n, epsilon0):
    mech = mechanisms.make("shuffled-rr", n=n, epsilon0=epsilon0)
    exact_eps = shuffled_rr_epsilon(1e-5, n=n, epsilon0=epsilon0)
    for claim in mech.claims():
        entry = claim.evaluate(delta=1e-5).to_dict()
        if entry["applicable"] and entry["epsilon"] is not None:
            assert entry["epsilon"] >= exact_eps - 1e-9, (claim.name, entry["epsilon"], exact_eps)
        for epsilon in (0.1, 0.5, 1.0, 2.5):
            entry = claim.evaluate(epsilon=epsilon).to_dict()
            if entry["applicable"]:
                assert entry["delta"] >= shuffled_rr_delta(epsilon, n=n, epsilon0=epsilon0) * (1 - 1e-9), claim.name


def test_published_values():
    # the exact privacy is far below eps0 (numbers quoted when the claim was added)
    assert shuffled_rr_epsilon(1e-5, n=50, epsilon0=1.0) == pytest.approx(0.636, abs=1e-3)
    assert shuffled_rr_epsilon(1e-5, n=200, epsilon0=1.0) == pytest.approx(0.267, abs=1e-3)
    assert math.isclose(shuffled_rr_delta(1.0, n=10, epsilon0=1.0), 0.0, abs_tol=1e-15)


@pytest.mark.parametrize("n", [10, 50, 200])
@pytest.mark.parametrize("epsilon0", [1.0, 3.0])
def test_numerical_clones_bound_against_an_independent_enumeration(n, epsilon0):
    """The clones bound, recomputed term by term in 40 digits, and it never falls below the exact value."""
    from dpaudit.mechanisms.accounting.shuffle_exact import clones_delta

    epsilon = 0.3 * epsilon0
    gamma = mpmath.e ** mpmath.mpf(epsilon)
    alpha = mpmath.e ** epsilon0 / (1 + mpmath.e ** epsilon0)
    clone = mpmath.e ** (-epsilon0)
    total = mpmath.mpf(0)
    for c in range(n):
        weight = mpmath.binomial(n - 1, c) * clone**c * (1 - clone) ** (n - 1 - c)
        half = [mpmath.binomial(c, a) / mpmath.mpf(2) ** c for a in range(c + 1)]
        p = [alpha * (half[a] if a <= c else 0) + (1 - alpha) * (half[a - 1] if a >= 1 else 0) for a in range(c + 2)]
        q = [(1 - alpha) * (half[a] if a <= c else 0) + alpha * (half[a - 1] if a >= 1 else 0) for a in range(c + 2)]
        total += weight * sum(max(x - gamma * y, 0) for x, y in zip(p, q))
    assert clones_delta(epsilon, n=n, epsilon0=epsilon0) == pytest.approx(float(total), rel=1e-9, abs=1e-17)
    assert clones_delta(epsilon, n=n, epsilon0=epsilon0) >= shuffled_rr_delta(epsilon, n=n, epsilon0=epsilon0)

"""Exact profiles, RDP curves and conversions against golden values.

Golden values come from independent sources: docs/theory.md 2.1/2.3/2.6 (which
quotes them), mpmath quadrature, and dp-accounting (a test-only dependency).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import log_ndtr as scipy_log_ndtr

from dpaudit.mechanisms.accounting import conversions as conv
from dpaudit.mechanisms.accounting import profiles, rdp
from dpaudit.mechanisms.accounting.tight import wor_gaussian_rdp


# docs/theory.md 2.1 golden values (Balle & Wang Thm 8 evaluated with mpmath by the theory notes)
@pytest.mark.parametrize("eps, mu, expected", [
    (0.0, 1.0, 0.382924922548),
    (1.0, 1.0, 0.126936737507),
    (2.0, 1.0, 0.0209236358211),
    (1.0, 0.5, 0.00682959498311),
])
def test_gaussian_profile_golden(eps, mu, expected):
    assert profiles.gaussian_delta(eps, mu) == pytest.approx(expected, rel=1e-10)


def test_laplace_profile_golden_and_inverse():
    assert profiles.laplace_delta(0.5, 1.0) == pytest.approx(0.221199216929, rel=1e-10)
    assert profiles.laplace_epsilon(0.221199216929, 1.0) == pytest.approx(0.5, abs=1e-10)
    assert profiles.laplace_delta(1.0, 1.0) == 0.0


def _mp_gaussian_delta(eps, mu):
    mpmath.mp.dps = 60
    eps, mu = mpmath.mpf(eps), mpmath.mpf(mu)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("eps, mu", [(50.0, 3.0), (20.0, 1.0), (5.0, 0.3), (30.0, 2.0),
                                     (50.0, 0.5), (1.0, 0.01), (20.0, 0.1), (0.0, 0.01), (0.1, 10.0)])
def test_gaussian_profile_tails_match_mpmath(eps, mu):
    # Where Phi(-eps/mu + mu/2) and e^eps Phi(-eps/mu - mu/2) nearly cancel (the lower
    # tail, small mu), subtracting two log_ndtr values of size 5e3 lost up to 1e-8
    # absolute; the erfcx ratio keeps the log profile to about 1e-14 relative.
    got = profiles.gaussian_log_delta(eps, mu)
    expected = float(mpmath.log(_mp_gaussian_delta(eps, mu)))
    assert got == pytest.approx(expected, rel=1e-13)


def test_profiles_are_finite_at_extremes():
    assert np.isfinite(profiles.gaussian_log_delta(50.0, 1.0))
    assert profiles.gaussian_delta(50.0, 1.0) >= 0.0
    eps = profiles.gaussian_epsilon(1e-300, 1.0)
    assert np.isfinite(eps) and eps > 30
    assert profiles.gaussian_log_delta(eps, 1.0) <= math.log(1e-300) + 1e-9
    assert profiles.gaussian_delta(1.0, 0.0) == 0.0
    assert profiles.gaussian_delta(1.0, np.inf) == 1.0


def test_gaussian_epsilon_inverts_and_rounds_up():
    for mu, delta in [(0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-5), (1.0, 0.3)]:
        eps = profiles.gaussian_epsilon(delta, mu)
        assert profiles.gaussian_delta(eps, mu) <= delta  # rounded the safe way
        assert profiles.gaussian_delta(eps - 1e-9, mu) > delta * (1 - 1e-6)
    # docs/theory.md 3.4 table: true eps at delta 1e-5
    assert profiles.gaussian_epsilon(1e-5, 0.5) == pytest.approx(1.993, abs=1e-3)
    assert profiles.gaussian_epsilon(1e-5, 1.0) == pytest.approx(4.377, abs=1e-3)
    assert profiles.gaussian_epsilon(1e-5, 2.0) == pytest.approx(9.997, abs=1e-3)


def test_laplace_rdp_matches_mironov_form():
    alphas = np.array([1.5, 2.0, 3.0, 10.0])
    eps0 = 0.7
    expected = [math.log(a / (2 * a - 1) * math.exp((a - 1) * eps0)
                         + (a - 1) / (2 * a - 1) * math.exp(-a * eps0)) / (a - 1) for a in alphas]
    np.testing.assert_allclose(rdp.laplace_rdp(alphas, eps0), expected, rtol=1e-12)


def test_subsampled_gaussian_matches_dp_accounting_integer_orders():
    from dp_accounting.rdp import rdp_privacy_accountant as ref

    orders = [2.0, 5.0, 50.0]
    ours = rdp.subsampled_gaussian_rdp(orders, sample_rate=0.01, noise_multiplier=2.5, steps=50)
    # dp_accounting: q=0.01, z=2.5, 50 steps, alpha in [2.5, 5, 50] -> [1.08548710e-3, 2.18075656e-3,
    # 2.38460375e-2] (docs/theory.md 2.6); integer orders agree exactly
    np.testing.assert_allclose(ours[1:], [2.18075656e-3, 2.38460375e-2], rtol=1e-8)
    np.testing.assert_allclose(
        ours, 50 * ref._compute_rdp_poisson_subsampled_gaussian(0.01, 2.5, orders), rtol=1e-10)


def test_subsampled_gaussian_fractional_order_matches_quadrature():
    # A_alpha = E_{x~N(0,z^2)}[((1-q) + q exp((2x-1)/(2z^2)))^alpha] by mpmath quadrature
    mpmath.mp.dps = 40
    q, z, a = mpmath.mpf("0.01"), mpmath.mpf("2.5"), mpmath.mpf("2.5")
    f = lambda x: mpmath.npdf(x, 0, z) * ((1 - q) + q * mpmath.exp((2 * x - 1) / (2 * z * z))) ** a
    cut = z * z * mpmath.log(1 / q - 1) + 0.5
    exact = float(50 * mpmath.log(mpmath.quad(f, [-mpmath.inf, -20, 0, cut, 20, 60, mpmath.inf])) / (a - 1))
    ours = rdp.subsampled_gaussian_rdp([2.5], sample_rate=0.01, noise_multiplier=2.5, steps=50)[0]
    assert ours == pytest.approx(exact, rel=1e-9)  # 1.0854180569e-3
    # dp-accounting 0.6 adds the series terms without their signs: an upper bound (1.08548710e-3)
    assert ours <= 1.08548710e-3


def _term_by_term_log_a(q: float, z: float, alpha: float) -> float:
    """The fractional-order series of MTZ Sec. 3.3 summed one term at a time (the reference of the blocked one)."""
    log_a0 = log_a1 = -math.inf
    z0 = z * z * math.log(1 / q - 1) + 0.5
    def log_half_erfc(x: float) -> float:  # log(erfc(x) / 2), as log(1/2) + log(erfc(x))
        return math.log(0.5) + (math.log(2.0) + float(scipy_log_ndtr(-x * math.sqrt(2.0))))
    for i in range(10_001):
        k = np.array([float(i)])
        sign, log_coef, j = float(rdp._binom_sign(alpha, k)[0]), float(rdp._log_abs_binom(alpha, k)[0]), alpha - i
        log_e0 = log_half_erfc((i - z0) / (math.sqrt(2) * z))
        log_e1 = log_half_erfc((z0 - j) / (math.sqrt(2) * z))
        log_s0 = log_coef + i * math.log(q) + j * math.log1p(-q) + (i * i - i) / (2 * z * z) + log_e0
        log_s1 = log_coef + j * math.log(q) + i * math.log1p(-q) + (j * j - j) / (2 * z * z) + log_e1
        log_a0, log_a1 = rdp._log_add_signed(log_a0, log_s0, sign), rdp._log_add_signed(log_a1, log_s1, sign)
        if max(log_s0, log_s1) < -30:
            break
    return float(np.logaddexp(log_a0, log_a1))


def test_blocked_fractional_series_is_the_term_by_term_sum_bit_for_bit():
    # the series is computed a block of terms at a time and added in order: the same floats as one term at a
    # time, over rates, noises and orders whose series end in the first block and several blocks later
    from dpaudit.mechanisms.accounting.rdp import _SERIES_BLOCK

    cases = [(q, z, a) for q in (1e-3, 0.05, 0.5) for z in (0.4, 1.0, 4.0) for a in (1.05, 2.5, 11.95, 60.5)]
    assert max(_terms(q, z, a) for q, z, a in cases) > 2 * _SERIES_BLOCK  # some run past two blocks
    for q, z, a in cases:
        assert rdp._log_a_fractional(q, z, a) == _term_by_term_log_a(q, z, a), (q, z, a)


def _terms(q: float, z: float, alpha: float) -> int:
    sign, log_s0, log_s1 = rdp._series_terms(q, z, alpha, 0, 10_001)
    return int(np.flatnonzero(np.maximum(log_s0, log_s1) < -30)[0]) + 1


def test_opacus_golden_epsilon():
    # Opacus RDP accountant: q=0.04, z=1.5, T=2250, delta=1e-5 -> eps = 7.32911, with its orders
    orders = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), dtype=float)
    curve = rdp.subsampled_gaussian_rdp(orders, sample_rate=0.04, noise_multiplier=1.5, steps=2250)
    assert conv.cks_epsilon(1e-5, orders, curve) == pytest.approx(7.32911, abs=2e-5)


def test_subsampling_limits():
    orders = np.array([1.5, 2.0, 8.0])
    np.testing.assert_array_equal(rdp.subsampled_gaussian_rdp(orders, sample_rate=0.0, noise_multiplier=1.0), 0)
    np.testing.assert_allclose(rdp.subsampled_gaussian_rdp(orders, sample_rate=1.0, noise_multiplier=2.0),
                               rdp.gaussian_rdp(orders, 0.5))
    np.testing.assert_array_equal(wor_gaussian_rdp(orders, dataset_size=100, sample_size=0, noise_multiplier=1.0), 0)


def _wbk_thm9(order: int, gamma: float, mu: float) -> float:
    """Wang, Balle, Kasiviswanathan 2019, Thm 9 for a Gaussian base (eps(j) = j mu^2 / 2), integer order.

    A cross-check only: the claims use dp-accounting's Thm 27 (``tight.wor_gaussian_rdp``)."""
    eps2 = mu * mu
    terms = [0.0, 2 * math.log(gamma) + math.log(math.comb(order, 2))
             + min(math.log(4 * math.expm1(eps2)), math.log(2) + eps2)]
    terms += [j * math.log(gamma) + math.log(math.comb(order, j)) + (j - 1) * j * mu * mu / 2 + math.log(2)
              for j in range(3, order + 1)]
    return float(np.logaddexp.reduce(terms)) / (order - 1)


@pytest.mark.parametrize("n, m, z", [(1000, 100, 2.0), (10_000, 100, 2.0), (60_000, 128, 1.2), (50, 25, 4.0)])
def test_without_replacement_rdp_is_dp_accountings_and_never_above_wbk_thm9(n, m, z):
    # the same relation (replace-one, fixed-size samples): Thm 27 is at most Thm 9 and equal at order 2
    orders = [2, 3, 5, 10, 32, 100]
    theirs = wor_gaussian_rdp(orders, dataset_size=n, sample_size=m, noise_multiplier=z)
    thm9 = np.array([_wbk_thm9(order, m / n, 1 / z) for order in orders])
    assert np.all(theirs <= thm9 * (1 + 1e-12))
    assert theirs[0] == pytest.approx(thm9[0], rel=1e-9)
    # fractional orders interpolate the cumulant (alpha - 1) eps(alpha) linearly (WBK Corollary 10)
    mid, = wor_gaussian_rdp([4.5], dataset_size=n, sample_size=m, noise_multiplier=z)
    low, high = wor_gaussian_rdp([4.0, 5.0], dataset_size=n, sample_size=m, noise_multiplier=z)
    assert mid * 3.5 == pytest.approx(0.5 * (3 * low + 4 * high))
    # steps compose linearly
    np.testing.assert_allclose(wor_gaussian_rdp(orders, dataset_size=n, sample_size=m, noise_multiplier=z, steps=7),
                               7 * theirs)


def test_poisson_series_is_dp_accountings_at_integer_orders():
    """The project's MTZ series against dp-accounting's Poisson-subsampled Gaussian, on a grid of q and z.

    Integer orders: both sum the same finite binomial series, so they agree to float accuracy (rtol 1e-9).
    At fractional orders the library is looser (the series here keeps exact signed terms); see rdp.py."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = np.array([2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    for q in (1e-3, 0.01, 0.1, 0.5):
        for z in (0.7, 1.0, 2.0, 5.0):
            accountant = rdp_privacy_accountant.RdpAccountant(orders=list(orders))
            accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), 3)
            ours = rdp.subsampled_gaussian_rdp(orders, sample_rate=q, noise_multiplier=z, steps=3)
            np.testing.assert_allclose(ours, accountant.rdp, rtol=1e-9, err_msg=f"q={q}, z={z}")


# docs/theory.md 2.3: Gaussian mu=1, eps=1: exact 0.1269, optimal 0.2149, CKS 0.2468, Mironov 0.8825
def test_conversion_golden_values():
    orders = np.linspace(1.001, 20, 40_000)
    curve = rdp.gaussian_rdp(orders, 1.0)
    assert conv.mironov_delta(1.0, orders, curve) == pytest.approx(0.8825, abs=1e-4)
    assert conv.cks_delta(1.0, orders, curve) == pytest.approx(0.2468, abs=1e-4)
    best = min(conv.optimal_delta(1.0, a, a / 2) for a in np.linspace(1.5, 4.0, 26))
    assert best == pytest.approx(0.2149, abs=1e-3)


def test_conversions_invert_each_other():
    orders = rdp.DEFAULT_ORDERS
    curve = rdp.gaussian_rdp(orders, 0.8)
    for delta in (1e-3, 1e-6):
        eps = conv.cks_epsilon(delta, orders, curve)
        assert conv.cks_delta(eps, orders, curve) == pytest.approx(delta, rel=1e-6)
        eps = conv.mironov_epsilon(delta, orders, curve)
        assert conv.mironov_delta(eps, orders, curve) == pytest.approx(delta, rel=1e-6)
    eps = conv.optimal_epsilon(1e-3, 4.0, 2.0)
    assert conv.optimal_delta(eps, 4.0, 2.0) <= 1e-3 * (1 + 1e-6)


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.05, 4.0), delta_exp=st.floats(-12, -1))
def test_every_conversion_is_at_least_the_exact_gaussian(mu, delta_exp):
    delta = 10.0**delta_exp
    exact = profiles.gaussian_epsilon(delta, mu)
    orders = rdp.DEFAULT_ORDERS
    curve = rdp.gaussian_rdp(orders, mu)
    assert conv.cks_epsilon(delta, orders, curve) >= exact - 1e-9
    assert conv.mironov_epsilon(delta, orders, curve) >= conv.cks_epsilon(delta, orders, curve) - 1e-9


@settings(max_examples=8, deadline=None)
@given(mu=st.floats(0.1, 3.0), delta_exp=st.floats(-10, -2), alpha=st.floats(1.5, 30.0))
def test_optimal_conversion_is_between_exact_and_cks(mu, delta_exp, alpha):
    delta = 10.0**delta_exp
    optimal = conv.optimal_epsilon(delta, alpha, alpha * mu**2 / 2)
    assert optimal >= profiles.gaussian_epsilon(delta, mu) - 1e-6
    assert optimal <= conv.cks_epsilon(delta, [alpha], [alpha * mu**2 / 2]) + 1e-6


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.01, 10.0), eps=st.lists(st.floats(0, 50), min_size=2, max_size=8))
@example(mu=0.5, eps=[50.0, 49.99999999999999])  # rose by 5e-10 under scipy 1.12 before the erfcx form
def test_gaussian_delta_falls_as_epsilon_grows(mu, eps):
    grid = np.sort(np.array(eps))
    values = profiles.gaussian_log_delta(grid, mu)
    # monotone up to the rounding of the values themselves (a few ulps; 1 ulp of 5e3 is 9e-13)
    assert np.all(np.diff(values) <= 1e-12 + 4 * np.spacing(np.abs(values[1:])))
    assert np.all(np.isfinite(values) | np.isneginf(values))

"""Amplification by iteration and E_gamma contraction: closed forms and limiting cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpaudit.mechanisms.accounting import contraction as egamma
from dpaudit.mechanisms.accounting import iteration, profiles


def test_shift_schedule_equal_noise_is_thm23():
    n, t = 12, 5
    shifts = np.zeros(n)
    shifts[t - 1] = 2.0  # 2 eta L with eta = L = 1
    value = iteration.shift_reduction_rdp([3.0], shifts, 1.0)[0]
    assert value == pytest.approx(iteration.pnsgd_index_rdp([3.0], n=n, index=t, lipschitz=1.0, sigma=1.0)[0])


def test_shift_schedule_is_the_taut_string():
    # cumulative shift S = (3, 3, 3, 4): its greatest convex minorant from (0, 0) is the line of slope 1
    a, cost = iteration.shift_schedule([3.0, 0.0, 0.0, 1.0], 1.0)
    np.testing.assert_allclose(a, [1, 1, 1, 1], atol=1e-9)
    assert cost == pytest.approx(4 / 2)
    # a shift that arrives late cannot be spread backwards: (0, 0, 2) pays 2 in the last step
    a, _ = iteration.shift_schedule([0.0, 0.0, 2.0], 1.0)
    np.testing.assert_allclose(a, [0, 0, 2], atol=1e-9)


@pytest.mark.parametrize("c", [0.3, 0.7, 0.95])
def test_shift_schedule_with_contraction_matches_closed_form(c):
    n, t = 15, 6
    shifts = np.zeros(n)
    shifts[t - 1] = 2.0
    value = iteration.shift_reduction_rdp([1.0], shifts, 1.0, c)[0]
    closed = iteration.strongly_convex_index_rdp([1.0], n=n, index=t, lipschitz=1.0, sigma=1.0, contraction=c)[0]
    assert value == pytest.approx(closed, rel=1e-8)


def test_contraction_to_one_gives_thm23():
    for t in (1, 7, 20):
        near = iteration.strongly_convex_index_rdp([2.0], n=20, index=t, lipschitz=1.5, sigma=2.0,
                                                   contraction=1 - 1e-7)[0]
        thm23 = iteration.pnsgd_index_rdp([2.0], n=20, index=t, lipschitz=1.5, sigma=2.0)[0]
        assert near == pytest.approx(thm23, rel=1e-5)


def test_contraction_factor():
    assert iteration.contraction_factor(eta=0.1, smoothness=1.0, strong_convexity=0.0) == 1.0
    # quadratic with eta = 1/beta: c^2 = 1 - 2 eta beta lambda / (beta + lambda) = 0: a reset
    assert iteration.contraction_factor(eta=1.0, smoothness=1.0, strong_convexity=1.0) == 0.0


def test_stop_pnsgd_orders_are_limited():
    alpha_star = iteration.stop_pnsgd_max_order(lipschitz=1.0, sigma=2.0)
    # sigma >= L sqrt(2 (alpha - 1) alpha) holds exactly at alpha*
    assert 2.0 == pytest.approx(math.sqrt(2 * (alpha_star - 1) * alpha_star))
    values = iteration.stop_pnsgd_rdp([alpha_star - 0.01, alpha_star + 0.01], n=100, lipschitz=1.0, sigma=2.0)
    assert np.isfinite(values[0]) and np.isinf(values[1])
    assert values[0] == pytest.approx((alpha_star - 0.01) * 4 * math.log(100) / (100 * 4.0))


def test_multi_epoch_limits():
    one = iteration.multi_epoch_rdp([2.0], n=10, epochs=1, index=4, lipschitz=1.0, sigma=1.0)
    assert one == pytest.approx(iteration.pnsgd_index_rdp([2.0], n=10, index=4, lipschitz=1.0, sigma=1.0))
    for i in range(1, 11):
        value = iteration.multi_epoch_rdp([2.0], n=10, epochs=10, index=i, lipschitz=1.0, sigma=1.0)[0]
        assert value < 4 * 2.0  # Thm 35: below 4 alpha L^2 / sigma^2


def test_bounded_domain_bound_stops_growing():
    def window(alphas, sigma2, horizon, n=10):
        return math.ceil(horizon / n) * iteration.local_rdp(alphas, lipschitz=1.0, sigma=sigma2)

    values = [iteration.bounded_domain_rdp([4.0], diameter=1.0, eta=0.5, sigma=2.0, steps=10 * epochs,
                                           step_rdp=window)[0] for epochs in (5, 50, 200)]
    assert np.all(np.isfinite(values))
    assert values[2] <= values[1] + 1e-12 and values[1] == pytest.approx(values[2], rel=1e-9)
    composed = 200 * iteration.local_rdp([4.0], lipschitz=1.0, sigma=2.0)[0]
    assert values[2] < composed / 10


def test_thm4_last_index_is_the_gaussian_mechanism():
    eps = np.array([0.0, 0.5, 1.0, 3.0])
    got = egamma.gaussian_index_log_delta(eps, n=20, index=20, shift_ratio=1.0, diameter_ratio=5.0)
    np.testing.assert_allclose(got, profiles.gaussian_log_delta(eps, 1.0))
    # docs/theory.md 5: n=20, eta=0.1, sigma=2, L=1, K=[0,1], last index: Thm 4 gives 0.127 at eps = 1
    value = math.exp(egamma.gaussian_index_log_delta(1.0, n=20, index=20, shift_ratio=1.0, diameter_ratio=5.0))
    assert value == pytest.approx(0.1269, abs=1e-4)


def test_thm5_worst_index_and_closed_form():
    eps = np.array([0.5, 1.0, 2.0])
    n, psi, d = 50, 2.0, 10.0
    got = np.exp(egamma.stopped_log_delta(eps, n=n, shift_ratio=psi, diameter_ratio=d))
    theta1 = profiles.gaussian_delta(eps, psi)
    theta2 = profiles.gaussian_delta(eps, d)
    direct = theta1 * sum(theta2**k for k in range(n)) / n  # eq. (17), first index
    np.testing.assert_allclose(got, direct, rtol=1e-10)
    closed = theta1 / (n * (1 - theta2))  # eq. (18)
    assert np.all(got <= closed * (1 + 1e-12))
    # mixture over stopping times: at least the worst stopping time's share
    per_index = [np.exp(egamma.gaussian_index_log_delta(eps, n=k, index=1, shift_ratio=psi, diameter_ratio=d))
                 for k in range(1, n + 1)]
    np.testing.assert_allclose(got, np.mean(per_index, axis=0), rtol=1e-10)


def test_laplace_index_bound():
    eps = np.array([0.0, 1.0, 2.5])
    last = np.exp(egamma.laplace_index_log_delta(eps, n=5, index=5, epsilon_shift=2.0, epsilon_diameter=3.0))
    np.testing.assert_allclose(last, profiles.laplace_delta(eps, 2.0))
    earlier = np.exp(egamma.laplace_index_log_delta(eps, n=5, index=3, epsilon_shift=2.0, epsilon_diameter=3.0))
    np.testing.assert_allclose(earlier, profiles.laplace_delta(eps, 2.0) * profiles.laplace_delta(eps, 3.0) ** 2)
    assert earlier[-1] == 0.0  # eps >= 2L/v


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 60), sigma=st.floats(0.3, 5.0), eta=st.floats(0.01, 1.0), eps=st.floats(0.0, 5.0))
def test_per_index_bounds_do_not_decrease_toward_later_indices(n, sigma, eta, eps):
    rdp = [iteration.pnsgd_index_rdp([2.0], n=n, index=t, lipschitz=1.0, sigma=sigma)[0] for t in range(1, n + 1)]
    assert np.all(np.diff(rdp) >= -1e-12)
    deltas = [egamma.gaussian_index_log_delta(eps, n=n, index=t, shift_ratio=2 / sigma,
                                              diameter_ratio=1 / (eta * sigma)) for t in range(1, n + 1)]
    assert np.all(np.diff(deltas) >= -1e-9)
    multi = [iteration.multi_epoch_rdp([2.0], n=n, epochs=3, index=t, lipschitz=1.0, sigma=sigma)[0]
             for t in range(1, n + 1)]
    assert np.all(np.diff(multi) >= -1e-12)

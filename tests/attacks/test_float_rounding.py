"""The grid a float-bits violation is rounded to, and the low-bit scores read given the rounded value."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.attacks.float_bits import grid_reason
from dpaudit.attacks.float_rounding import (
    COARSE_ABOVE_SPACING,
    FINE_BELOW_SPREAD,
    coarse_coordinates,
    fit_sub_grid,
    release_grids,
    round_to_grids,
)
from dpaudit.auditing.statistics.stratified import StratifiedShift
from dpaudit.core.errors import ParameterError


def test_the_grid_is_fine_beside_the_noise_and_coarse_beside_the_floats():
    rng = np.random.default_rng(0)
    cal_a = np.column_stack([1 + rng.laplace(0, 2, 4_000), 1e9 + rng.normal(0, 1e-3, 4_000)])
    cal_b = cal_a - [2.0, 0.0]
    grids = release_grids(cal_a, cal_b)
    assert np.all(np.frexp(grids)[0] == 0.5)  # powers of two: rounding is exact
    spread = np.subtract(*np.quantile(np.r_[cal_a[:, 0], cal_b[:, 0]], [0.75, 0.25]))
    assert spread * 2.0 ** -(FINE_BELOW_SPREAD + 1) < grids[0] <= spread * 2.0 ** -FINE_BELOW_SPREAD
    # 1e9 has a float spacing of 2^-23: a grid fine beside its noise (1e-3) would be 2^-20 > 2^16 * 2^-23 ...
    assert grids[1] >= 2.0 ** COARSE_ABOVE_SPACING * np.spacing(1e9)
    assert coarse_coordinates(cal_a, cal_b, grids) == [1]  # ... so coarse wins there, and it is named
    rounded = round_to_grids(cal_a, grids)
    assert np.all(np.abs(rounded - cal_a) <= grids / 2) and np.all(np.remainder(rounded, grids) == 0)
    assert grid_reason(rounded, round_to_grids(cal_b, grids)) is not None  # no bit below the grid is left


def test_rounding_keeps_infinities_and_refuses_bad_grids():
    assert np.array_equal(round_to_grids(np.array([[np.inf], [0.3]]), np.array([0.25])), [[np.inf], [0.25]])
    with pytest.raises(ParameterError, match="grids must be 1 positive numbers"):
        round_to_grids(np.zeros((2, 1)), np.array([0.0]))


def _p_value(low_bits, cal_a, cal_b) -> float:
    tests = {}
    for side, outputs in (("a", cal_a), ("b", cal_b)):
        for table, scores, cells in low_bits.scored(outputs):
            tests.setdefault((table.column, table.feature), StratifiedShift()).add(side, scores, cells)
    return min(test.finish().p_value for test in tests.values())


def test_an_atom_is_a_value_not_low_bits():
    # an exact mechanism that sometimes releases the sentinel 1.7, more often under S': the sentinel's bits are
    # not those of the values near it; as a cell of its own it is read as a value, never as a low-bit leak
    rng = np.random.default_rng(2)

    def with_sentinel(shift: float, rate: float, n: int) -> np.ndarray:
        noise = np.round(rng.exponential(1.0, n) * 2.0 ** 40) / 2.0 ** 40
        return np.where(rng.uniform(size=n) < rate, 1.7, shift + noise)[:, None]

    cal_a, cal_b = with_sentinel(1.0, 0.01, 4_000), with_sentinel(2.0, 0.05, 4_000)
    fresh_a, fresh_b = with_sentinel(1.0, 0.01, 20_000), with_sentinel(2.0, 0.05, 20_000)
    # a grid of 1/2 puts the atom in a cell with many other values; no cell straddles two binades (the values
    # stay above 1, so no cell holds the many binades near 0: there, with so coarse a grid, the values' own
    # slope across a cell would tell the datasets apart)
    low_bits = fit_sub_grid(cal_a, cal_b, np.array([0.5]))
    assert 1.7 in low_bits.atoms[0] and low_bits.tests == 3
    assert _p_value(low_bits, fresh_a, fresh_b) > 0.05
    low_bits.atoms[0] = np.zeros(0)  # the atom read inside its grid cell instead: a "leak" of the value alone
    assert _p_value(low_bits, fresh_a, fresh_b) < 1e-6


def test_a_float_sum_leaks_below_the_grid():
    rng = np.random.default_rng(3)

    def naive(shift: float, n: int) -> np.ndarray:
        return (shift + rng.laplace(0.0, 2.0, n))[:, None]

    cal_a, cal_b = naive(1.0, 2_000), naive(-1.0, 2_000)
    low_bits = fit_sub_grid(cal_a, cal_b, release_grids(cal_a, cal_b))
    assert _p_value(low_bits, naive(1.0, 10_000), naive(-1.0, 10_000)) < 1e-50

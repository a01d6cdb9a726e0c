"""Anytime-valid bounds by betting (audit/statistics/betting.py, docs/theory.md 13).

The null tests watch correct score laws at their exact epsilon for many seeds and count the seeds whose
bound *ever* exceeds the truth; Ville's inequality allows at most alpha = 0.05 of them in expectation,
and each test's tolerance is the binomial count at that rate that is exceeded with probability below
0.003 (stated beside it). A control that places each chunk's tests on the chunk itself (not predictable)
shows that the count can fail: it exceeds the same tolerance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.auditing.statistics.betting import Bets, BettingProcess, epsilon_grid
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

pytestmark = pytest.mark.statistical

ALPHA = 0.05


def _tolerance(seeds: int, alpha: float = ALPHA, level: float = 0.003) -> int:
    """The largest count of flagged seeds a correct process shows with probability >= 1 - ``level``."""
    return int(stats.binom.ppf(1 - level, seeds, alpha))


def _schedule(first: int, total: int) -> list[int]:
    sizes, size = [first], first
    while sum(sizes) < total:
        sizes.append(min(size, total - sum(sizes)))
        size *= 2
    return sizes


def _watch(draw, claim: float, delta: float, seed: int, total: int, cheat: bool = False) -> BettingProcess:
    """Bet on ``draw(rng, n) -> (a, b)`` chunk by chunk; ``cheat`` places each chunk's bets on itself."""
    rng = np.random.default_rng(seed)
    process = BettingProcess(delta, ALPHA, epsilon_grid([claim]))
    seen_a, seen_b = [], []
    for number, size in enumerate(_schedule(50, total)):
        a, b = draw(rng, size)
        if number:
            bets = process.bets(a, b) if cheat else process.bets(np.concatenate(seen_a), np.concatenate(seen_b))
            process.update(bets, a, b)
        else:
            process.trials += size
        seen_a.append(a)
        seen_b.append(b)
    return process


def _laplace(rng, n):
    # pure DP: Laplace(1) around 0 and 1 is 1-DP exactly (the log ratio is bounded by 1 everywhere)
    return rng.laplace(1.0, 1.0, n), rng.laplace(0.0, 1.0, n)


def test_correct_laplace_watched_at_its_exact_epsilon_flags_at_most_alpha():
    seeds, total = 80, 3_000
    flags = sum(_watch(_laplace, 1.0, 0.0, seed, total).exceeded_at(1.0) is not None for seed in range(seeds))
    # binomial(80, 0.05): mean 4; P[count > 10] < 0.003
    assert flags <= _tolerance(seeds), flags


def test_correct_gaussian_watched_at_its_exact_epsilon_flags_at_most_alpha():
    delta, mu = 1e-3, 1.0
    truth = gaussian_epsilon(delta, mu)

    def draw(rng, n):
        return rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)

    seeds = 80
    flags = sum(_watch(draw, truth, delta, seed, 3_000).exceeded_at(truth) is not None for seed in range(seeds))
    assert flags <= _tolerance(seeds), flags


def test_tests_placed_on_the_judged_trials_break_validity():
    """The control: the same count fails when each chunk's tests are fitted to the chunk they judge."""
    def draw(rng, n):  # a weak, continuous shift: many tails to overfit
        return rng.normal(0.05, 1.0, n), rng.normal(0.0, 1.0, n)

    claim = gaussian_epsilon(1e-3, 0.05)
    seeds = 60
    flags = sum(_watch(draw, claim, 1e-3, seed, 1_600, cheat=True).exceeded_at(claim) is not None
                for seed in range(seeds))
    assert flags > _tolerance(seeds), flags


def test_a_gross_violation_is_flagged_within_a_few_hundred_trials():
    def draw(rng, n):  # Laplace(1) at distance 2: epsilon 2 against a claim of 1
        return rng.laplace(2.0, 1.0, n), rng.laplace(0.0, 1.0, n)

    times = [_watch(draw, 1.0, 0.0, seed, 20_000).exceeded_at(1.0) for seed in range(10)]
    assert all(t is not None for t in times) and sorted(times)[4] < 1_500, times


def test_the_bound_is_a_run_of_rejected_cells_and_its_trajectory_is_its_history():
    process = BettingProcess(0.0, ALPHA, np.array([0.5, 1.0, 1.5, 2.0]))
    process.rejected_at[:] = [10, 30, -1, 5]
    process.trials = 40
    assert process.lower_bound == 1.0  # cell 3 rejected but cell 2 not: the run stops at 1.0
    assert process.lower_bound_at(20) == 0.5 and process.lower_bound_at(9) == 0.0
    assert process.trajectory() == [(10, 0.5), (30, 1.0)]
    assert process.exceeded_at(0.5) == 30  # cells up to the first top above 0.5 (1.0) must be rejected
    assert process.exceeded_at(1.0) is None


def test_a_cell_without_support_bets_nothing_and_keeps_its_wealth():
    rng = np.random.default_rng(0)
    process = BettingProcess(0.0, ALPHA, epsilon_grid([1.0]))
    same = rng.normal(size=2_000), rng.normal(size=2_000)
    bets = process.bets(*same)  # the luckiest of many tails may suggest a small epsilon, never 0.5
    assert bets.cells.size == 0 or np.all(process.tops[bets.cells] < 0.5)
    before = process.log_wealth.copy()
    process.update(Bets.none(), *same)
    assert np.array_equal(process.log_wealth, before) and process.trials == 2_000


def test_bets_respect_the_constraint_at_each_cell_top():
    rng = np.random.default_rng(1)
    process = BettingProcess(1e-5, ALPHA, epsilon_grid([0.7]))
    bets = process.bets(rng.laplace(1.0, 1.0, 3_000), rng.laplace(0.0, 1.0, 3_000))
    assert bets.cells.size > 0
    assert np.all(bets.bets <= 1 / (np.exp(process.tops[bets.cells]) + 1e-5) + 1e-15)


def test_bad_input_is_refused_naming_the_parameter():
    with pytest.raises(ParameterError, match="delta"):
        BettingProcess(1.5, ALPHA, epsilon_grid())
    with pytest.raises(ParameterError, match="alpha"):
        BettingProcess(0.0, 0.0, epsilon_grid())
    with pytest.raises(ParameterError, match="tops"):
        BettingProcess(0.0, ALPHA, np.array([1.0, 0.5]))
    process = BettingProcess(0.0, ALPHA, epsilon_grid())
    with pytest.raises(ParameterError, match="two sides"):
        process.update(Bets.none(), np.zeros(3), np.zeros(4))


def test_grid_holds_the_claim_and_rounds_to_cell_tops():
    grid = epsilon_grid([0.7071, 3.3333])
    assert 0.7071 in grid and 3.3333 in grid and math.isclose(grid[0], 0.005) and grid[-1] <= 20.0
    assert np.all(np.diff(grid) > 0)
    # above 0.5 a cell is at most 1% wide (its top within 1% of its bottom, up to the 3-decimal rounding), so a
    # bound reported at a cell top loses at most about 1% to the grid
    upper = grid[grid > 0.5]
    assert np.all(upper[1:] / upper[:-1] <= 1.01 + 0.001 / 0.5) and grid[-1] == 20.0

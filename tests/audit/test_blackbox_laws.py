"""Every black-box sampler matches its exact output law; the laws give the published epsilons.

Sampling tests draw a fixed-seed batch of ``N`` trials and compare each
outcome's frequency with its exact probability ``p``: the frequency has
standard error ``sqrt(p (1 - p) / N)``, and a 5-sigma band (plus 2e-4 for
the cells' integration error) is missed by a correct sampler with
probability below 1e-6 per outcome.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.auditing.checks.zoo import blackbox as bb
from dpaudit.auditing.checks.zoo import blackbox_laws as laws
from dpaudit.auditing.checks.zoo import svt_laws

N = 200_000


def _assert_matches(counts: np.ndarray, mass: np.ndarray, trials: int = N, *, total: bool = True) -> None:
    frequency = counts / trials
    band = 5 * np.sqrt(mass * (1 - mass) / trials) + 2e-4
    assert np.all(np.abs(frequency - mass) <= band), np.c_[frequency, mass, band]
    if total:  # a whole law, not a few CDF values
        assert mass.sum() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("noise", ["laplace", "exponential"])
def test_noisy_max_index_sampler_matches_its_law(noise):
    first, second = np.ones(5), np.array([0.0, 2, 2, 2, 2])
    law = laws.noisy_max_index_law(first, second, epsilon=0.1, noise=noise)
    for answers, mass, seed in ((first, law.mass_a, 1), (second, law.mass_b, 2)):
        out = bb.noisy_max(answers, np.random.default_rng(seed), N, epsilon=0.1, noise=noise)
        _assert_matches(np.bincount(out[:, 0].astype(int), minlength=5), mass)
    assert law.true_epsilon <= 0.1 + 1e-9  # eps-DP (Ding et al. 2018)


@pytest.mark.parametrize("noise", ["laplace", "exponential"])
def test_noisy_max_value_sampler_matches_its_cdf(noise):
    answers = np.array([0.0, 2, 1, 1, 2])
    out = bb.noisy_max(answers, np.random.default_rng(3), N, epsilon=0.1, noise=noise, release="value")[:, 0]
    points = np.array([-10.0, 5.0, 20.0, 60.0])
    cdf = np.exp(laws.log_noise_cdf(noise, points[None, :] - answers[:, None], 20.0).sum(axis=0))
    _assert_matches(np.array([(out <= p).sum() for p in points]), cdf, total=False)


def test_noisy_max_value_epsilons():
    ones = np.ones(5)
    assert laws.noisy_max_value_law(ones, ones + 1, epsilon=0.1, noise="laplace").true_epsilon == \
        pytest.approx(0.25, abs=1e-6)  # n eps / 2, in the lower tail
    assert math.isinf(laws.noisy_max_value_law(ones, ones + 1, epsilon=0.1, noise="exponential").true_epsilon)


def _svt_index(out: np.ndarray, cutoff: int | None) -> np.ndarray:
    """The position of each sampled answer vector in the law's enumeration (``_svt_outcomes``)."""
    above, below = svt_laws._svt_outcomes(out.shape[1], cutoff)
    powers = 3 ** np.arange(out.shape[1])
    codes = (above + 2 * below) @ powers  # 1 above, 2 below, 0 not answered: one base-3 code per vector
    sampled = ((out == 1) + 2 * (out == 0)) @ powers
    order = np.argsort(codes)
    position = np.searchsorted(codes[order], sampled)
    assert np.all(codes[order][position] == sampled)  # every sampled vector is an enumerated outcome
    return order[position]


@pytest.mark.parametrize("variant,queries,threshold", [(1, 6, 0.5), (2, 6, 1.0), (4, 6, 1.0), (5, 6, 1.0),
                                                        (6, 4, 1.0)])
def test_svt_sampler_matches_its_law(variant, queries, threshold):
    first = np.ones(queries)
    second = np.where(np.arange(queries) < queries // 2, 2.0, 0.0)
    law = svt_laws.svt_law(first, second, variant=variant, epsilon=0.1, cutoff=1, threshold=threshold)
    cutoff = None if variant in (5, 6) else 1
    for answers, mass, seed in ((first, law.mass_a, 4), (second, law.mass_b, 5)):
        out = bb.sparse_vector(answers, np.random.default_rng(seed), N, variant=variant, epsilon=0.1, cutoff=1,
                               threshold=threshold)
        _assert_matches(np.bincount(_svt_index(out, cutoff), minlength=mass.size), mass)


def test_svt_epsilons_are_the_published_ones():
    ones = np.ones(10)
    half = np.where(np.arange(10) < 5, 2.0, 0.0)
    for variant, threshold in ((1, 0.5), (2, 1.0)):  # eps-DP
        assert svt_laws.svt_law(ones, half, variant=variant, epsilon=0.1, cutoff=1, threshold=threshold
                            ).true_epsilon <= 0.1
    svt4 = svt_laws.svt_law(ones, half, variant=4, epsilon=0.1, cutoff=1, threshold=1.0).true_epsilon
    assert 0.1 < svt4 <= (1 + 6) / 4 * 0.1 + 1e-3  # Lyu et al.: ((1 + 6c) / 4) eps at most
    svt5 = svt_laws.svt_law(np.r_[0.0, [2.0] * 9], ones, variant=5, epsilon=0.1, cutoff=1, threshold=1.0)
    assert math.isinf(svt5.true_epsilon)


def test_svt3_sampler_matches_its_law():
    first, second = np.ones(6), np.r_[[2.0] * 3, [0.0] * 3]
    law = svt_laws.svt_values_law(first, second, epsilon=0.1, threshold=1.0)
    cells = (law.mass_a.size - 1) // 6
    for answers, mass, seed in ((first, law.mass_a, 12), (second, law.mass_b, 13)):
        out = bb.svt_with_values(answers, np.random.default_rng(seed), N, epsilon=0.1, cutoff=1, threshold=1.0)
        above = (out != bb.BELOW) & (out != bb.VALUE_ABORTED)
        first_above = np.where(above.any(axis=1), above.argmax(axis=1), 6)
        by_query = np.r_[mass[:-1].reshape(6, cells).sum(axis=1), mass[-1]]
        _assert_matches(np.bincount(first_above, minlength=7), by_query)
        # the released value of the first query: P(query 0 above and its value <= 4), 4 a cell edge
        edges = laws.grid_edges(-40 * 20.0 - 10, 40 * 20.0 + 10, 4.0)
        below_four = mass[: np.searchsorted(edges, 4.0) + 1].sum()  # cells (-inf, e_0], (e_0, e_1], ...
        _assert_matches(np.array([np.sum(above[:, 0] & (out[:, 0] <= 4.0))]), np.array([below_four]), total=False)
    assert law.true_epsilon > 0.15  # far above the claim 0.1, on six queries already


def test_svt3_with_cutoff_two_sampler_matches_its_law():
    n, span = 6, 10.0
    first, second = np.ones(n), np.r_[[2.0] * 3, [0.0] * 3]
    law = svt_laws.svt_values_law(first, second, epsilon=0.1, threshold=1.0, cutoff=2, span=span)
    cells = laws.grid_edges(-span * 40.0 - 10, span * 40.0 + 10, 8.0).size + 1  # and the two outer cells
    sizes = [size for k in range(n) for size in [cells] + [cells ** 2] * (n - 1 - k)] + [1]
    assert law.mass_a.size == sum(sizes)
    bounds = np.cumsum([0] + sizes)
    for answers, mass, seed in ((first, law.mass_a, 14), (second, law.mass_b, 15)):
        by_pattern = np.add.reduceat(mass, bounds[:-1])  # (k, none), (k, k2) for k2 > k, ..., no query above
        out = bb.svt_with_values(answers, np.random.default_rng(seed), N, epsilon=0.1, cutoff=2, threshold=1.0)
        above = (out != bb.BELOW) & (out != bb.VALUE_ABORTED)
        hits = [tuple(np.flatnonzero(row)) for row in above]
        patterns = [p for k in range(n) for p in [(k,)] + [(k, s) for s in range(k + 1, n)]] + [()]
        index = {p: i for i, p in enumerate(patterns)}
        _assert_matches(np.bincount([index[h] for h in hits], minlength=len(patterns)), by_pattern)


def test_numerical_svt_sampler_matches_its_law():
    """The answer vectors' frequencies, and the CDF of the exact log-ratio of the sampled outputs."""
    n, cutoff, scale = 6, 2, 60.0  # released answers with Lap(3c / eps)
    first, second = np.ones(n), np.r_[[2.0] * 3, [0.0] * 3]
    law = svt_laws.numerical_svt_law(first, second, epsilon=0.1, cutoff=cutoff, threshold=1.0)
    above, below = svt_laws._svt_outcomes(n, cutoff)
    vectors = svt_laws._pattern_masses((first, second), above, below, threshold=1.0, rho_scale=30.0,
                                       query_scale=120.0, step=0.25)
    log_ratio, width = law.log_ratio(), 3 / (64 * scale)  # an outcome's cell spans 2/64 in the sum of shifts
    for answers, mass, vector, seed in ((first, law.mass_a, vectors[0], 16), (second, law.mass_b, vectors[1], 17)):
        out = bb.numerical_svt(answers, np.random.default_rng(seed), N, epsilon=0.1, cutoff=cutoff, threshold=1.0)
        hit = (out != 0) & (out != -1000)
        index = _svt_index(np.where(hit, 1, np.where(out == 0, 0, -1)), cutoff)
        _assert_matches(np.bincount(index, minlength=vector.size), vector)
        shift = np.where(hit, np.abs(out - first) - np.abs(out - second), 0.0).sum(axis=1) / scale
        sampled = np.log(vectors[1][index]) - np.log(vectors[0][index]) + shift
        for z in (-0.04, -0.01, 0.0, 0.01, 0.04):  # P(log-ratio <= z): sampled within the law's, a cell either way
            low, high = mass[log_ratio <= z - width].sum(), mass[log_ratio <= z + width].sum()
            frequency = np.mean(sampled <= z)
            band = 5 * math.sqrt(max(high, 1e-6) * (1 - low) / N)
            assert low - band <= frequency <= high + band, (z, frequency, low, high)
    assert law.mass_a.sum() == pytest.approx(1.0, abs=1e-6) and law.mass_b.sum() == pytest.approx(1.0, abs=1e-6)
    assert law.true_epsilon <= 0.1 + 1e-9  # eps-DP (Wang et al. 2019)


def test_the_ceiling_band_is_the_spread_of_the_oracle_test_s_bound():
    # two outcomes; the oracle accepts the second (ratio 2): FPR 0.1, 1 - FNR 0.2, and its bound is about
    # log(phat_b / phat_a) minus a margin, whose standard deviation by the delta method is sqrt(13 / N)
    # (0.9 / (0.1 N) + 0.8 / (0.2 N)). The band is the central 95% of the bound over binomial draws, so its
    # half-width is about 1.96 of those deviations; tolerance 10%: the quantiles of 4000 draws carry about
    # 4% of the width, the delta method's error falls like 1 / sqrt(N)
    law = laws.OutputLaw(np.array([0.9, 0.1]), np.array([0.8, 0.2]), "two outcomes")
    for trials in (10**4, 10**5):
        band = law.ceiling_band(trials)
        assert band.ceiling == law.ceiling(trials) and band.low < band.ceiling < band.high < math.log(2)
        assert (band.high - band.low) / 2 == pytest.approx(1.96 * math.sqrt(13 / trials), rel=0.10)
    assert law.ceiling_band(10**4) == law.ceiling_band(10**4)  # seeded: a law and N give one band
    # a weaker order's band lies lower, as its ceiling does
    assert law.ceiling_band(10**4, order=np.array([0, 1])).high < law.ceiling_band(10**4).low


def test_merging_a_law_by_ratio_keeps_its_ceiling():
    first, second = np.ones(6), np.r_[[2.0] * 3, [0.0] * 3]
    law = svt_laws.svt_values_law(first, second, epsilon=0.1, threshold=1.0)
    merged = laws.merged_law(law, resolution=1e-4)
    assert merged.outcomes < law.outcomes / 4
    assert merged.ceiling(10**6) == pytest.approx(law.ceiling(10**6), abs=2e-4)
    assert merged.mass_a.sum() == pytest.approx(1.0) and merged.mass_b.sum() == pytest.approx(1.0)


def test_a_score_s_order_has_the_law_s_ceiling_only_when_it_orders_outcomes_as_the_ratio_does():
    law = laws.OutputLaw(np.array([0.5, 0.3, 0.2]), np.array([0.3, 0.3, 0.4]), "three outcomes")
    best = np.argsort(-law.log_ratio(), kind="stable")
    assert law.ceiling(10_000, order=best) == law.ceiling(10_000) > 0
    # accepting first an outcome of ratio 1, then the one S favours, the most telling last: every test of
    # that order is weaker (here none certifies anything)
    assert law.ceiling(10_000, order=np.array([1, 0, 2])) < law.ceiling(10_000)
    from dpaudit.core.errors import ParameterError
    with pytest.raises(ParameterError, match="order must list each of the 3 outcomes once"):
        law.ceiling(10_000, order=np.array([0, 0, 1]))


def test_svt34_law_is_at_least_as_strong_as_either_part():
    first, second = np.r_[[1.0] * 5, [0.0] * 5], np.r_[[0.0] * 5, [1.0] * 5]
    both = svt_laws.svt34_law(first, second, epsilon=0.1, cutoff=2, threshold=1.0)
    values = svt_laws.svt_values_law(first, second, epsilon=0.1, threshold=1.0, cutoff=2, span=20.0)
    answers = svt_laws.svt_law(first, second, variant=4, epsilon=0.1, cutoff=2, threshold=1.0)
    parts = [laws.merged_law(values).ceiling(10**6), answers.ceiling(10**6)]
    assert both.ceiling(10**6) > max(parts) + 0.01  # independent parts: the log ratios add
    assert both.true_epsilon == pytest.approx(values.true_epsilon + answers.true_epsilon, abs=1e-3)


def _shift_index(x: np.ndarray, answers: np.ndarray, shifts: np.ndarray, resolution: int) -> np.ndarray:
    """Each trial's cell of the summed log-ratio statistic in ``laplace_shift_law``'s convolution."""
    index = np.zeros(len(x), dtype=int)
    for i, d in enumerate(shifts):
        # mirror a negative shift so that the moving answer goes up
        u = (x[:, i] - answers[i]) if d > 0 else (answers[i] - x[:, i])
        cells = int(round(2 * abs(d) * resolution))
        inner = np.clip(np.floor(u / abs(d) * cells).astype(int), 0, cells - 1) + 1
        index += np.where(u <= 0, 0, np.where(u >= abs(d), cells + 1, inner))
    return index


def test_laplace_shift_law_matches_the_histogram_sampler():
    answers, shifts, resolution = np.array([1.0, 1, 1]), np.array([1.0, -1, 1]), 4
    law = laws.laplace_shift_law(shifts, scale=2.0, resolution=resolution)
    for start, mass, seed in ((answers, law.mass_a, 6), (answers + shifts, law.mass_b, 7)):
        out = bb.noisy_histogram(start, np.random.default_rng(seed), N, epsilon=0.5)
        _assert_matches(np.bincount(_shift_index(out, answers, shifts, resolution), minlength=mass.size), mass)
    assert law.true_epsilon == pytest.approx(3 / 2.0)


def test_laplace_shift_epsilons_and_the_tail_that_no_budget_sees():
    assert laws.laplace_shift_law(np.array([1.0]), scale=0.1).true_epsilon == pytest.approx(10.0)
    parallel = laws.laplace_shift_law(np.ones(20), scale=200.0)
    assert parallel.true_epsilon == pytest.approx(0.1)
    assert parallel.reach() < 1e-4  # all 20 coordinates in their tails: about 2^-20
    assert parallel.ceiling(10**6) < 0.5 * parallel.true_epsilon


def test_geometric_sampler_matches_its_law_and_claim():
    law = laws.geometric_law(1, 2, epsilon=0.1, n=5)
    for count, mass, seed in ((1, law.mass_a, 8), (2, law.mass_b, 9)):
        out = bb.truncated_geometric(np.array([float(count)]), np.random.default_rng(seed), N, epsilon=0.1)
        _assert_matches(np.bincount(out[:, 0].astype(int), minlength=6), mass)
    assert law.true_epsilon == pytest.approx(math.log(1 + 2.0**-3))  # Balcer & Vadhan 2018, Thm 4.7


@pytest.mark.parametrize("settings", [dict(f=0.75, p=0.45, q=0.55), dict(f=0.95)])
def test_rappor_sampler_matches_its_law(settings):
    law = laws.rappor_law(1, 2, hashes=4, size=20, **settings)
    one_a, one_b = (np.isin(np.arange(20), bb.bloom_positions(v, hashes=4, size=20)) for v in (1, 2))
    only_a, only_b = one_a & ~one_b, one_b & ~one_a
    for value, mass, seed in ((1, law.mass_a, 10), (2, law.mass_b, 11)):
        out = bb.rappor(np.array([float(value)]), np.random.default_rng(seed), N, hashes=4, size=20,
                        instantaneous="p" in settings, **settings)
        k1, k0 = out[:, only_a].sum(axis=1).astype(int), out[:, only_b].sum(axis=1).astype(int)
        _assert_matches(np.bincount(k1 * (only_b.sum() + 1) + k0, minlength=mass.size), mass)
    per_bit = law.true_epsilon / (only_a.sum() + only_b.sum())
    claim = bb.rappor_epsilon(hashes=4, **settings)
    assert per_bit == pytest.approx(claim / 8)  # the claim: 2h = 8 differing bits at most
    assert law.true_epsilon <= claim + 1e-12


def test_ceiling_grows_with_trials_and_stays_below_the_true_epsilon():
    law = svt_laws.svt_law(np.ones(10), np.where(np.arange(10) < 5, 2.0, 0.0), variant=4, epsilon=0.1, cutoff=1,
                       threshold=1.0)
    ceilings = [law.ceiling(n) for n in (10**4, 10**5, 10**6)]
    assert ceilings[0] <= ceilings[1] <= ceilings[2] < law.true_epsilon


def test_product_law_adds_independent_epsilons():
    one = laws.geometric_law(1, 2, epsilon=0.1, n=5)
    assert laws.product_law(one, one).true_epsilon == pytest.approx(2 * one.true_epsilon)

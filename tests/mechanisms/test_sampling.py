"""Each mechanism samples the right distribution (fixed seeds).

Tolerances are derived from the sampling error: a sample mean of N draws
with standard deviation s is checked to within 5 s / sqrt(N), a sample
variance v to within 5 v sqrt(2 / (N - 1)) (its standard error for Gaussian
data; Laplace data use the exact fourth moment). With fixed seeds the tests
are deterministic; the 5-sigma margin makes a correct sampler pass for
essentially any seed, and a mis-scaled one fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from dpaudit import mechanisms
from dpaudit.mechanisms import Dataset, make
from dpaudit.mechanisms.lssgd import laplacian_smooth
from tests.helpers import sample_threaded_and_serial

TRIALS = 40_000


def assert_mean(samples: np.ndarray, expected: np.ndarray | float, std: float) -> None:
    bound = 5 * std / math.sqrt(samples.shape[0])
    np.testing.assert_allclose(samples.mean(axis=0), expected, atol=bound, rtol=0)


def assert_variance(samples: np.ndarray, expected: float, kurtosis_excess: float = 0.0) -> None:
    n = samples.shape[0]
    se = expected * math.sqrt((2 + kurtosis_excess) / (n - 1))
    np.testing.assert_allclose(samples.var(axis=0, ddof=1), expected, atol=5 * se, rtol=0)


def test_pnsgd_linear_whole_space_mean_and_covariance():
    n, dim, eta, sigma = 20, 3, 0.1, 2.0
    rng = np.random.default_rng(1)
    records = rng.normal(size=(n, dim))
    records /= np.maximum(1.0, np.linalg.norm(records, axis=1, keepdims=True))
    mech = make("pnsgd", n=n, dim=dim, eta=eta, sigma=sigma, domain="whole", loss="linear")
    out = mech.sample(records, trials=TRIALS, seed=7)
    # w_n = w_0 - eta * sum_t x_t - eta * sum_t Z_t, Z_t ~ N(0, sigma^2 I)
    std = eta * sigma * math.sqrt(n)
    assert_mean(out, -eta * records.sum(axis=0), std)
    assert_variance(out, std**2)
    covariance = np.cov(out, rowvar=False)
    off_diagonal = covariance[~np.eye(dim, dtype=bool)]
    assert np.all(np.abs(off_diagonal) < 5 * std**2 / math.sqrt(TRIALS))


def test_pnsgd_laplace_noise_variance():
    n, eta, scale = 10, 0.5, 1.0
    mech = make("pnsgd", n=n, dim=1, eta=eta, sigma=None, scale=scale, noise="laplace", domain="whole")
    out = mech.sample(trials=TRIALS, seed=3)
    variance = n * 2 * (eta * scale) ** 2  # Var Lap(b) = 2 b^2
    # the sum of n Laplace variables has excess kurtosis 3 / n
    assert_variance(out, variance, kurtosis_excess=3.0 / n)
    assert_mean(out, 0.0, math.sqrt(variance))


def _stopping_counts(variant: str, n: int) -> np.ndarray:
    # unit gradients and negligible noise: the final coordinate is -eta * (steps taken)
    eta = 0.5
    mech = make("pnsgd", n=n, dim=1, eta=eta, sigma=1e-9, domain="whole", variant=variant)
    out = mech.sample(np.ones((n, 1)), trials=TRIALS, seed=11)
    return np.rint(-out[:, 0] / eta).astype(int)


def test_stop_pnsgd_stopping_time_is_uniform():
    n = 25
    steps = _stopping_counts("stop", n)
    counts = np.bincount(steps, minlength=n + 1)
    assert counts[0] == 0 and steps.max() == n
    result = scipy.stats.chisquare(counts[1:])
    assert result.pvalue > 1e-4, result


def test_skip_pnsgd_skips_uniformly():
    n = 25
    steps = _stopping_counts("skip", n)
    skipped = n - steps
    counts = np.bincount(skipped, minlength=n // 2 + 1)
    assert len(counts) == n // 2 + 1
    assert scipy.stats.chisquare(counts).pvalue > 1e-4


def test_multi_epoch_runs_every_pass():
    n, epochs, eta = 4, 3, 0.25
    mech = make("multi-epoch-pnsgd", n=n, dim=1, eta=eta, sigma=1e-9, domain="whole", epochs=epochs)
    out = mech.sample(np.ones((n, 1)), trials=10, seed=0)
    np.testing.assert_allclose(out, -eta * n * epochs, atol=1e-6)


@pytest.mark.parametrize("name, extra", [
    ("pnsgd", {"domain": "ball", "radius": 0.5}),
    ("pnsgd", {"domain": "box", "low": 0.0, "high": 1.0, "init": "boundary"}),
    ("pnsgd", {"domain": "box", "low": 0.0, "high": 1.0, "noise": "laplace", "sigma": None, "scale": 1.0}),
    ("pnsgd", {"domain": "ball", "loss": "logistic", "variant": "stop"}),
    ("multi-epoch-pnsgd", {"domain": "ball", "radius": 0.3, "loss": "huber"}),
    ("projected-kernel", {"domain": "ball", "radius": 0.5}),
    ("projected-kernel", {"domain": "box", "low": 0.0, "high": 1.0, "step": "contraction", "contraction": 0.5}),
    ("dp-sgd", {"domain": "ball", "radius": 0.2, "loss": "quadratic"}),
    ("dp-lssgd", {"domain": "box", "low": -0.1, "high": 0.1}),
])
def test_projected_outputs_lie_in_domain(name, extra):
    if name in ("pnsgd", "multi-epoch-pnsgd"):
        extra = {"eta": 1.0, **extra}
    mech = make(name, n=10, dim=3, **extra)
    rng = np.random.default_rng(0)
    records = rng.normal(scale=3.0, size=(10, mech.record_dim))
    out = torch.from_numpy(mech.sample(records, trials=2000, seed=5))
    assert bool(mech.domain_set.contains(out, tol=1e-9).all())
    # the noise is large enough that the projection is active for some trials
    assert bool((~mech.domain_set.contains(out / 0.999, tol=0.0)).any())


def test_fft_smoothing_equals_dense_inverse():
    dim, smoothing = 9, 1.7
    laplacian = -2 * np.eye(dim) + np.roll(np.eye(dim), 1, axis=1) + np.roll(np.eye(dim), -1, axis=1)
    a_s = np.eye(dim) - smoothing * laplacian
    v = np.random.default_rng(2).normal(size=(5, dim))
    expected = np.linalg.solve(a_s, v.T).T
    got = laplacian_smooth(torch.from_numpy(v), smoothing).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    # even dimension too, and s = 0 is the identity
    dim = 8
    laplacian = -2 * np.eye(dim) + np.roll(np.eye(dim), 1, axis=1) + np.roll(np.eye(dim), -1, axis=1)
    v = np.random.default_rng(3).normal(size=(dim,))
    np.testing.assert_allclose(laplacian_smooth(torch.from_numpy(v), 0.5).numpy(),
                               np.linalg.solve(np.eye(dim) - 0.5 * laplacian, v), atol=1e-12)
    np.testing.assert_array_equal(laplacian_smooth(torch.from_numpy(v), 0.0).numpy(), v)


def test_batch_sizes_have_the_right_laws():
    n, m, trials = 50, 10, 20_000
    rng = np.random.default_rng(4)
    wor = make("dp-sgd", n=n, batch_size=m, sampling="without-replacement")
    sizes = wor.batch_mask(trials, rng, torch.float64).sum(1).numpy()
    assert np.all(sizes == m)
    poisson = make("dp-sgd", n=n, batch_size=m, sampling="poisson")
    mask = poisson.batch_mask(trials, rng, torch.float64).numpy()
    q = m / n
    sizes = mask.sum(1)
    counts = np.bincount(sizes.astype(int), minlength=n + 1)
    expected = scipy.stats.binom.pmf(np.arange(n + 1), n, q) * trials
    keep = expected > 5  # chi-square needs expected counts >= 5: pool the tails
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    assert scipy.stats.chisquare(observed, expected).pvalue > 1e-4
    # every record is equally likely to be chosen
    assert_mean(wor.batch_mask(trials, rng, torch.float64).numpy(), m / n, math.sqrt(q * (1 - q)))


def test_dp_sgd_linear_mean_and_variance():
    n, m, steps, eta, noise_std = 30, 5, 40, 0.05, 0.7
    records = np.ones((n, 2)) * np.array([0.6, -0.8])
    mech = make("dp-sgd", n=n, dim=2, batch_size=m, steps=steps, eta=eta, noise_std=noise_std)
    out = mech.sample(records, trials=TRIALS, seed=9)
    std = eta * noise_std * math.sqrt(steps)
    assert_mean(out, -eta * steps * records[0], std)
    assert_variance(out, std**2)


def test_dp_sgd_nonlinear_path_matches_linear_for_quadratic_mean():
    # quadratic loss with eta*beta = 1 resets to the batch mean of the centres
    n, m = 6, 6
    centres = np.tile(np.array([[0.3, -0.2]]), (n, 1))
    mech = make("dp-sgd", n=n, dim=2, batch_size=m, steps=3, eta=1.0, noise_std=1e-9,
                loss="quadratic", smoothness=1.0, domain="ball", radius=1.0)
    out = mech.sample(centres, trials=10, seed=0)
    # released on the grid: rounded toward zero on the ball, so within one grid step of the centre
    np.testing.assert_allclose(out, np.tile(centres[0], (10, 1)), atol=mech.release_grid)


def test_logistic_gradient_matches_autograd():
    from dpaudit.mechanisms.domains import Ball
    from dpaudit.mechanisms.losses import make_loss

    loss = make_loss("logistic", dim=3, lipschitz=1.0, domain=Ball(1.0))
    rng = np.random.default_rng(6)
    records = loss.prepare(torch.from_numpy(np.column_stack([rng.normal(size=(4, 3)), [1, -1, 1, -1]])))
    w = torch.from_numpy(rng.normal(size=(4, 3))).requires_grad_(True)
    x, y = records[:, :3], records[:, 3]
    value = torch.log1p(torch.exp(-y * (w * x).sum(1))).sum()
    value.backward()
    np.testing.assert_allclose(loss.gradient(w.detach(), records).numpy(), w.grad.numpy(), atol=1e-12)
    assert float(torch.linalg.vector_norm(x, dim=1).max()) <= 1.0 + 1e-12


@pytest.mark.parametrize("name", ["linear", "quadratic", "logistic", "huber"])
def test_in_place_descent_step_equals_the_gradient_step(name):
    from dpaudit.mechanisms.domains import Ball
    from dpaudit.mechanisms.losses import make_loss

    loss = make_loss(name, dim=3, lipschitz=1.0, domain=Ball(1.0))
    rng = np.random.default_rng(7)
    record = loss.prepare(torch.from_numpy(rng.normal(size=loss.record_dim)))
    w = torch.from_numpy(rng.normal(size=(5, 3)))
    expected = w - 0.3 * loss.gradient(w, record)
    np.testing.assert_allclose(loss.descend_(w.clone(), record, 0.3).numpy(), expected.numpy(), atol=1e-14)


def test_reset_canary_kernel_is_a_gaussian_shift():
    n, t, s, u = 12, 5, 0.5, 0.8
    mech = make("projected-kernel", n=n, dim=1, sigma=s, domain="whole")
    records = np.zeros((n, 2))
    records[t - 1] = [u, 1.0]  # the canary's step is the constant map w -> c + u
    out = mech.sample(records, trials=TRIALS, seed=2)
    std = s * math.sqrt(n - t + 1)  # earlier noise is erased by the reset
    assert_mean(out, u, std)
    assert_variance(out, std**2)


def test_kernel_contraction_shrinks_the_start():
    mech = make("projected-kernel", n=3, dim=1, sigma=1e-9, domain="whole",
                step="contraction", contraction=0.5, init=[8.0])
    np.testing.assert_allclose(mech.sample(trials=3, seed=0), 1.0, atol=1e-6)


def test_gaussian_and_laplace_baselines():
    records = np.array([[3.0, 4.0], [0.1, 0.0]])  # first row clipped to norm 1
    out = make("gaussian", dim=2, sensitivity=1.0, sigma=2.0).sample(records, trials=TRIALS, seed=1)
    assert_mean(out, [0.6 + 0.1, 0.8], 2.0)
    assert_variance(out, 4.0)
    out = make("laplace", dim=2, sensitivity=1.0, scale=0.5).sample(records, trials=TRIALS, seed=1)
    assert_mean(out, [3 / 7 + 0.1, 4 / 7], math.sqrt(0.5))  # L1 clipping of (3, 4)
    assert_variance(out, 2 * 0.25, kurtosis_excess=3.0)


def test_shuffled_rr_count_distribution_and_shuffle():
    n, eps0 = 40, 1.0
    bits = np.zeros((n, 1))
    bits[: n // 4] = 1
    mech = make("shuffled-rr", n=n, epsilon0=eps0)
    out = mech.sample(bits, trials=TRIALS, seed=8)
    p = math.exp(eps0) / (1 + math.exp(eps0))
    ones = int(bits.sum())
    counts = out.sum(axis=1)
    # count = Bin(ones, p) + Bin(n - ones, 1 - p)
    mean = ones * p + (n - ones) * (1 - p)
    variance = n * p * (1 - p)
    assert_mean(counts[:, None], mean, math.sqrt(variance))
    assert_variance(counts[:, None], variance)
    # after the shuffle every position has the same law
    per_position = out.mean(axis=0)
    assert_mean(out, mean / n, math.sqrt(mean / n * (1 - mean / n)))
    assert per_position.std() < 5 * math.sqrt(mean / n / TRIALS)


def test_same_seed_same_array_and_seed_sequences():
    mech = make("pnsgd", n=5, dim=2)
    a = mech.sample(trials=100, seed=123)
    np.testing.assert_array_equal(a, mech.sample(trials=100, seed=123))
    assert not np.array_equal(a, mech.sample(trials=100, seed=124))
    children = np.random.SeedSequence(5).spawn(2)
    b = mech.sample(trials=100, seed=children[0])
    np.testing.assert_array_equal(b, mech.sample(trials=100, seed=np.random.SeedSequence(5).spawn(2)[0]))
    assert not np.array_equal(b, mech.sample(trials=100, seed=children[1]))


def test_gradient_canary_injection_and_clipping():
    n, eta = 4, 1.0
    data = Dataset(np.zeros((n, 1))).inject(2, [5.0])  # clipped to L = 1
    mech = make("pnsgd", n=n, dim=1, eta=eta, sigma=1e-9, domain="whole")
    np.testing.assert_allclose(mech.sample(data, trials=3, seed=0), -1.0, atol=1e-6)


def test_float32_option():
    out = make("pnsgd", n=5, dim=2, dtype="float32").sample(trials=10, seed=0)
    assert out.dtype == np.float32 and out.shape == (10, 2)


def test_from_callable_wraps_a_user_function():
    def noisy_count(data, rng):
        return [data.sum() + rng.laplace(scale=1.0)]

    mech = mechanisms.from_callable(noisy_count, 1)
    out = mech.sample(np.ones((7, 1)), trials=TRIALS // 4, seed=3)
    assert out.shape == (TRIALS // 4, 1)
    assert_mean(out, 7.0, math.sqrt(2.0))
    np.testing.assert_array_equal(out, mech.sample(np.ones((7, 1)), trials=TRIALS // 4, seed=3))


@pytest.mark.parametrize("sampling", ["poisson", "without-replacement"])
def test_canary_only_path_has_the_closed_form_law(sampling):
    # zero background and one canary gradient L u: each step adds eta (B_t L / m + Z_t), B_t ~ Bern(q)
    # under both samplings (one record is in a uniform m-subset with probability m / n)
    n, m, steps, eta, noise_std = 400, 20, 30, 0.5, 0.05
    data = Dataset(np.zeros((n, 1))).inject(7, [1.0])
    mech = make("dp-sgd", n=n, dim=1, batch_size=m, steps=steps, eta=eta, noise_std=noise_std, sampling=sampling)
    out = mech.sample(data, trials=TRIALS, seed=21)
    q = m / n
    variance = eta**2 * steps * (q * (1 - q) / m**2 + noise_std**2)
    assert_mean(out, -eta * steps * q / m, math.sqrt(variance))
    # the sum of Bernoulli and Gaussian terms is close to Gaussian: kurtosis excess is small
    assert_variance(out, variance, kurtosis_excess=0.5)


def test_without_replacement_membership_of_a_few_records_has_the_exact_joint_law():
    # selection sampling over 3 given records of a uniform 3-subset of 8: a pattern with j
    # members has probability C(5, 3 - j) / C(8, 3); chi-square over the 8 patterns
    n, m, count, trials = 8, 3, 3, 40_000
    mech = make("dp-sgd", n=n, batch_size=m, sampling="without-replacement")
    members = mech.membership(trials, count, np.random.default_rng(12), torch.float64).numpy()
    patterns = members @ np.array([1, 2, 4])
    observed = np.bincount(patterns.astype(int), minlength=8)
    ones = np.array([bin(p).count("1") for p in range(8)])
    expected = np.array([math.comb(n - count, m - j) if m - j <= n - count else 0 for j in ones])
    expected = expected / math.comb(n, m) * trials
    assert scipy.stats.chisquare(observed, expected).pvalue > 1e-4
    # the same law as the dense batch mask's first three columns
    dense = mech.batch_mask(trials, np.random.default_rng(13), torch.float64).numpy()[:, :count]
    dense_counts = np.bincount((dense @ np.array([1, 2, 4])).astype(int), minlength=8)
    assert scipy.stats.chisquare(dense_counts, expected).pvalue > 1e-4


def test_sampling_is_tiled_and_independent_of_threads():
    from dpaudit.mechanisms import tiles

    mech = make("pnsgd", n=5, dim=3, sigma=0.5)
    trials = 2 * tiles.TILE_TRIALS + 17
    assert tiles.tile_sizes(trials) == [tiles.TILE_TRIALS, tiles.TILE_TRIALS, 17]
    threaded, serial = sample_threaded_and_serial(mech, trials, seed=4)
    np.testing.assert_array_equal(threaded, serial)
    # tiles draw from different streams: no two tiles repeat each other
    assert not np.allclose(threaded[:17], threaded[tiles.TILE_TRIALS:tiles.TILE_TRIALS + 17])


def test_tiled_sampling_works_in_a_forked_child():
    # the parent's tile pool has threads; a forked child must build its own instead of waiting forever
    import multiprocessing

    from dpaudit.mechanisms import tiles

    mech = make("pnsgd", n=3, dim=2)
    trials = 2 * tiles.TILE_TRIALS
    expected = mech.sample(trials=trials, seed=5)  # creates the pool in this process
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(mech.sample, kwds={"trials": trials, "seed": 5})
        np.testing.assert_array_equal(result.get(timeout=60), expected)

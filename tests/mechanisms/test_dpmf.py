"""dp-mf's sampler against its laws: the correlated noise, the release's likelihood-ratio statistic, DP-SGD.

Statistical checks use fixed seeds; every tolerance is a number of standard
errors of the quantity compared (given beside it), chosen so that a correct
sampler fails with probability below about 1e-6 per check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import dpaudit
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.mechanisms.accounting.descriptions import Strategy
from dpaudit.mechanisms.accounting.strategies import banded_sqrt_coefficients, factor
from dpaudit.mechanisms.correlated import CorrelatedNoise

STRATEGIES = [Strategy("identity", 12), Strategy("toeplitz", 12, coefficients=(1.0, 0.5, -0.25)),
              Strategy("banded-sqrt", 40, coefficients=banded_sqrt_coefficients(5)),
              Strategy("tree", 16, epoch_steps=8)]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.kind)
def test_the_noise_has_the_strategy_s_covariance(strategy):
    rows, dim = 20_000, 2
    source = CorrelatedNoise(strategy, rows, dim, np.random.default_rng(7), torch.float64, block=8)
    noise = torch.stack([source.next().clone() for _ in range(strategy.steps)], 1).numpy()
    samples = rows * dim
    empirical = np.einsum("rtd,rsd->ts", noise, noise) / samples
    covariance = factor(strategy).covariance
    # the standard error of a Gaussian covariance entry: sqrt((K_tt K_ss + K_ts^2) / N); 6 of them, for up to
    # 1,600 entries (a correct sampler exceeds it with probability below 1e-6)
    error = np.sqrt((np.outer(np.diag(covariance), np.diag(covariance)) + covariance**2) / samples)
    assert np.all(np.abs(empirical - covariance) <= 6 * error)
    # the last iterate's shortcut reads the same normals: the same sum, to rounding
    again = CorrelatedNoise(strategy, rows, dim, np.random.default_rng(7), torch.float64, block=8)
    np.testing.assert_allclose(again.total().numpy(), noise.sum(1), rtol=0, atol=1e-9)


def _statistic_moments(mech, trials=40_000, seed=3):
    pair = CanarySpec().build(mech, mech.default_index)
    laws = mech.exact_output_laws(pair.dataset_a, pair.dataset_b)
    found = []
    for data, mean in ((pair.dataset_a, laws.means_a[0]), (pair.dataset_b, laws.means_b[0])):
        y = laws.statistic(mech.sample(data, trials=trials, seed=seed))
        found.append((y.mean(), y.var(), mean))
    return found, laws.std


@pytest.mark.parametrize("params", [
    {"strategy": "toeplitz", "coefficients": [1.0, 0.5], "output": "iterates"},
    {"strategy": "tree", "output": "iterates"},
    {"strategy": "banded-sqrt", "bands": 3, "output": "final"},
    {"strategy": "banded-sqrt", "bands": 3, "output": "final", "selection": "shuffled"},
], ids=["toeplitz-iterates", "tree-iterates", "banded-final", "banded-final-shuffled"])
def test_the_release_s_statistic_has_the_exact_law(params):
    mech = dpaudit.make("dp-mf", n=16, steps=16, epochs=4, noise_multiplier=2.0, **params)
    found, std = _statistic_moments(mech)
    trials = 40_000
    for mean, variance, expected in found:
        # the mean to 6 standard errors (std / sqrt(trials)); the variance to 6 standard errors of a Gaussian
        # sample variance (std^2 sqrt(2 / trials))
        assert abs(mean - expected) <= 6 * std / math.sqrt(trials)
        assert abs(variance - std**2) <= 6 * std**2 * math.sqrt(2 / trials)


def test_every_iterate_and_the_last_alone_agree_with_the_sampler_s_two_paths():
    """The last iterate of a linear loss is computed from the summed noise; the general loop gives the same law."""
    shortcut = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="toeplitz", coefficients=[1.0, 0.7],
                            noise_multiplier=1.5)
    loop = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="toeplitz", coefficients=[1.0, 0.7],
                        noise_multiplier=1.5, output="iterates")
    trials = 40_000
    last = shortcut.sample(trials=trials, seed=1)[:, 0]
    looped = loop.sample(trials=trials, seed=2)[:, -1]
    std = math.sqrt(np.var(last) + np.var(looped))
    # two independent samples of one law: the means differ by at most 6 standard errors
    assert abs(last.mean() - looped.mean()) <= 6 * std / math.sqrt(trials)
    assert np.var(last) == pytest.approx(np.var(looped), rel=6 * math.sqrt(4 / trials))


def test_the_identity_strategy_is_dp_sgd_with_fixed_batches():
    """Identity noise, every record in every batch: dp-sgd's full-batch training (noise on the mean gradient
    noise_multiplier L / m), the same exact value and the same law of the last iterate."""
    n, steps, sigma = 4, 8, 2.0
    mf = dpaudit.make("dp-mf", n=n, steps=steps, epochs=steps, noise_multiplier=sigma)
    sgd = dpaudit.make("dp-sgd", n=n, batch_size=n, steps=steps, noise_std=sigma / n, domain="whole")
    for mech in (mf, sgd):
        assert mech.batch_size == n
    pairs = [CanarySpec(kind="gradient", pair="zero").build(mech, n) for mech in (mf, sgd)]
    from dpaudit.mechanisms.accounting.instances import exact_epsilon

    values = [exact_epsilon(p.mechanism, p.dataset_a, p.dataset_b, 1e-5) for p in pairs]
    assert values[0] == pytest.approx(values[1], rel=1e-9)
    trials = 40_000
    for which in ("dataset_a", "dataset_b"):
        a, b = (p.mechanism.sample(getattr(p, which), trials=trials, seed=5)[:, 0] for p in pairs)
        std = math.sqrt(a.var() + b.var())
        assert abs(a.mean() - b.mean()) <= 6 * std / math.sqrt(trials)
        assert a.var() == pytest.approx(b.var(), rel=6 * math.sqrt(4 / trials))
    # and the claim of every noisy gradient is the Gaussian one of dp-sgd's k = steps participations
    claims = {(c.name, str(c.relation)): c.epsilon(1e-5) for c in mf.claims()}
    from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

    assert claims["mf-releases", "zero-out"] == pytest.approx(float(gaussian_epsilon(1e-5, math.sqrt(steps) / sigma)),
                                                              rel=1e-9)


def test_the_default_canary_sits_at_the_worst_pattern_and_per_index_claims_follow_it():
    mech = dpaudit.make("dp-mf", n=32, steps=16, epochs=4, strategy="toeplitz", coefficients=[1.0, 0.9, 0.8],
                        noise_multiplier=3.0, output="iterates")
    worst = {c.name: c.epsilon(1e-5) for c in mech.claims() if str(c.relation) == "zero-out"}
    at = {index: {c.name: c.epsilon(1e-5) for c in mech.claims(index=index) if str(c.relation) == "zero-out"}
          for index in range(1, 33)}
    assert at[mech.default_index]["mf-releases"] == pytest.approx(worst["mf-releases"], rel=1e-12)
    assert max(v["mf-releases"] for v in at.values()) == pytest.approx(worst["mf-releases"], rel=1e-12)
    assert min(v["mf-releases"] for v in at.values()) < worst["mf-releases"] * 0.999  # positions differ here
    # records of one batch share their pattern
    assert at[1]["mf-releases"] == at[2]["mf-releases"]


@pytest.mark.parametrize("loss", ["logistic", "quadratic"])
def test_losses_whose_gradients_depend_on_the_model_run_batched(loss):
    mech = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, dim=3, strategy="banded-sqrt", bands=2, loss=loss,
                        noise_multiplier=1.0, output="iterates", selection="shuffled")
    out = mech.sample(trials=50, seed=0)
    assert out.shape == (50, 24) and np.all(np.isfinite(out))
    assert not np.array_equal(out, mech.sample(trials=50, seed=1))
    np.testing.assert_array_equal(out, mech.sample(trials=50, seed=0))


@pytest.mark.statistical
@pytest.mark.parametrize("strategy,bands", [("identity", None), ("tree", None), ("banded-sqrt", 4)])
def test_audits_of_every_release_certify_inside_their_ceiling_band(strategy, bands):
    mech = dpaudit.make("dp-mf", n=16, steps=16, epochs=4, strategy=strategy, bands=bands, noise_multiplier=4.0,
                        output="iterates")
    result = dpaudit.audit(mech, trials=20_000, delta=1e-5, seed=11)
    row = result.per_index[0]
    exact = next(c for c in row.claims if c.name == "exact-instance")
    claim = next(c for c in row.claims if c.name == "mf-releases" and str(c.relation) == "zero-out")
    assert exact.epsilon == pytest.approx(claim.epsilon, rel=1e-9)
    low, high = row.ceiling_band
    assert low <= result.epsilon_lower_bound <= high
    assert result.verdict == "consistent"


def test_a_changed_strategy_file_changes_the_audit_s_fingerprint(tmp_path):
    from dpaudit.auditing.jobs.fingerprint import code_fingerprint

    path = tmp_path / "c.npy"
    np.save(path, np.eye(4) + 0.5 * np.eye(4, k=-1))
    first = code_fingerprint(dpaudit.make("dp-mf", n=4, steps=4, strategy=str(path)))
    np.save(path, np.eye(4) + 0.25 * np.eye(4, k=-1))  # the same size
    import os

    os.utime(path, ns=(1, 1))  # a time stamp of its own: the file is read again
    second = code_fingerprint(dpaudit.make("dp-mf", n=4, steps=4, strategy=str(path)))
    assert first != second


def test_a_loss_of_one_s_own_runs_and_its_gradients_are_clipped(tmp_path):
    """A user's linear loss gives the law of the built-in linear loss (its gradients clipped to L)."""
    path = tmp_path / "losses.py"
    path.write_text("def doubled(w, record):\n    return 2.0 * record.expand_as(w).clone()\n")
    own = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="banded-sqrt", bands=2, noise_multiplier=1.0,
                       output="iterates", loss=f"{path}:doubled")
    built_in = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="banded-sqrt", bands=2, noise_multiplier=1.0,
                            output="iterates")
    records = np.zeros((8, 1))
    records[3, 0] = 1.0  # 2.0 after doubling: clipped to L = 1, the built-in loss's clipped record
    a = own.sample(records, trials=20_000, seed=4)[:, -1]
    b = built_in.sample(records, trials=20_000, seed=5)[:, -1]
    std = math.sqrt(a.var() + b.var())
    assert abs(a.mean() - b.mean()) <= 6 * std / math.sqrt(20_000)  # 6 standard errors of the difference
    assert own.canary_kinds == ("gradient",)
